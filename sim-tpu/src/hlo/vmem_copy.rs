//! On-chip copies in an optimized module: the compiler's memory-space assignment copies a value written to HBM
//! into VMEM (`copy-start`/`copy-done` whose result layout is in memory space 1, `S(1)`), and kernels after it
//! read the copy. The HBM buffer is free once the copy is done, which is before the first kernel reading the
//! copy; kernels reading the copy do not keep it alive.
//!
//! Evidence (the compiler's per-device modules and `memory_analysis()`, `testdata/shard/models/`): in the
//! tensor-parallel MLP on v5p 2x2x1, `fusion.25` (the hidden activation, 8 MiB) is copied to `S(1)` while the
//! all-reduce runs and the backward kernels read `copy-done.4`; the all-reduce's result is read once from HBM
//! and then from `copy-done.1`. The compiler's temp, 16.1 MiB, is two 8 MiB buffers at once, where holding both
//! values in HBM until their last reader makes three.

use std::collections::{BTreeSet, HashMap};

use super::fusion::Group;
use super::graph::Graph;

/// Whether node `n`'s result lives in VMEM (memory space 1 in its layout).
fn in_vmem(g: &Graph<'_>, n: usize) -> bool {
    match &g.nodes[n].ins.shape {
        sim_core::layout::Shape::Array(a) => a.layout.as_ref().is_some_and(|l| l.memory_space == 1),
        _ => false,
    }
}

/// The value operand `o` forwards (through bitcasts and copies) and whether an on-chip copy lies on the way.
fn source(g: &Graph<'_>, mut o: usize) -> (usize, bool) {
    let mut via_copy = false;
    for _ in 0..64 {
        let n = &g.nodes[o];
        match n.ins.opcode.as_str() {
            "copy-done" | "copy-start" | "bitcast" if n.operands.len() == 1 => {
                via_copy |= n.ins.opcode == "copy-done" && in_vmem(g, o);
                o = n.operands[0];
            }
            _ => break,
        }
    }
    (o, via_copy)
}

/// For each value a kernel reads, the last kernel (index into `kernels`) that needs its HBM buffer: the last
/// reading it directly, or the one before the first reading its on-chip copy, whichever is later. A kernel input
/// reached only through on-chip copies is a copy read; any other input is a direct read, as before.
pub(super) fn hbm_last_use(g: &Graph<'_>, kernels: &[Group]) -> HashMap<usize, usize> {
    let mut direct: HashMap<usize, usize> = HashMap::new();
    let mut first_copy_read: HashMap<usize, usize> = HashMap::new();
    for (t, k) in kernels.iter().enumerate() {
        let mut copied = BTreeSet::new();
        let mut plain = BTreeSet::new();
        for &m in &k.members {
            if matches!(g.nodes[m].ins.opcode.as_str(), "copy-done" | "copy-start" | "bitcast") {
                continue;
            }
            for &o in &g.nodes[m].operands {
                let (src, via_copy) = source(g, o);
                if via_copy {
                    copied.insert(src);
                } else {
                    plain.insert(src);
                }
            }
        }
        for &i in &k.inputs {
            if copied.contains(&i) && !plain.contains(&i) {
                first_copy_read.entry(i).or_insert(t);
            } else {
                direct.insert(i, t);
            }
        }
    }
    for (src, t) in first_copy_read {
        let copied_by = t.saturating_sub(1);
        let e = direct.entry(src).or_insert(copied_by);
        *e = (*e).max(copied_by);
    }
    direct
}
