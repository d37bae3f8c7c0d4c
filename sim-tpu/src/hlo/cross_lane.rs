//! Row-wise work across the vector lanes: a loop or reduce kernel that reduces each row over its minor dimension
//! (a norm's mean and variance, a softmax's max and sum) or broadcasts one value per row along it (the
//! normalisation by those statistics) moves every block through the cross-lane unit, work its loop pipeline does
//! not hide under the HBM stream: the kernel pays `row_block_cycles` more per block of its largest array.
//!
//! Evidence (compiler corpus, fit split, optimized modules; cycles per 1,024-element block of the `[N, D]`
//! array): norm.016 (layernorm fwd, f32 [13189,4198]) and norm.012 (fwd+bwd, f32 [13630,3328]) on v6e: the
//! variance kernel reading one array and the normalisation reading one and writing one cost 11.2 and 10.9 (11.5,
//! 11.0), where streaming two f32 arrays at the model's HBM rate takes 8.8; the kernel adding the residual,
//! writing it and summing its rows costs 15.8 (15.9) against 13.1 for its three arrays. tpu7x: 6.7, 6.6 and 8.9
//! against 4.2 and 6.3; v5p: 7.4, 7.4 and 11.0 against 5.2 and 7.9. On v4 the same kernels cost what their
//! stream does (18.6, 18.3 and 27.5 against 17.4 and 26.2): the fit finds how much is left per chip. An
//! elementwise kernel broadcasting a bias along the rows (the vector on the minor dimension, one value per lane)
//! needs no cross-lane move.

use super::bytes::dims_of;
use super::fusion::Group;
use super::graph::{Graph, Node};

/// Whether kernel `k` reduces rows over their minor dimension or broadcasts a per-row vector along it.
pub(super) fn crosses_lanes(g: &Graph<'_>, k: &Group) -> bool {
    k.members.iter().any(|&m| {
        let n = &g.nodes[m];
        match n.ins.opcode.as_str() {
            "reduce" => row_reduce(g, n),
            "broadcast" => row_broadcast(g, n),
            _ => false,
        }
    })
}

/// A reduction of an array of rank 2 or more over its minor (last) dimension, longer than one element.
fn row_reduce(g: &Graph<'_>, n: &Node<'_>) -> bool {
    let Some(&input) = n.operands.first() else {
        return false;
    };
    let d = dims_of(&g.nodes[input].ins.shape);
    let reduced = n.ins.int_list("dimensions").unwrap_or_default();
    d.len() >= 2 && d[d.len() - 1] > 1 && reduced.contains(&(d.len() as i64 - 1))
}

/// A broadcast of a vector of more than one element into a result whose minor (last) dimension, longer than
/// one element, is a new one: each vector element is repeated along a row.
fn row_broadcast(g: &Graph<'_>, n: &Node<'_>) -> bool {
    let Some(&input) = n.operands.first() else {
        return false;
    };
    let out = dims_of(&n.ins.shape);
    let elements: u64 = dims_of(&g.nodes[input].ins.shape).iter().product();
    let mapped = n.ins.int_list("dimensions").unwrap_or_default();
    let minor = out.len() as i64 - 1;
    out.len() >= 2 && out[out.len() - 1] > 1 && elements > 1 && !mapped.contains(&minor)
}
