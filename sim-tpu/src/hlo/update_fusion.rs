//! A kernel that only stores a value into a buffer (`dynamic-update-slice`s, and the reshapes before them) is
//! more outputs of the matmul kernel that computes the value: the compiler's output fusion writes the updates
//! from the result tiles (a multi-output `bitcast_dynamic-update-slice_fusion`), where tpusim's grouping gives
//! every update but the first a loop kernel of its own, each paying the whole loop launch.
//!
//! Evidence (compiler corpus, fit records' optimized modules): scan.003's forward body (the RNN step saving
//! `tanh(h W + x U)` and `1 - tanh^2` for the backward pass, four stacked f32[13,128,203] buffers) has on v6e
//! one kOutput fusion of 1,076 cycles computing the step's matmul and writing two stacked buffers and the
//! carry, and one kLoop fusion (2,251 cycles) storing the step's input carry, which no kernel of the body
//! computes; tpusim had three update kernels of 2,335 cycles each beside the matmul. The same on tpu7x (1,076
//! and 2,372) and in scan.002 (837x128: 1,234 and 2,666 on v6e).
//!
//! Not merged: an update of a value no matmul kernel before it computes, or a kernel also reading a value
//! written after that matmul kernel.

use std::collections::{BTreeSet, HashMap};

use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;

/// `groups` (in execution order) with every update kernel ([`target`]) merged into the matmul kernel that
/// computes what it stores, at the matmul kernel's place in the order.
pub(super) fn merge_updates(g: &Graph<'_>, groups: Vec<Group>) -> Vec<Group> {
    let mut kernels: Vec<Option<Group>> = groups.into_iter().map(Some).collect();
    let mut producer: HashMap<usize, usize> = HashMap::new();
    for (i, k) in kernels.iter().enumerate() {
        for &o in k.iter().flat_map(|k| &k.outputs) {
            producer.insert(o, i);
        }
    }
    for r in 0..kernels.len() {
        let Some(m) = kernels[r].as_ref().and_then(|k| target(g, k, r, &producer, &kernels)) else {
            continue;
        };
        let Some(update) = kernels[r].take() else { continue };
        for &o in &update.outputs {
            producer.insert(o, m);
        }
        if let Some(mxu) = kernels[m].as_mut() {
            absorb(mxu, update);
        }
    }
    kernels.into_iter().flatten().collect()
}

/// The matmul kernel update kernel `k` (at `at`) joins, if any: `k` is a loop kernel of dynamic-update-slices
/// and pass-through ops only, and every value it reads that a kernel writes (what it stores) comes from one
/// matmul kernel before it; its other inputs (the buffers, the indices) are parameters or loop state.
fn target(
    g: &Graph<'_>,
    k: &Group,
    at: usize,
    producer: &HashMap<usize, usize>,
    kernels: &[Option<Group>],
) -> Option<usize> {
    let is_update = |m: &usize| g.nodes[*m].ins.opcode == "dynamic-update-slice";
    let moves = |m: &usize| {
        let n = &g.nodes[*m];
        n.class == OpClass::Free || matches!(n.ins.opcode.as_str(), "reshape" | "bitcast")
    };
    if k.kind != KernelKind::Loop
        || !k.members.iter().any(is_update)
        || !k.members.iter().all(|m| is_update(m) || moves(m))
    {
        return None;
    }
    let mut mxu: Option<usize> = None;
    for i in &k.inputs {
        let Some(&p) = producer.get(i) else { continue };
        let is_mxu = kernels[p].as_ref().is_some_and(|x| x.kind == KernelKind::Mxu);
        if p >= at || !is_mxu || mxu.is_some_and(|m| m != p) {
            return None;
        }
        mxu = Some(p);
    }
    mxu
}

/// Kernel `mxu` takes over `update`'s members, the values `update` read that `mxu` does not compute, and its
/// outputs.
fn absorb(mxu: &mut Group, update: Group) {
    let mut members: BTreeSet<usize> = mxu.members.iter().copied().collect();
    members.extend(update.members.iter().copied());
    for i in update.inputs {
        if !members.contains(&i) && !mxu.inputs.contains(&i) {
            mxu.inputs.push(i);
        }
    }
    for o in update.outputs {
        if !mxu.outputs.contains(&o) {
            mxu.outputs.push(o);
        }
    }
    // Node ids are a topological order.
    mxu.members = members.into_iter().collect();
}
