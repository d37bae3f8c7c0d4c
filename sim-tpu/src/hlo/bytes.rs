//! Sizes under the layouts the TPU compiler gives arrays: every array without a tiled layout gets
//! [`crate::tiling::tpu_layout`]; a tiled layout (an optimized module) is taken as written.
//!
//! `argument_bytes` = the parameters' padded sizes; `output_bytes` = the outputs' padded sizes plus, for a tuple
//! result, the tuple's index table: 512 B on v4 and v5e, 4 B per element rounded up to 32 B on v5p, v6e and tpu7x
//! (read off `memory_analysis` of all 120 calibration records).

use std::cell::RefCell;
use std::collections::HashMap;

use sim_core::layout::{ArrayShape, Geometry, PrimitiveType, Shape};

use super::HloError;
use crate::tiling::tpu_layout;

/// Padded and logical sizes of arrays on one chip, memoised by (type, dims).
#[derive(Debug)]
pub struct Sizer {
    chip: &'static str,
    cache: RefCell<HashMap<(PrimitiveType, Vec<i64>), ArraySize>>,
}

/// Sizes of one array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ArraySize {
    /// Bytes in the tiled layout (XLA's ArraySize).
    pub padded_bytes: u64,
    /// Bytes of the logical elements.
    pub logical_bytes: u64,
    /// Padded element count.
    pub padded_elements: u64,
    /// Elements the vector unit processes: the padded count with each tile smaller than one vreg counted as a
    /// whole vreg ([`vreg_elements`]).
    pub vreg_elements: u64,
}

/// Elements of one f32 vreg (8 sublanes x 128 lanes), the op model's unit of vector work.
const VREG: u64 = 1024;

/// The padded elements of an array laid out as `laid` counted in whole vregs: a tile of fewer than 1,024
/// elements (a `T(2,128)` or `T(4,128)` tile, which the compiler picks when the tiled second-minor dimension is
/// 2-7) still takes one vreg operation, so it counts as 1,024; larger tiles count as they are.
///
/// Evidence (compiler corpus, fit records): reduction.022 (`bf16[557,128,2]` max over dim 0, laid out
/// `{1,2,0:T(2,128)(2,1)}`: 557 tiles of 256 elements) costs the compiler one vreg per tile, 557 where the
/// padded count made 139 (tpu7x 3,628 cycles, launch 2,289 + 557 x 2.4; tpusim had 0.39-0.72 of the compiler on
/// all five chips); elementwise.003 (`f32[16671,4]` maximum, `{0,1:T(4,128)}`: 131 half-vreg tiles) was
/// 0.66-0.89 on all five. Only kernels of one op (timed by the op model, their arrays in the entry's or the
/// compiler's written layouts) count this way: a fused kernel's intermediates get tpusim's default layouts,
/// which the compiler changes for large arrays (attention's f32[B,4,S] statistics in `T(4,128)` tiles, so
/// counted, put transformer and attention programs 2-5 times over).
pub(super) fn vreg_elements(laid: &ArrayShape, padded_elements: u64) -> u64 {
    let tile: u64 = match laid.layout.as_ref().and_then(|l| l.tiles.first()) {
        Some(t) if !t.dims.is_empty() && t.dims.iter().all(|&d| d > 0) => t.dims.iter().map(|&d| d as u64).product(),
        _ => return padded_elements,
    };
    if tile >= VREG {
        return padded_elements;
    }
    padded_elements.div_ceil(tile).saturating_mul(VREG)
}

impl Sizer {
    /// A sizer for `chip` (a preset name).
    pub fn new(chip: &str) -> Result<Sizer, HloError> {
        let chip = crate::tiling::normalize_chip(chip).map_err(|e| HloError::Unsupported(e.to_string()))?;
        Ok(Sizer {
            chip,
            cache: RefCell::new(HashMap::new()),
        })
    }

    /// The chip's preset name.
    pub fn chip(&self) -> &'static str {
        self.chip
    }

    /// Sizes of an array shape.
    pub fn array(&self, a: &ArrayShape) -> Result<ArraySize, HloError> {
        let dims: Vec<i64> = a
            .dims
            .iter()
            .map(|d| {
                d.upper_bound()
                    .ok_or_else(|| HloError::Unsupported(format!("unbounded dynamic dimension in `{a}`")))
            })
            .collect::<Result<_, _>>()?;
        let tiled = a.layout.as_ref().is_some_and(|l| !l.tiles.is_empty());
        if !tiled {
            if let Some(s) = self.cache.borrow().get(&(a.element_type, dims.clone())) {
                return Ok(*s);
            }
        }
        let laid = if tiled {
            a.clone()
        } else {
            match tpu_layout(a.element_type, &dims, self.chip).map_err(|e| HloError::Unsupported(e.to_string()))? {
                Shape::Array(x) => x,
                _ => return Err(HloError::Unsupported(format!("no TPU layout for `{a}`"))),
            }
        };
        let g = Geometry::of(&laid).map_err(|e| HloError::Unsupported(format!("`{a}`: {e}")))?;
        let size = ArraySize {
            padded_bytes: g
                .padded_bytes()
                .map_err(|e| HloError::Unsupported(format!("`{a}`: {e}")))?,
            logical_bytes: g
                .unpadded_bytes()
                .map_err(|e| HloError::Unsupported(format!("`{a}`: {e}")))?,
            padded_elements: g.padded_elements,
            vreg_elements: vreg_elements(&laid, g.padded_elements),
        };
        if !tiled {
            self.cache.borrow_mut().insert((a.element_type, dims), size);
        }
        Ok(size)
    }

    /// Sizes summed over a shape's arrays (tuples element-wise, no index table; tokens are empty).
    pub fn shape(&self, s: &Shape) -> Result<ArraySize, HloError> {
        match s {
            Shape::Array(a) => self.array(a),
            Shape::Tuple(elems) => {
                let mut t = ArraySize::default();
                for e in elems {
                    let x = self.shape(e)?;
                    t.padded_bytes = t.padded_bytes.saturating_add(x.padded_bytes);
                    t.logical_bytes = t.logical_bytes.saturating_add(x.logical_bytes);
                    t.padded_elements = t.padded_elements.saturating_add(x.padded_elements);
                    t.vreg_elements = t.vreg_elements.saturating_add(x.vreg_elements);
                }
                Ok(t)
            }
            Shape::Token | Shape::Opaque => Ok(ArraySize::default()),
        }
    }

    /// Bytes of a tuple's index table on this chip.
    pub fn tuple_table_bytes(&self, elements: usize) -> u64 {
        match self.chip {
            "v4" | "v5e" => 512,
            _ => (4 * elements as u64).div_ceil(32) * 32,
        }
    }

    /// Bytes of an entry result: arrays plus, for a tuple, its index table.
    pub fn result_bytes(&self, s: &Shape) -> Result<u64, HloError> {
        let arrays = self.shape(s)?.padded_bytes;
        Ok(match s {
            Shape::Tuple(e) => arrays.saturating_add(self.tuple_table_bytes(e.len())),
            _ => arrays,
        })
    }
}

/// Largest batch that does not fill the rows of one (8, 128) tile: a convolution over such a batch is windowed
/// differently by the compiler (`relayout`'s small-batch copies, `conv_backward`'s strided gradient windows).
pub(super) const MAX_UNTILED_BATCH: u64 = 7;

/// A shape's dimensions (their upper bounds; none for a tuple or a token).
pub(super) fn dims_of(s: &Shape) -> Vec<u64> {
    match s {
        Shape::Array(a) => a
            .dims
            .iter()
            .map(|d| d.upper_bound().unwrap_or(0).max(0) as u64)
            .collect(),
        _ => Vec::new(),
    }
}

/// Logical elements of a shape (a tuple's summed).
pub(super) fn elements(s: &Shape) -> u64 {
    match s {
        Shape::Array(_) => dims_of(s).iter().fold(1u64, |a, &d| a.saturating_mul(d)),
        Shape::Tuple(e) => e.iter().map(elements).fold(0u64, |a, x| a.saturating_add(x)),
        _ => 0,
    }
}
