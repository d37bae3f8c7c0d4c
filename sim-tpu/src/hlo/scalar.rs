//! Integer scalar arithmetic (a loop counter's increment, index computations) runs on the TensorCore's scalar
//! unit, between kernels: no vector kernel, no launch.
//!
//! Evidence (compiler corpus, optimized modules under `tools/corpus/`'s output `opt/`): in scan.017
//! (`fori_loop`, 4 trips) the body's `s32[] add(counter, 1)` stays an unfused instruction with no estimate, and
//! the body's total (2,551 cycles on v6e) is its one loop fusion's; no entry instruction of any corpus record
//! with an `s32[]`, `u32[]` or `pred[]` result carries an estimate.

use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::KernelCost;
use crate::tensorcore::Bound;
use sim_core::layout::Shape;

/// Whether every instruction of kernel `k`, and every value it reads, is an integer or predicate scalar.
pub(super) fn on_scalar_unit(g: &Graph<'_>, k: &Group) -> bool {
    let int_scalar = |i: usize| match &g.nodes[i].ins.shape {
        Shape::Array(a) => a.dims.is_empty() && matches!(a.element_type.name(), "s32" | "u32" | "s64" | "u64" | "pred"),
        _ => false,
    };
    k.kind == KernelKind::Loop && k.members.iter().chain(&k.inputs).all(|&i| int_scalar(i))
}

/// The zero-cycle kernel standing for scalar-unit work.
pub(super) fn scalar_kernel(g: &Graph<'_>, k: &Group) -> KernelCost {
    KernelCost {
        name: g.nodes[k.anchor].ins.name.clone(),
        kind: k.kind,
        instructions: k.members.iter().map(|&m| g.nodes[m].ins.name.clone()).collect(),
        cycles: 0,
        start_cycle: 0,
        bound_by: Bound::Launch,
        flops: 0,
        hbm_bytes: 0,
        hbm_unpadded_bytes: 0,
        padding_bytes: 0,
        vmem_bytes: 0,
        nodes: k.members.clone(),
    }
}
