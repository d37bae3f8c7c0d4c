//! The layout of a dot's stationary MXU operand, for the op model's transpose-unit term
//! (`tensorcore::cost::plan_mxu_layout`, `mxu_weight_transpose_cycles`): the operand whose blocks are loaded into
//! the MXU (the right operand, or the left one of a product computed transposed,
//! [`super::matvec::skinny_transposed`], an activation: `mxu_act_transpose_cycles`) is transposed block by
//! block when its layout puts the contracting dim in the lanes. Only an entry parameter's layout is known before the compiler assigns layouts: the entry layout
//! the compiler gives it (`tiling::tpu_layout`, least padded bytes) or, in an optimized module, the one written.
//!
//! Evidence (compiler corpus, decode_matmul on v4, weights prefetched to CMEM): the K-minor weights
//! ([K,N]{0,1}, where fewer padded bytes than row-major) of decode_matmul.006 (f32 [5248,2616], M 8: 32,686
//! cycles), .007 (bf16 [5499,3157]: 38,378), .022 (bf16 [2304,2353]: 13,417) and .029 (bf16 [3547,2103]: 17,757)
//! cost about twice what the default layout's window plan gave (16,279, 19,444, 7,286, 9,456), where row-major
//! weights of the same sizes agree (decode_matmul.002, f32 [1721,2430]: 6,043 against 6,063; .013: 4,667
//! against 4,698). The op model fits the transpose unit's cycles per block on its own records.

use sim_core::layout::Shape;

use super::bytes::Sizer;
use super::graph::{Graph, Node};
use super::ops::OpClass;
use super::HloError;
use crate::tensorcore::lower::MxuLayout;
use crate::tiling::tpu_layout;

/// The stationary operand's layout of dot `node` (non-batched, one contracting dim): its right operand, or its
/// left one when the product is computed `transposed`; the default for anything else.
pub(super) fn stationary_layout(
    g: &Graph<'_>,
    node: &Node<'_>,
    batch: u64,
    transposed: bool,
    sizer: &Sizer,
) -> Result<MxuLayout, HloError> {
    if node.class != OpClass::Dot || batch != 1 {
        return Ok(MxuLayout::default());
    }
    let (index, attr) = if transposed {
        (0, "lhs_contracting_dims")
    } else {
        (1, "rhs_contracting_dims")
    };
    let Some(&o) = node.operands.get(index) else {
        return Ok(MxuLayout::default());
    };
    let operand = &g.nodes[o];
    let contracting = node.ins.int_list(attr).unwrap_or_default();
    let ([c], Some(_)) = (contracting.as_slice(), operand.param) else {
        return Ok(MxuLayout::default());
    };
    Ok(MxuLayout {
        stationary_k_minor: minor_dim(&operand.ins.shape, sizer)? == Some(*c),
        stationary_is_activation: transposed,
    })
}

/// The dim in the lanes (minor) of a rank-2 array: its tiled layout's, or the compiler's entry layout for it.
fn minor_dim(s: &Shape, sizer: &Sizer) -> Result<Option<i64>, HloError> {
    let Shape::Array(a) = s else { return Ok(None) };
    if a.dims.len() != 2 {
        return Ok(None);
    }
    if let Some(l) = a.layout.as_ref().filter(|l| !l.tiles.is_empty()) {
        return Ok(l.minor_to_major.first().copied());
    }
    let dims: Vec<i64> = super::bytes::dims_of(s).iter().map(|&d| d as i64).collect();
    match tpu_layout(a.element_type, &dims, sizer.chip()).map_err(|e| HloError::Unsupported(e.to_string()))? {
        Shape::Array(laid) => Ok(laid.layout.and_then(|l| l.minor_to_major.first().copied())),
        _ => Ok(None),
    }
}
