//! A per-device (SPMD) program on a slice: each collective of the module costed on the slice's torus, and the
//! step with collectives overlapping compute as far as their dependencies allow.
//!
//! Pricing: a collective takes the busiest link's bytes over the link bandwidth ([`crate::topology::groups`]),
//! plus its hops times the per-hop latency, plus one launch latency; the chip's `ici_bytes_per_s_per_link`,
//! `ici_hop_latency_ns` and `ici_collective_launch_ns` (each with its source in the chip data, and what-ifs
//! through `--set chip.X`). Every collective is asynchronous: it starts when its operands are ready and the
//! ICI is free, and only the kernels that read its result wait for it ([`schedule`]).

pub mod mesh;
pub mod oracle;
pub mod published;
pub mod report;
pub mod schedule;

use std::collections::BTreeMap;

use serde::Serialize;

use super::collective::{Collective, CollectiveKind, Participants};
use super::cost::ModuleCost;
use super::graph::Graph;
use super::{HloError, HloModule};
use crate::chips::Chip;
use crate::topology::groups::{Algorithm, DeviceMap, Pattern};
use crate::topology::{Ring, SliceShape};

/// The ICI constants a collective is priced with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LinkParams {
    /// Bytes per second one link carries one way (`ici_bytes_per_s_per_link`).
    pub link_bytes_per_s: u64,
    /// Latency of one hop, ns (`ici_hop_latency_ns`).
    pub hop_latency_ns: u64,
    /// Fixed cost to start one collective, ns (`ici_collective_launch_ns`).
    pub launch_ns: u64,
}

impl LinkParams {
    /// The chip's values, what-ifs included.
    pub fn of(chip: &Chip) -> LinkParams {
        LinkParams {
            link_bytes_per_s: chip.spec.ici_bytes_per_s_per_link,
            hop_latency_ns: chip.params.ici_hop_latency_ns,
            launch_ns: chip.params.ici_collective_launch_ns,
        }
    }
}

/// Compiler devices per chip: one per TensorCore unless a device is a megacore pair.
pub fn devices_per_chip(chip: &Chip) -> u32 {
    (chip.spec.tensorcores_per_chip / chip.spec.model_device_tensorcores.max(1)).max(1)
}

/// One collective's cost on the slice.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CollectiveCost {
    /// Instruction name.
    pub name: String,
    /// Kind.
    pub kind: CollectiveKind,
    /// Whether the module states it as an async `-start`/`-done` pair.
    pub is_async: bool,
    /// `channel_id`, when given.
    pub channel_id: Option<u64>,
    /// Bytes the pattern moves per device: the operand (all-reduce, reduce-scatter, all-to-all, permute) or the
    /// gathered result (all-gather).
    pub bytes: u64,
    /// Devices in the largest group (permutes: devices named).
    pub group_size: u64,
    /// Groups.
    pub groups: u64,
    /// Chips the largest group spans.
    pub chips: u64,
    /// Torus dimensions it runs along.
    pub rings: Vec<Ring>,
    /// Hops paid one after another.
    pub hops: u64,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Bytes over bandwidth on the busiest link, cycles.
    pub bandwidth_cycles: u64,
    /// Hops and launch, cycles.
    pub latency_cycles: u64,
    /// Total, cycles.
    pub cycles: u64,
    /// When it starts and ends in the step, cycles.
    pub start_cycle: u64,
    /// End cycle.
    pub end_cycle: u64,
    /// Its cycles over the step's.
    pub share_of_step: f64,
    /// The largest group's device ids (permutes: every device named).
    #[serde(skip)]
    pub group_ids: Vec<u32>,
    /// With `--mesh`: the mesh axes its groups span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh_axes: Option<Vec<String>>,
}

/// The step on the slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepCost {
    /// TensorCore cycles of the kernels (collectives excluded).
    pub compute_cycles: u64,
    /// Cycles of every collective, summed (overlapped or not).
    pub collective_cycles: u64,
    /// Collective cycles by kind.
    pub collective_cycles_by_kind: BTreeMap<CollectiveKind, u64>,
    /// Step cycles the TensorCore spends waiting for collectives: step - compute.
    pub exposed_communication_cycles: u64,
    /// The step, cycles.
    pub step_cycles: u64,
    /// The step, microseconds at the chip's clock.
    pub step_us: f64,
}

/// The slice a module runs on.
#[derive(Clone, Debug, Serialize)]
pub struct SliceInfo {
    /// Shape, e.g. `4x4x4 (torus)`.
    pub shape: String,
    /// Chips.
    pub chips: u64,
    /// Compiler devices.
    pub devices: u64,
    /// The link constants used.
    pub link: LinkParams,
    /// The TensorCore clock cycles are counted in, Hz.
    pub clock_hz: f64,
}

/// A module costed on a slice.
#[derive(Clone, Debug)]
pub struct SliceCost {
    /// The slice.
    pub slice: SliceInfo,
    /// Every collective of the entry, in program order.
    pub collectives: Vec<CollectiveCost>,
    /// The step.
    pub step: StepCost,
    /// Kernel indices (into the module cost's kernels) that are collectives.
    pub collective_kernels: Vec<usize>,
    /// Each kernel's start cycle in the step.
    pub kernel_starts: Vec<u64>,
    /// Opcodes of the collective kernels' instructions, counted (they leave the unmodelled counts).
    pub collective_opcodes: BTreeMap<String, u64>,
    /// Warnings (collectives the slice model does not see).
    pub warnings: Vec<String>,
}

fn unpadded(shape: &sim_core::layout::Shape) -> u64 {
    match shape {
        sim_core::layout::Shape::Array(a) => a.unpadded_bytes().unwrap_or(0),
        sim_core::layout::Shape::Tuple(t) => t.iter().map(unpadded).sum(),
        _ => 0,
    }
}

/// The pattern, bytes and group list of collective node `n`.
fn pattern_of(g: &Graph<'_>, n: usize, c: &Collective, devices: u32) -> (Pattern, Vec<Vec<u32>>, u64) {
    let node = &g.nodes[n];
    let operand_bytes: u64 = match c.kind {
        CollectiveKind::CollectivePermute => node.operands.first().map_or(0, |&o| unpadded(&g.nodes[o].ins.shape)),
        _ => node.operands.iter().map(|&o| unpadded(&g.nodes[o].ins.shape)).sum(),
    };
    let groups = c.groups(devices);
    let size = groups.iter().map(|x| x.len() as u64).max().unwrap_or(1);
    let pattern = match (&c.participants, c.kind) {
        (Participants::Pairs(p), _) => Pattern::Permute {
            bytes: operand_bytes,
            pairs: p.clone(),
        },
        (_, CollectiveKind::AllReduce) => Pattern::AllReduce { bytes: operand_bytes },
        (_, CollectiveKind::AllGather) => Pattern::Gather {
            bytes: operand_bytes.saturating_mul(size),
        },
        (_, CollectiveKind::ReduceScatter) => Pattern::Gather { bytes: operand_bytes },
        (_, _) => Pattern::AllToAll { bytes: operand_bytes },
    };
    let bytes = match &pattern {
        Pattern::AllReduce { bytes } | Pattern::Gather { bytes } | Pattern::AllToAll { bytes } => *bytes,
        Pattern::Permute { bytes, .. } => *bytes,
    };
    (pattern, groups, bytes)
}

/// Costs one collective node on the slice (start and end cycles are the schedule's).
fn cost_collective(
    g: &Graph<'_>,
    n: usize,
    c: &Collective,
    map: &DeviceMap,
    link: &LinkParams,
    clock_hz: f64,
) -> Result<CollectiveCost, HloError> {
    let name = &g.nodes[n].ins.name;
    let devices = u32::try_from(map.devices()).unwrap_or(u32::MAX);
    let (pattern, groups, bytes) = pattern_of(g, n, c, devices);
    let t = map
        .cost(&pattern, &groups, link.link_bytes_per_s)
        .map_err(|e| HloError::Unsupported(format!("collective `{name}`: {e}")))?;
    let cycles_of_ps = |ps: u128| ((ps as f64) * clock_hz / 1e12).round() as u64;
    let latency_ps = if t.algorithm == Algorithm::OnChip && t.time.latency_hops == 0 {
        link.launch_ns as u128 * 1000
    } else {
        (t.time.latency_hops as u128 * link.hop_latency_ns as u128 + link.launch_ns as u128) * 1000
    };
    let bandwidth_cycles = cycles_of_ps(t.time.bandwidth_ps as u128);
    let latency_cycles = cycles_of_ps(latency_ps);
    Ok(CollectiveCost {
        name: name.clone(),
        kind: c.kind,
        is_async: c.is_async,
        channel_id: c.channel_id,
        bytes,
        group_size: groups.iter().map(|x| x.len() as u64).max().unwrap_or(0),
        groups: groups.len() as u64,
        chips: t.chips,
        rings: t.rings,
        hops: t.time.latency_hops,
        algorithm: t.algorithm,
        bandwidth_cycles,
        latency_cycles,
        cycles: bandwidth_cycles + latency_cycles,
        start_cycle: 0,
        end_cycle: 0,
        share_of_step: 0.0,
        group_ids: groups.iter().max_by_key(|x| x.len()).cloned().unwrap_or_default(),
        mesh_axes: None,
    })
}

/// Costs `module` (already costed per device as `cost`) on `slice` of `chip`: each collective of the entry on
/// the torus, and the step with collectives overlapping compute ([`schedule::run`]).
pub fn cost_on_slice(
    module: &HloModule,
    cost: &ModuleCost,
    chip: &Chip,
    slice: &SliceShape,
    clock_hz: f64,
) -> Result<SliceCost, HloError> {
    let map = DeviceMap {
        slice: slice.clone(),
        devices_per_chip: devices_per_chip(chip),
    };
    let link = LinkParams::of(chip);
    let g = Graph::build(module)?;
    let mut by_node: BTreeMap<usize, CollectiveCost> = BTreeMap::new();
    let mut in_entry = 0usize;
    for (i, node) in g.nodes.iter().enumerate() {
        let c = Collective::of(node.ins)
            .map_err(|e| HloError::Unsupported(format!("instruction `{}`: {e}", node.ins.name)))?;
        if let Some(c) = c {
            if let Some(max) = c.max_device() {
                map.coords(max)
                    .map_err(|e| HloError::Unsupported(format!("instruction `{}`: {e}", node.ins.name)))?;
            }
            by_node.insert(i, cost_collective(&g, i, &c, &map, &link, clock_hz)?);
            in_entry += 1;
        }
    }
    let total_in_module = module
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .filter(|i| CollectiveKind::of_opcode(&i.opcode).is_some())
        .count();
    let mut warnings = Vec::new();
    if total_in_module > in_entry {
        warnings.push(format!(
            "{} collectives inside while loops or conditionals are costed by the single-device rule (their bytes \
             at the HBM rate), not on the slice",
            total_in_module - in_entry
        ));
    }
    let plan = schedule::run(&g, cost, &mut by_node);
    let mut collective_opcodes = BTreeMap::new();
    for &k in &plan.collective_kernels {
        for &n in &cost.kernels[k].nodes {
            *collective_opcodes.entry(g.nodes[n].ins.opcode.clone()).or_insert(0) += 1;
        }
    }
    let step_cycles = plan.step_cycles;
    let mut collectives: Vec<CollectiveCost> = by_node.into_values().collect();
    let mut by_kind = BTreeMap::new();
    for c in &mut collectives {
        c.share_of_step = c.cycles as f64 / step_cycles.max(1) as f64;
        *by_kind.entry(c.kind).or_insert(0) += c.cycles;
    }
    Ok(SliceCost {
        slice: SliceInfo {
            shape: slice.to_string(),
            chips: slice.chips(),
            devices: map.devices(),
            link,
            clock_hz,
        },
        step: StepCost {
            compute_cycles: plan.compute_cycles,
            collective_cycles: collectives.iter().map(|c| c.cycles).sum(),
            collective_cycles_by_kind: by_kind,
            exposed_communication_cycles: step_cycles.saturating_sub(plan.compute_cycles),
            step_cycles,
            step_us: step_cycles as f64 * 1e6 / clock_hz,
        },
        collectives,
        collective_kernels: plan.collective_kernels,
        kernel_starts: plan.kernel_starts,
        collective_opcodes,
        warnings,
    })
}
