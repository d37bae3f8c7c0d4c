//! A `dynamic-update-slice` writes its update into the buffer in place: the kernel reads and writes the
//! update's bytes, not the whole buffer (a `lax.scan` writing step `t`'s output into the stacked result).
//!
//! Evidence (compiler corpus, scan family): scan.011 (an f32 RNN of 199 steps writing [128,512] per step into an
//! f32[199,128,512] result) costs 3,869 cycles per trip on v5e, where streaming the 52 MB result each trip would
//! take over 100,000; the optimized body updates the loop's result buffer in place (`dynamic-update-slice`
//! fused into the step's loop fusion, the buffer aliased).

use std::collections::{BTreeMap, BTreeSet};

use super::fusion::Group;
use super::graph::Graph;

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
