//! Which operand of a matmul's MXU kernel the compiler holds stationary, and what its layout costs: a stationary
//! operand stored contracting-dim minor (K in the lanes) is transposed block by block on the transpose unit in
//! parallel with the MXU (`cost::plan_mxu_transposing`), at a rate that depends on which operand it is.
//!
//! Evidence (corpus op records on v4, operands prefetched to CMEM, cycles per 128x128 block after the MXU launch):
//! - a K-minor weight `[K, N]{0,1}` of a product computed as written costs 34-37 cycles per block:
//!   C25.matmul.017 (bf16 [512,24417], M 8: 28,437 cycles, 764 blocks), .053 (f32 [6400,523], M 8: 10,158, 250),
//!   .039 (f32 [2816,441], M 16: 4,947, 88);
//! - the K-minor activation `[M, K]{1,0}` of a product computed transposed (N <= 32 < M, `lower::transposed_result`)
//!   costs 23-25: .019 (bf16 [13464,768], N 8: 17,663, 636 blocks), .015 (bf16 [443,14592], N 8: 12,460, 456),
//!   .031 (bf16 [334,10256], N 4: 7,220, 243).
//!
//! One transpose rate for both (`mxu_weight_transpose_cycles` alone, as before) settled between the two and left
//! v4's decode matmuls 15-27 % under; the activation's blocks now have their own rate,
//! `mxu_act_transpose_cycles`, fitted like the weight's. On v5e-tpu7x the two fit close to each other.

use super::chip::TcParams;
use super::lower::{matmul_operands, transposed_result};
use super::spec::{Checked, Dtype};

/// The stationary operand of an op's MXU kernel and its layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stationary {
    /// Contracting dim major (a `[K, N]{1,0}` weight): loaded into the MXU as stored. Also batched matmuls and
    /// convolutions.
    #[default]
    KMajor,
    /// The weight `[K, N]` stored `{0,1}`, K in the lanes, of a product computed as written.
    KMinorWeight,
    /// The activation `[M, K]` stored `{1,0}`, K in the lanes, held stationary by a product computed transposed.
    KMinorActivation,
}

impl Stationary {
    /// The transpose unit's cycles per 128x128 block of the stationary operand, or `None` when it needs none.
    pub fn transpose_cycles(self, p: &TcParams) -> Option<f64> {
        match self {
            Stationary::KMajor => None,
            Stationary::KMinorWeight => Some(p.mxu_weight_transpose_cycles),
            Stationary::KMinorActivation => Some(p.mxu_act_transpose_cycles),
        }
    }
}

/// The share of a stationary block's transpose cycles an 8-bit operand takes: on a chip whose MXU multiplies that
/// 8-bit type faster (`mxu_int8_speedup`, `mxu_fp8_speedup` above 1), its blocks move through the transpose unit
/// packed, four values a 32-bit lane, so a block takes the rate's share `1 / speedup`; elsewhere, and for wider
/// types, 1 (v4 and tpu7x transpose an int8 block at the bf16 rate). The MXU's weight-tile loads take the same
/// share (`cost`'s window search).
///
/// Evidence (corpus op records, int8 weight `[K, N]{0,1}`, weights prefetched, cycles after the MXU launch per
/// 128x128 block and MXU): v5e C25.matmul8.016 ([8,5864] x [5864,3921]: 10,159 cycles, 1,426 blocks) 17.7,
/// .000 ([8,4480] x [4480,2073]: 6,449, 595 blocks) 17.6, against 45 for a bf16 block; the full rate put them
/// 1.99x and 1.66x over. v4 (no int8 MXU path) costs .016 at 138 a block, its bf16 rate (54,537 cycles).
pub fn packed_transpose_share(p: &TcParams, dtype: Dtype) -> f64 {
    let speedup = match dtype {
        Dtype::Int8 => p.mxu_int8_speedup,
        d if d.is_fp8() => p.mxu_fp8_speedup,
        _ => 1.0,
    };
    1.0 / speedup.max(1.0)
}

/// The stationary operand of `op`'s MXU kernel: for a rank-2 matmul the weight `[K, N]`, or the activation
/// `[M, K]` when the product is computed transposed, contracting-dim minor when the compiler's entry layout
/// (least padding, `padding::tpu_padded`) puts K in the lanes.
pub(crate) fn stationary(op: &Checked) -> Stationary {
    let Checked::Matmul {
        b: 1, m, k, n, dtype, ..
    } = *op
    else {
        return Stationary::KMajor;
    };
    let (x, w, o, _) = matmul_operands(1, m, k, n, dtype, false);
    if transposed_result(1, &o) {
        if x.order == [0, 1] {
            Stationary::KMinorActivation
        } else {
            Stationary::KMajor
        }
    } else if w.order == [1, 0] {
        Stationary::KMinorWeight
    } else {
        Stationary::KMajor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(m: u64, k: u64, n: u64, dtype: &str) -> Stationary {
        stationary(&crate::tensorcore::spec::checked_matmul(m, k, n, dtype))
    }

    #[test]
    fn the_entry_layouts_say_which_operand_is_stationary_and_k_minor() {
        // f32 [6400, 523]: {1,0} pads N 523 to 640 lanes, {0,1} pads nothing (6400 lanes, 523 -> 528 rows).
        assert_eq!(of(8, 6400, 523, "float32"), Stationary::KMinorWeight);
        // bf16 [2816, 1663]: {1,0} pads 1663 -> 1664 lanes, {0,1} 1663 -> 1664 rows; row-major wins the tie.
        assert_eq!(of(8, 2816, 1663, "bfloat16"), Stationary::KMajor);
        // N 8 <= 32 < M 13464: computed transposed; x bf16 [13464, 768] has K in the lanes.
        assert_eq!(of(13464, 768, 8, "bfloat16"), Stationary::KMinorActivation);
        assert_eq!(of(1024, 1024, 1024, "bfloat16"), Stationary::KMajor);
    }

    #[test]
    fn each_operand_takes_its_own_transpose_rate() {
        let mut p = crate::tensorcore::ChipModel::preset("v4").unwrap().params;
        p.mxu_weight_transpose_cycles = 140.0;
        p.mxu_act_transpose_cycles = 96.0;
        assert_eq!(Stationary::KMinorWeight.transpose_cycles(&p), Some(140.0));
        assert_eq!(Stationary::KMinorActivation.transpose_cycles(&p), Some(96.0));
        assert_eq!(Stationary::KMajor.transpose_cycles(&p), None);
    }
}
