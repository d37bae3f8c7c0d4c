//! A batched matmul's result that only the next batched matmul over the same batch reads (an MoE expert's
//! up-projection, its activation, then the down-projection) never goes through HBM: the compiler computes the
//! producer inside the consumer's kernel, one batch window at a time (a kOutput fusion nesting the producer's
//! `convolution-base-dilated` in the consumer's), so the intermediate lives in VMEM one expert's rows at a time
//! however large the whole is. tpusim's grouping gives each product a kernel of its own; this rule marks the
//! producer's result as read and written on chip, so neither kernel pays its HBM traffic.
//!
//! Evidence (compiler corpus, fit records' optimized modules): moe_routing.015 (7,288 tokens, 32 experts of
//! 256 -> 2,048 -> 256, f32; the intermediate f32[32,455,2048] is 119 MB) has one kernel `fusion.17` computing
//! both expert products on every chip: 291,149 cycles on v5e, 165,221 on v6e, 194,743 on tpu7x, where tpusim
//! wrote and re-read the intermediate in two kernels of 299,821 + 473,610 (v5e) and 148,875 + 227,988 (v6e).
//! The same single kernel in moe_routing.008, .011, .018 and .019 (v4, v5e, v5p). Where the compiler instead
//! nests the dispatch product in the up-projection (moe_routing.019 on v6e and tpu7x), that kernel's result
//! is an `S(1)` (VMEM) buffer: no HBM traffic either. Nor is the intermediate a temporary: the compiler's temp
//! for moe_routing.015 is 1.5 MB on tpu7x and 17 MB on v4 beside the 119 MB intermediate.
//!
//! Not chained: non-batched products (a dense MLP's hidden activation goes through HBM), products over
//! different batch sizes, a result another kernel also reads or the program returns, and kernels reducing
//! (attention's scores, normalised by a softmax's row max and sum between its two products, are written to
//! HBM at sizes beyond VMEM: attention.002, .003 and .010 on every chip).

use std::collections::{BTreeSet, HashMap};

use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;

/// The batch size of a batched dot (product of its lhs batch dimensions), `None` for any other node or a dot
/// without batch dimensions.
fn batch_size(g: &Graph<'_>, node: usize) -> Option<u64> {
    let n = &g.nodes[node];
    if n.class != OpClass::Dot {
        return None;
    }
    let dims = n.ins.int_list("lhs_batch_dims").filter(|d| !d.is_empty())?;
    let lhs = &g.nodes[*n.operands.first()?];
    let shape = super::bytes::dims_of(&lhs.ins.shape);
    dims.iter()
        .map(|&d| usize::try_from(d).ok().and_then(|d| shape.get(d).copied()))
        .try_fold(1u64, |a, d| d.map(|d| a.saturating_mul(d)))
        .filter(|&b| b > 1)
}

/// The values (kernel outputs) the compiler keeps on chip because a batched matmul kernel computes them and the
/// only kernel reading them is a later batched matmul kernel over the same batch size.
pub(super) fn chained_results(g: &Graph<'_>, kernels: &[Group]) -> BTreeSet<usize> {
    let returned: BTreeSet<usize> = g.outputs().into_iter().collect();
    let mut writer: HashMap<usize, usize> = HashMap::new();
    let mut readers: HashMap<usize, BTreeSet<usize>> = HashMap::new();
    for (t, k) in kernels.iter().enumerate() {
        for &o in &k.outputs {
            writer.insert(o, t);
        }
        for &i in &k.inputs {
            readers.entry(i).or_default().insert(t);
        }
    }
    // A reduction in either kernel (a softmax's row max and sum between attention's two products) makes the
    // compiler write the scores out at sizes beyond VMEM: no chain.
    let reduces = |k: &Group| k.members.iter().any(|&m| g.nodes[m].class == OpClass::Reduce);
    let batch_of = |k: &Group| {
        (k.kind == KernelKind::Mxu && !reduces(k))
            .then(|| batch_size(g, k.anchor))
            .flatten()
    };
    let mut chained = BTreeSet::new();
    for (t, k) in kernels.iter().enumerate() {
        let Some(batch) = batch_of(k) else { continue };
        for &i in &k.inputs {
            let Some(&p) = writer.get(&i) else { continue };
            let only_here = readers.get(&i).is_some_and(|r| r.len() == 1 && r.contains(&t));
            if p < t && only_here && !returned.contains(&i) && batch_of(&kernels[p]) == Some(batch) {
                chained.insert(i);
            }
        }
    }
    chained
}
