//! A reduction of a widened narrow-float array whose result is only narrowed back (`convert(reduce(convert(x)))`,
//! jax's bf16 `sum`, which accumulates in f32) is one reduction in the narrow type: the compiler drops both
//! converts and emits a single `reduce` over `x` (its reducer in bf16; the unit still accumulates wide), one
//! kernel and one launch, timed as the op model's single reduce over `x`.
//!
//! Evidence (compiler corpus, optimized modules): reduction.007 (bf16[1536,8] summed over rows to bf16[8]) is one
//! `reduce` of `bf16[1536,8]` on every chip (v6e 2,173 cycles, one launch); tpusim's separate convert kernel
//! made it 1.84-1.99 times the compiler's on all five chips. reduction.000 (bf16[128,128,128] over dims 0 and 2)
//! and reduction.012 (bf16[1,5632,384] to a scalar) are likewise one bf16 `reduce` (v6e 11,846 and 12,150
//! cycles, near the op model's single bf16 reduce of that array), where tpusim's f32 loop kernel and convert
//! kernel came to 1.47-2.07 times the compiler's on v5p, v6e and tpu7x.

use sim_core::layout::{PrimitiveType, Shape};

use super::graph::Graph;

/// The element type of array `s` when it is a floating-point type (f8 to f64, bf16).
pub(super) fn float_type(s: &Shape) -> Option<PrimitiveType> {
    match s {
        Shape::Array(a) if a.element_type.name().starts_with('f') || a.element_type.name() == "bf16" => {
            Some(a.element_type)
        }
        _ => None,
    }
}

/// The narrow array `x` when node `reduce` reduces `convert(x)` from a narrower float type and `user`, its only
/// user, converts the result back to that type.
pub(super) fn narrow_source(g: &Graph<'_>, reduce: usize, user: usize) -> Option<usize> {
    let r = &g.nodes[reduce];
    let u = &g.nodes[user];
    if r.ins.opcode != "reduce" || r.operands.len() != 2 || u.ins.opcode != "convert" || g.users[reduce] != [user] {
        return None;
    }
    let widen = &g.nodes[r.operands[0]];
    let &x = widen.operands.first()?;
    if widen.ins.opcode != "convert" || g.users[r.operands[0]] != [reduce] {
        return None;
    }
    let narrow = float_type(&g.nodes[x].ins.shape)?;
    let wide = float_type(&r.ins.shape)?;
    (narrow.bit_width() < wide.bit_width() && float_type(&u.ins.shape) == Some(narrow)).then_some(x)
}

/// The reduce node and its narrow input when a kernel's `members` are exactly such a narrowed reduction (its
/// widening convert, the reduce, the narrowing convert; constants aside).
pub(super) fn narrowed_kernel(g: &Graph<'_>, members: &[usize]) -> Option<(usize, usize)> {
    let ops: Vec<usize> = members
        .iter()
        .copied()
        .filter(|&m| g.nodes[m].ins.opcode != "constant")
        .collect();
    let [_, reduce, user] = ops.as_slice() else {
        return None;
    };
    let x = narrow_source(g, *reduce, *user)?;
    (ops[0] == g.nodes[*reduce].operands[0]).then_some((*reduce, x))
}
