//! The padded physical arrangement of an entry array, from the TPU tiling policy ([`crate::tiling::tpu_layout`],
//! the layout the XLA TPU compiler gives a parameter) and XLA's size rules (`sim_core::layout`).
//!
//! The cost model needs only the dim order the compiler picks and the padded element and byte counts.

use sim_core::layout::{Geometry, PrimitiveType, Shape};

use super::spec::Dtype;
use crate::tiling::tpu_layout;

/// Parameter layouts are identical on all five chips (reference/tpu-compiler/README.md), so one is asked.
const LAYOUT_CHIP: &str = "v5e";

/// The physical arrangement of an array under the compiler's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaddedArray {
    /// Logical dim indices in physical order, major to minor.
    pub order: Vec<usize>,
    /// Element count with the first tile's padding (XLA's ArraySize in elements).
    pub padded_elements: u64,
    /// Bits per element.
    pub bits: u64,
}

impl PaddedArray {
    /// Padded element count.
    pub fn elements(&self) -> u64 {
        self.padded_elements
    }
    /// Padded bytes (the compiler's ArraySize).
    pub fn bytes(&self) -> u64 {
        (self.padded_elements * self.bits).div_ceil(8)
    }
}

fn primitive(dtype: Dtype) -> PrimitiveType {
    // Every Dtype has an XLA name the layout library knows.
    PrimitiveType::from_name(dtype.xla_name()).unwrap_or(PrimitiveType::F32)
}

/// The compiler's layout for an entry array of `dtype` and logical `dims` (major to minor). Dims are validated
/// (positive, bounded) before lowering; should the layout library still refuse them, the array is taken as
/// dense and row-major.
pub fn tpu_padded(dtype: Dtype, dims: &[u64]) -> PaddedArray {
    let bits = dtype.bits();
    let idims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let laid_out = tpu_layout(primitive(dtype), &idims, LAYOUT_CHIP)
        .ok()
        .and_then(|shape| match shape {
            Shape::Array(a) => Geometry::of(&a).ok(),
            _ => None,
        });
    match laid_out {
        Some(g) => PaddedArray {
            order: g.minor_to_major.iter().rev().copied().collect(),
            padded_elements: g.padded_elements,
            bits,
        },
        None => PaddedArray {
            order: (0..dims.len()).collect(),
            padded_elements: dims.iter().product(),
            bits,
        },
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
        assert_eq!(tpu_padded(Dtype::Float32, &[129]).elements(), 256);
        assert_eq!(tpu_padded(Dtype::Float32, &[1000]).elements(), 1024);
        assert_eq!(tpu_padded(Dtype::Bfloat16, &[7]).elements(), 256);
        // f32[1000,1] -> {0,1:T(1,128)}: 1 x 1024.
        let a = tpu_padded(Dtype::Float32, &[1000, 1]);
        assert_eq!(a.order, vec![1, 0]);
        assert_eq!(a.bytes(), 1024 * 4);
        // bf16[8,64,56,56] -> {1,3,2,0}: physical N,H,W,C.
        assert_eq!(tpu_padded(Dtype::Bfloat16, &[8, 64, 56, 56]).order, vec![0, 2, 3, 1]);
        assert_eq!(tpu_padded(Dtype::Bfloat16, &[8, 1, 1280, 16384]).bytes(), 335_544_320);
    }
}
