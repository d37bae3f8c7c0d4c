//! A reduction over dimensions of size 1 only is no reduction: the compiler's algebraic simplifier rewrites it as
//! a reshape of its input (the initial value of a sum is zero), a bitcast in the optimized module: the node is
//! free and forwards its input ([`super::fusion`]'s pass-through ops), with no kernel of its own.
//!
//! Evidence (compiler corpus, optimized modules): jax's gradient of a broadcast from `[1, D]` sums the `[1, D]`
//! cotangent over its unit dimension. norm.014 (rmsnorm fwd+bwd, f32 [74,1792]) reduces `reshape.1 =
//! f32[1,1792]` over `dimensions={0}`: tpusim gave it a reduce kernel of its own (2,131 cycles on v5p), the
//! compiler's module has none (its four kernels: the scale gradient with the loss, the row sums, the `rsqrt`, the
//! zero broadcast); mlp.032 (a bias gradient `[4864]` summed to `[1, 4864]` and again over the unit dimension)
//! has the bias gradient in its matmul's kernel and no kernel for the unit sum. The same unit reductions are in 133
//! of the corpus's 420 programs (mlp, embedding, softmax_xent, dcn_cross, attention, norm, ...): the rule took the
//! random held-out median from 18.3 / 11.0 / 10.9 / 19.8 / 13.3 % to 16.4 / 11.0 / 8.8 / 16.3 / 9.5 % (v4, v5e,
//! v5p, v6e, tpu7x; before any refit).

use sim_core::layout::Shape;

use super::graph::Node;
use super::ops::OpClass;

/// Marks every unit reduction free, and the reshape feeding it when nothing else reads that reshape (jax's
/// `[D] -> [1, D]` before the sum: together they forward the vector unchanged, a bitcast in the compiler's
/// module).
pub(super) fn mark_free(nodes: &mut [Node<'_>]) {
    let mut readers = vec![0u32; nodes.len()];
    for n in nodes.iter() {
        for &o in &n.operands {
            readers[o] = readers[o].saturating_add(1);
        }
    }
    for i in 0..nodes.len() {
        if !is_unit_reduce(nodes, i) {
            continue;
        }
        nodes[i].class = OpClass::Free;
        let input = nodes[i].operands[0];
        if nodes[input].ins.opcode == "reshape" && readers[input] == 1 {
            nodes[input].class = OpClass::Free;
        }
    }
}

/// The node whose value `o` holds: `o` itself, or for a unit reduction made free (and its reshape), the value it
/// forwards.
pub(super) fn forwarded(nodes: &[Node<'_>], mut o: usize) -> usize {
    while nodes[o].class == OpClass::Free && matches!(nodes[o].ins.opcode.as_str(), "reduce" | "reshape") {
        match nodes[o].operands.first() {
            Some(&x) => o = x,
            None => break,
        }
    }
    o
}

/// Whether node `i` is a single-input `reduce` whose result has as many elements as its input (every reduced
/// dimension has size 1).
fn is_unit_reduce(nodes: &[Node<'_>], i: usize) -> bool {
    let n = &nodes[i];
    if n.ins.opcode != "reduce" || n.operands.len() != 2 {
        return false;
    }
    let input = elements(&nodes[n.operands[0]].ins.shape);
    input.is_some() && input == elements(&n.ins.shape)
}

/// Elements of an array shape; `None` for a tuple or a dynamic dimension without a bound.
fn elements(s: &Shape) -> Option<u64> {
    match s {
        Shape::Array(a) => a
            .dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(u64::try_from(d.upper_bound()?).ok()?)),
        _ => None,
    }
}
