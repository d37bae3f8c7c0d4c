//! What an int8 matmul's operand tiling costs on the VPU beside the MXU: the compiler stores an 8-bit `[R, C]`
//! entry array whose second-minor (physical row) count is a multiple of 32 in `T(32,128)(4,1)` tiles
//! (`tiling::tiles_rank2`), and its convolution fusion first re-tiles it to `T(8,128)(4,1)` (a `copy_fusion`
//! inside the operand's `bitcast_fusion`, in every such corpus record on all five chips: C25.matmul.024, .056,
//! .037, .002, .052); an int8 contracting dim that is not a multiple of the 8-row tile leaves padded rows in the
//! last tile of every weight column block, which the widening of v4 (no int8 MXU path) masks.
//!
//! Evidence, compiler probes of int8 `[8, K] x [K, 6656]` on v4 (weights prefetched to CMEM, cycles less the
//! 1,527-cycle launch, per 1024 weight elements): K 1928, 1936, 1944, 1960 (multiples of 8, `T(8,128)`) 1.49;
//! K 1920 (`T(32,128)`, re-tiled) 1.68, K 2048 x 6650 1.66; K 1930-1934 (not multiples of 8) 2.45, with the
//! same 4,224-cycle launch-to-window overhead. fp8 weights of the same shapes cost the same at K 1920, 1930 and
//! 1960 (29,024, 30,042, 30,042), so neither term applies to them. On v5e and v5p (int8 MXUs) the re-tile costs
//! 0.13-0.16 and 0.06-0.08 cycles per 1024 weight elements (K 1920 and 3840 against 1960 and 3848, N 6656) and a
//! ragged K nothing (K 1930 and 1960 cost the same). The corpus family `C25.matmul8` (tools/corpus/gen_ops.py)
//! draws 8-bit decode matmuls in all three tilings so the fit sees each.

use super::lower::matmul_operands;
use super::padding::PaddedArray;
use super::spec::{Checked, Dtype};

/// The tiling facts of a matmul's two MXU operands, in the window search's roles (`lhs` streams rows, `rhs`
/// is the stationary weight window; a product computed transposed swaps them, `lower::transposed_result`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Narrow {
    /// The search's left operand is int8 stored `T(32,128)` and re-tiled in the fusion.
    pub lhs_retiled: bool,
    /// The search's right operand is int8 stored `T(32,128)` and re-tiled in the fusion.
    pub rhs_retiled: bool,
    /// The contraction is int8 with K not a multiple of the 8-row tile.
    pub ragged_k: bool,
}

/// Whether a rank-2 8-bit entry array is stored in `T(32,128)` tiles: its physical second-minor dim (rows of
/// its dim order) is a multiple of 32 (`tiling::tiles_rank2`: at most 4 rows take `T(4,128)`).
pub fn retiled(dims: [u64; 2], a: &PaddedArray, dtype: Dtype) -> bool {
    let rows = if a.order == [1, 0] { dims[1] } else { dims[0] };
    dtype == Dtype::Int8 && rows > 4 && rows.is_multiple_of(32)
}

/// The [`Narrow`] facts of `op` (all false for ops other than rank-2 int8 matmuls).
pub(crate) fn narrow(op: &Checked) -> Narrow {
    let Checked::Matmul {
        b: 1, m, k, n, dtype, ..
    } = *op
    else {
        return Narrow::default();
    };
    if dtype != Dtype::Int8 || m == 1 || n == 1 {
        return Narrow::default();
    }
    let (x, w, o, _) = matmul_operands(1, m, k, n, dtype, false);
    let x_re = retiled([m, k], &x, dtype);
    let w_re = retiled([k, n], &w, dtype);
    let (lhs_retiled, rhs_retiled) = if super::lower::transposed_result(1, &o) {
        (w_re, x_re)
    } else {
        (x_re, w_re)
    };
    Narrow {
        lhs_retiled,
        rhs_retiled,
        ragged_k: !k.is_multiple_of(8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(m: u64, k: u64, n: u64, dtype: &str) -> Narrow {
        narrow(&crate::tensorcore::spec::checked_matmul(m, k, n, dtype))
    }

    #[test]
    fn the_entry_tiles_say_which_operand_is_retiled() {
        // C25.matmul.024: s8[2,1920] T(4,128), s8[1920,6656]{1,0} T(32,128): the weight is re-tiled.
        assert_eq!(
            of(2, 1920, 6656, "int8"),
            Narrow {
                lhs_retiled: false,
                rhs_retiled: true,
                ragged_k: false
            }
        );
        // C25.matmul.002: s8[32,1555] T(32,128) is re-tiled; K 1555 = 194 x 8 + 3 leaves a ragged tile.
        assert_eq!(
            of(32, 1555, 2720, "int8"),
            Narrow {
                lhs_retiled: true,
                rhs_retiled: false,
                ragged_k: true
            }
        );
        // C25.matmul.037: N 32 < M, computed transposed; s8[746,32]{0,1} has 32 physical rows, and it is the
        // transposed product's left operand.
        assert_eq!(
            of(16043, 746, 32, "int8"),
            Narrow {
                lhs_retiled: true,
                rhs_retiled: false,
                ragged_k: true
            }
        );
        // K 1960 = 61 x 32 + 8: T(8,128), aligned; fp8 and bf16 carry neither term.
        assert_eq!(of(8, 1960, 6656, "int8"), Narrow::default());
        assert_eq!(of(8, 1920, 6656, "float8_e4m3fn"), Narrow::default());
        assert_eq!(of(8, 1930, 6656, "bfloat16"), Narrow::default());
    }
}
