//! A `dynamic-update-slice` writes its update into the buffer in place: the kernel reads and writes the
//! update's bytes, not the whole buffer (a `lax.scan` writing step `t`'s output into the stacked result); a
//! kernel reading an input only through slices reads only their windows (step `t`'s input row).
//!
//! Evidence (compiler corpus, scan family): scan.011 (an f32 RNN of 199 steps writing [128,512] per step into an
//! f32[199,128,512] result) costs 3,869 cycles per trip on v5e, where streaming the 52 MB result each trip would
//! take over 100,000; the optimized body updates the loop's result buffer in place (`dynamic-update-slice`
//! fused into the step's loop fusion, the buffer aliased).

use std::collections::{BTreeMap, BTreeSet};

use super::bytes::Sizer;
use super::fusion::Group;
use super::graph::Graph;
use super::HloError;

/// For kernel `k`: the buffers its dynamic-update-slices update in place (inputs not read), and for each such
/// output the node whose value it writes (the update).
pub(super) fn in_place_updates(g: &Graph<'_>, k: &Group) -> (BTreeSet<usize>, BTreeMap<usize, usize>) {
    let mut buffers = BTreeSet::new();
    let mut updates = BTreeMap::new();
    for &m in &k.members {
        let n = &g.nodes[m];
        if n.ins.opcode != "dynamic-update-slice" || !k.outputs.contains(&m) {
            continue;
        }
        if let (Some(&buffer), Some(&update)) = (n.operands.first(), n.operands.get(1)) {
            if k.inputs.contains(&buffer) {
                buffers.insert(buffer);
            }
            updates.insert(m, update);
        }
    }
    (buffers, updates)
}

/// For kernel `k`: the inputs it reads only through `dynamic-slice`s and `slice`s of its own, with the padded
/// bytes of those windows (what the kernel reads; at most the whole input). A loop step reading its step's row of
/// a stacked array (`lax.scan`'s `xs[t]`) reads the row, not the array.
///
/// Evidence (compiler corpus, scan family): scan.011 on v6e (an f32 RNN reading f32[128,512] of an
/// f32[199,128,512] input per step) costs 2,304 cycles per trip in the compiler's loop body, where reading the
/// 52 MB input every trip would take over 60,000; the optimized body's fusion takes the `dynamic-slice` of the
/// loop-carried input as a fused parameter and reads one [128,512] window.
pub(super) fn windowed_reads(g: &Graph<'_>, k: &Group, sizer: &Sizer) -> Result<BTreeMap<usize, u64>, HloError> {
    let mut reads = BTreeMap::new();
    let is_slice = |m: usize| matches!(g.nodes[m].ins.opcode.as_str(), "dynamic-slice" | "slice");
    // Most kernels slice nothing: one pass over the members settles it (the user scan below is quadratic).
    if !k.members.iter().any(|&m| is_slice(m)) {
        return Ok(reads);
    }
    let members: BTreeSet<usize> = k.members.iter().copied().collect();
    for &i in &k.inputs {
        let users: Vec<usize> = g.users[i].iter().copied().filter(|u| members.contains(u)).collect();
        let windowed = !users.is_empty()
            && users.iter().all(|&u| {
                let n = &g.nodes[u];
                is_slice(u) && n.operands.first() == Some(&i) && n.operands.iter().skip(1).all(|&o| o != i)
            });
        if !windowed {
            continue;
        }
        let whole = sizer.shape(&g.nodes[i].ins.shape)?.padded_bytes;
        let mut bytes = 0u64;
        for &u in &users {
            bytes = bytes.saturating_add(sizer.shape(&g.nodes[u].ins.shape)?.padded_bytes);
        }
        reads.insert(i, bytes.min(whole));
    }
    Ok(reads)
}
