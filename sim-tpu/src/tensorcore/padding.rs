//! The padded physical dims the XLA TPU compiler gives an entry array (reference/xla-layout.md, "TPU tilings").
//!
//! Only what the cost model needs: which dim order the compiler picks and the first tile's padding, from which
//! padded bytes and padded element counts follow.

use super::spec::Dtype;

/// The physical arrangement of an array: dims major-to-minor after the compiler's order choice, padded by the
/// first tile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaddedArray {
    /// Logical dim indices in physical order, major to minor.
    pub order: Vec<usize>,
    /// Physical dims (in `order`), each rounded up to the first tile.
    pub padded_dims: Vec<u64>,
    /// Bits per element.
    pub bits: u64,
}

impl PaddedArray {
    /// Padded element count.
    pub fn elements(&self) -> u64 {
        self.padded_dims.iter().product()
    }
    /// Padded bytes (the compiler's ArraySize).
    pub fn bytes(&self) -> u64 {
        (self.elements() * self.bits).div_ceil(8)
    }
}

fn round_up(v: u64, m: u64) -> u64 {
    v.div_ceil(m) * m
}

/// Rows of the first tile for a second-minor dim of size `s` (xla-layout.md: compact 2nd-minor tiles).
fn tile_rows(bits: u64, s: u64) -> u64 {
    match bits {
        32 | 64 => match s {
            1 => 1,
            2 => 2,
            3 | 4 => 4,
            _ => 8,
        },
        16 => match s {
            0..=2 => 2,
            3 | 4 => 4,
            _ => 8,
        },
        _ => {
            if s <= 4 {
                4
            } else if s.is_multiple_of(32) {
                32
            } else {
                8
            }
        }
    }
}

fn padded_for_order(dims: &[u64], order: &[usize], bits: u64) -> Vec<u64> {
    let mut phys: Vec<u64> = order.iter().map(|&i| dims[i]).collect();
    let r = phys.len();
    let s = phys[r - 2];
    phys[r - 2] = round_up(s, tile_rows(bits, s));
    phys[r - 1] = round_up(phys[r - 1], 128);
    phys
}

/// The compiler's layout for an entry array of `dtype` and logical `dims` (major to minor).
pub fn tpu_padded(dtype: Dtype, dims: &[u64]) -> PaddedArray {
    let bits = dtype.bits();
    match dims.len() {
        0 => PaddedArray {
            order: vec![],
            padded_dims: vec![512 * 8 / bits],
            bits,
        },
        1 => {
            let n = dims[0];
            let tile = n.next_power_of_two().max(128).max(4096 / bits).min(1024);
            PaddedArray {
                order: vec![0],
                padded_dims: vec![round_up(n, tile)],
                bits,
            }
        }
        r => {
            let row_major: Vec<usize> = (0..r).collect();
            let mut best_order = row_major.clone();
            let mut best = padded_for_order(dims, &row_major, bits);
            let mut best_elems: u64 = best.iter().product();
            // Orders that move one dim to minor and another to second-minor, the rest keeping their order;
            // ties go to row-major (checked first).
            for minor in (0..r).rev() {
                for second in (0..r).rev() {
                    if second == minor {
                        continue;
                    }
                    let mut order: Vec<usize> = (0..r).filter(|&d| d != minor && d != second).collect();
                    order.push(second);
                    order.push(minor);
                    let p = padded_for_order(dims, &order, bits);
                    let e: u64 = p.iter().product();
                    if e < best_elems {
                        best_elems = e;
                        best = p;
                        best_order = order;
                    }
                }
            }
            PaddedArray {
                order: best_order,
                padded_dims: best,
                bits,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_examples() {
        // xla-layout.md: f32[2,3]{1,0:T(2,128)} is one 2x128 tile; bf16[3,5] T(4,128)(2,1).
        assert_eq!(tpu_padded(Dtype::Float32, &[2, 3]).bytes(), 2 * 128 * 4);
        assert_eq!(tpu_padded(Dtype::Bfloat16, &[3, 5]).bytes(), 4 * 128 * 2);
        assert_eq!(tpu_padded(Dtype::Float32, &[129]).padded_dims, vec![256]);
        assert_eq!(tpu_padded(Dtype::Float32, &[1000]).padded_dims, vec![1024]);
        assert_eq!(tpu_padded(Dtype::Bfloat16, &[7]).padded_dims, vec![256]);
        // f32[1000,1] -> {0,1:T(1,128)}: 1 x 1024.
        let a = tpu_padded(Dtype::Float32, &[1000, 1]);
        assert_eq!(a.order, vec![1, 0]);
        assert_eq!(a.bytes(), 1024 * 4);
        // bf16[8,64,56,56] -> {1,3,2,0}: physical N,H,W,C.
        assert_eq!(tpu_padded(Dtype::Bfloat16, &[8, 64, 56, 56]).order, vec![0, 2, 3, 1]);
        assert_eq!(tpu_padded(Dtype::Bfloat16, &[8, 1, 1280, 16384]).bytes(), 335_544_320);
    }
}
