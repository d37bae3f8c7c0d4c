//! Temp rule: an f32 elementwise value that several of tpusim's kernels recompute from arrays in memory, which
//! the compiler instead computes once, writes out beside its first kernel's result (a multi-output fusion) and
//! reads back in the later ones.
//!
//! Evidence (compiler corpus, optimized modules; the same on all five chips): a residual add `x + r` over f32
//! entry parameters, normalised after. norm.008 (rmsnorm fwd, f32[14208,13952]) is `multiply_reduce_fusion =
//! (f32[14208]{..S(1)}, f32[14208,13952])` then `multiply_multiply_fusion` reading the sum, not `x` and `r`:
//! temp 792,952,832 B, the sum's 14,208 x 13,952 x 4 bytes exactly; norm.004 (rmsnorm fwd+bwd,
//! f32[14976,16109], 16,128 lanes padded) 965,246,976 B = 14,976 x 16,128 x 4; norm.016 (layernorm fwd,
//! f32[13189,4198]) and norm.012 (layernorm fwd+bwd, f32[13630,3328]) likewise. Re-reading `x` and `r` in each
//! later kernel costs 8 bytes an element, writing the sum once and reading it back 4 + 4: the compiler writes it
//! when that is no more. Where the sum fits on chip it is placed there (`S(1)`: norm.013, f32[45688,122], 23 MB,
//! temp 0), as every intermediate is by the temp model's placement. A bf16 sum is recomputed (norm.009 and
//! norm.017, bf16 layernorm and rmsnorm fwd over 142 and 82 MB: `x` and `r` read by all three kernels, temp 0),
//! and so is a value of an earlier one (the centred `x - mean` of a layernorm, recomputed from the written sum).

use std::collections::{BTreeMap, BTreeSet};

use sim_core::layout::Shape;

use super::bytes::Sizer;
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;

/// A value written once by the first kernel computing it and read by later ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WrittenOnce {
    /// The value's node.
    pub node: usize,
    /// The first kernel (in kernel order) computing it: it writes the value.
    pub first: usize,
    /// The last kernel computing it: it reads the value last.
    pub last: usize,
    /// Padded bytes of the value.
    pub bytes: u64,
}

/// The values of `kernels` (in kernel order) the compiler writes once ([module doc](self)): an f32 elementwise
/// member of two or more loop or reduce kernels (a matmul's operand prologues recompute theirs, [`super::fusion`]),
/// written by none, computed only through elementwise and data-movement members
/// from values the kernel reads from memory (or from values this rule already writes), whose write and read back
/// cost no more than re-reading those values: twice its bytes at most their bytes.
pub(super) fn written_once(g: &Graph<'_>, kernels: &[Group], sizer: &Sizer) -> Result<Vec<WrittenOnce>, HloError> {
    let mut in_kernels: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut written = BTreeSet::new();
    for (t, k) in kernels.iter().enumerate() {
        for &m in &k.members {
            in_kernels.entry(m).or_default().push(t);
        }
        written.extend(k.outputs.iter().copied());
    }
    let mut found: Vec<WrittenOnce> = Vec::new();
    // Nodes are in topological order: a value's producers are decided first.
    for (&node, ks) in &in_kernels {
        let n = &g.nodes[node];
        let f32_array = matches!(&n.ins.shape, Shape::Array(a) if a.element_type.name() == "f32");
        let mxu = ks.iter().any(|&t| kernels[t].kind == KernelKind::Mxu);
        if ks.len() < 2 || mxu || n.class != OpClass::Elementwise || !f32_array || written.contains(&node) {
            continue;
        }
        let first = ks.iter().copied().min().unwrap_or(0);
        let last = ks.iter().copied().max().unwrap_or(0);
        let done: BTreeSet<usize> = found.iter().map(|w| w.node).collect();
        let Some(sources) = memory_sources(g, &kernels[first], node, &done) else {
            continue;
        };
        let bytes = sizer.shape(&n.ins.shape)?.padded_bytes;
        let mut source_bytes = 0u64;
        for s in sources {
            source_bytes = source_bytes.saturating_add(sizer.shape(&g.nodes[s].ins.shape)?.padded_bytes);
        }
        if bytes > 0 && bytes.saturating_mul(2) <= source_bytes {
            found.push(WrittenOnce {
                node,
                first,
                last,
                bytes,
            });
        }
    }
    Ok(found)
}

/// Producers [`memory_sources`] follows before giving up.
const MAX_CHAIN: usize = 256;

/// The values kernel `k` reads from memory (or values already written once, `done`) that member `node` is
/// computed from through elementwise and data-movement members; `None` when another kind of member (a dot, a
/// reduction, a transcendental) is among its producers in `k`.
fn memory_sources(g: &Graph<'_>, k: &Group, node: usize, done: &BTreeSet<usize>) -> Option<BTreeSet<usize>> {
    let members: BTreeSet<usize> = k.members.iter().copied().collect();
    let mut sources = BTreeSet::new();
    let mut stack: Vec<usize> = g.nodes[node].operands.clone();
    let mut seen = BTreeSet::new();
    while let Some(o) = stack.pop() {
        if !seen.insert(o) {
            continue;
        }
        // A long chain is not followed: the value is left to the kernels.
        if seen.len() > MAX_CHAIN {
            return None;
        }
        let on = &g.nodes[o];
        if done.contains(&o) || !members.contains(&o) {
            sources.insert(o);
        } else if matches!(on.class, OpClass::Elementwise | OpClass::Movement | OpClass::Free) {
            stack.extend(on.operands.iter().copied());
        } else {
            return None;
        }
    }
    Some(sources)
}
