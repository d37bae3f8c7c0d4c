//! Batch-norm statistics of a convolution or matmul result: the passes the compiler runs after the MXU kernel.
//!
//! A statistic over the rows of a result `y` (a reduce over its batch and spatial dimensions keeping the
//! features: `mean(y, (0, 1, 2))`) needs every row of `y` before any element that uses it can be computed. The
//! compiler computes the first statistics (the sum) in the MXU kernel's epilogue and writes `y` out; every
//! statistic that depends on an earlier one (the variance, a reduce of `(y - mean)^2`) is a further reduce pass
//! reading `y` back; each level of statistics is finished by a small vector kernel (`sum / n`,
//! `rsqrt(var + eps)`); and the values combining `y` with its statistics (the normalised, scaled, activated
//! output) are a last loop pass reading `y` and writing them. tpusim's grouping puts all of it in the MXU kernel
//! (the convolution's only consumer); this module adds the passes.
//!
//! Evidence (compiler corpus, `tools/corpus/compare_kernels.py`, training-mode batch norm after a convolution):
//! conv.023 on v5e (bf16 y[1,28,28,192]): convolution and sum 5,065 cycles, `sum / n` 1,826, variance pass
//! 5,016, `rsqrt` 1,827, normalise-and-relu pass 5,070; conv.021 on v6e (bf16 y[56,33,33,387]): convolution and
//! sum 148,426, `sum / n` 2,120, variance pass 208,201, `rsqrt` 2,121, normalise pass 275,632; resnet_block.002 on
//! v5e (f32 y[10,19,19,256]): variance pass 28,589, normalise-add-relu pass 18,186. Inference-mode batch norm
//! (`y * g + b`, no statistics) stays in the MXU kernel's epilogue (conv.006 on v5e: one kernel).

use super::bytes::{dims_of, elements, Sizer};
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;
use super::{HloError, HloParams, KernelCost};
use crate::tensorcore::lower::VREG_ELEMENTS;
use crate::tensorcore::{Bound, ChipModel};

/// The statistics structure of an MXU kernel that normalises its result `y` by statistics over its rows: the
/// levels of those statistics, and the kernel outputs that combine `y` with a statistic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RowStatistics {
    /// The dot or convolution whose result the statistics are over.
    pub y: usize,
    /// One reduce of each level (1: over `y` alone; 2: over `y` and a level-1 statistic; ...), in level order.
    pub levels: Vec<usize>,
    /// Kernel outputs (not reductions) computed from `y` and a statistic: the normalised values.
    pub normalised: Vec<usize>,
}

/// Whether reduce node `r` reduces the rows of its input: its dimensions include the major one, and it keeps a
/// vector at least 8 times smaller than its input (the features), not a scalar.
fn over_rows(g: &Graph<'_>, r: usize) -> bool {
    let n = &g.nodes[r];
    if n.class != OpClass::Reduce || n.ins.opcode != "reduce" {
        return false;
    }
    let Some(&input) = n.operands.first() else { return false };
    let dims = n.ins.int_list("dimensions").unwrap_or_default();
    let kept = dims_of(&n.ins.shape).len();
    kept >= 1 && dims.contains(&0) && elements(&n.ins.shape).saturating_mul(8) <= elements(&g.nodes[input].ins.shape)
}

/// The row statistics over the dot or convolution result of MXU kernel `k`, when it computes any.
pub(super) fn row_statistics(g: &Graph<'_>, k: &Group) -> Option<RowStatistics> {
    if k.kind != KernelKind::Mxu {
        return None;
    }
    let mut members = k.members.clone();
    members.sort_unstable();
    members.dedup();
    let y = members
        .iter()
        .copied()
        .find(|&m| matches!(g.nodes[m].class, OpClass::Dot | OpClass::Convolution))?;
    // Per member: whether it depends on `y` inside the kernel, and the deepest statistic level it depends on.
    let mut on_y = vec![false; members.len()];
    let mut level = vec![0usize; members.len()];
    let mut levels: Vec<usize> = Vec::new();
    for (i, &m) in members.iter().enumerate() {
        let mut dep = m == y;
        let mut lv = 0;
        for o in &g.nodes[m].operands {
            if let Ok(j) = members.binary_search(o) {
                dep |= on_y[j];
                lv = lv.max(level[j]);
            }
        }
        if dep && over_rows(g, m) {
            lv += 1;
            if levels.len() < lv {
                levels.push(m);
            }
        }
        on_y[i] = dep;
        level[i] = lv;
    }
    // Only a normalisation (`y` combined with its own statistics, at `y`'s size) makes the passes: a statistic
    // that is only written out (a bias gradient summed over the batch) is the MXU kernel's epilogue.
    let full = |m: usize| {
        g.nodes[m].class != OpClass::Reduce && elements(&g.nodes[m].ins.shape) >= elements(&g.nodes[y].ins.shape)
    };
    let combined = members
        .iter()
        .enumerate()
        .any(|(i, &m)| on_y[i] && level[i] >= 1 && full(m));
    if levels.is_empty() || !combined {
        return None;
    }
    let normalised = k
        .outputs
        .iter()
        .copied()
        .filter(|o| {
            members
                .binary_search(o)
                .is_ok_and(|j| on_y[j] && level[j] >= 1 && full(*o))
        })
        .collect();
    Some(RowStatistics { y, levels, normalised })
}

/// A loop kernel of the passes, named `<node>.<what>`.
fn pass_kernel(name: String, cycles: u64, hbm_bytes: u64, bound_by: Bound) -> KernelCost {
    KernelCost {
        name,
        kind: KernelKind::Loop,
        instructions: Vec::new(),
        cycles,
        start_cycle: 0,
        bound_by,
        flops: 0,
        hbm_bytes,
        hbm_unpadded_bytes: hbm_bytes,
        padding_bytes: 0,
        vmem_bytes: 0,
        // Stand-ins for the compiler's kernels: they compute no value of the module a collective waits on.
        nodes: Vec::new(),
    }
}

/// Cycles of a loop pass over `blocks` 1024-element blocks streaming `streams` full-size arrays and moving
/// `bytes` over HBM: the fused-kernel model's loop pipeline (`loop_block_cycles`, `stream_block_cycles`) or the
/// transfer, whichever is longer, after the loop launch.
fn pass_cycles(blocks: f64, streams: f64, bytes: u64, chip: &ChipModel, hp: &HloParams) -> (u64, Bound) {
    let compute = blocks * (hp.loop_block_cycles + hp.stream_block_cycles * streams);
    let dma = bytes as f64 / hp.hbm_bytes_per_cycle.max(1e-9);
    let bound = if dma > compute { Bound::Hbm } else { Bound::Vpu };
    let body = compute.max(dma).max(0.0).round() as u64;
    (chip.loop_launch_cycles().saturating_add(body), bound)
}

/// The kernels the compiler runs after MXU kernel `k` for the row statistics it computes ([`row_statistics`]):
/// per level a vector kernel finishing the statistic, per level past the first a reduce pass reading `y`, and
/// a last pass reading `y` and writing the normalised outputs. Empty when `k` computes no row statistics.
pub(super) fn statistic_passes(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
) -> Result<Vec<KernelCost>, HloError> {
    let Some(stats) = row_statistics(g, k) else {
        return Ok(Vec::new());
    };
    let y = sizer.shape(&g.nodes[stats.y].ins.shape)?;
    // A convolution's result is swept in its batch-inside layout ([`super::conv_result_pass`]).
    let y_blocks = super::conv_result_pass::batch_inside_blocks(g, stats.y)
        .unwrap_or(y.padded_elements as f64 / VREG_ELEMENTS as f64);
    let mut passes = Vec::new();
    for (l, &r) in stats.levels.iter().enumerate() {
        let name = &g.nodes[r].ins.name;
        if l > 0 {
            let (cycles, bound) = pass_cycles(y_blocks, 1.0, y.padded_bytes, chip, hp);
            passes.push(pass_kernel(format!("{name}.pass"), cycles, y.padded_bytes, bound));
        }
        let launch = chip.loop_launch_cycles();
        passes.push(pass_kernel(format!("{name}.finish"), launch, 0, Bound::Launch));
    }
    if !stats.normalised.is_empty() {
        let mut out_bytes = 0u64;
        let mut blocks = y_blocks;
        for &o in &stats.normalised {
            let s = sizer.shape(&g.nodes[o].ins.shape)?;
            out_bytes = out_bytes.saturating_add(s.padded_bytes);
            blocks = blocks.max(s.padded_elements as f64 / VREG_ELEMENTS as f64);
        }
        let streams = 1.0 + stats.normalised.len() as f64;
        let bytes = y.padded_bytes.saturating_add(out_bytes);
        let (cycles, bound) = pass_cycles(blocks, streams, bytes, chip, hp);
        let name = &g.nodes[stats.y].ins.name;
        passes.push(pass_kernel(format!("{name}.normalise"), cycles, bytes, bound));
    }
    Ok(passes)
}

/// A reduce kernel whose only array input is a convolution's result (its sum for a batch norm, a loss summed to
/// a scalar) runs in the convolution kernel's epilogue, as a second output of that kernel: it costs its vector
/// work on tiles already on chip (`mxu_fused_op_cycles` per 1024 padded elements per reduction), with no launch
/// and no HBM read. Evidence (compiler corpus): conv.001 on v5e (f32 y[55,112,112,128], relu, square, sum to a
/// scalar): one kOutput fusion of the convolution and the sum, 2,342,620 cycles, where tpusim's separate reduce
/// kernel read the 353 MB result again (1,395,883 cycles); resnet_block.002 on v5e: each convolution's kernel
/// writes its batch-norm sum beside its result (`(f32[64], f32[10,19,19,64])`), no reduce kernel over `y` alone.
pub(super) fn epilogue_reduction(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    hp: &HloParams,
) -> Result<Option<KernelCost>, HloError> {
    if k.kind != KernelKind::Reduce {
        return Ok(None);
    }
    let arrays: Vec<usize> = k
        .inputs
        .iter()
        .copied()
        .filter(|&i| g.nodes[i].ins.opcode != "constant" && elements(&g.nodes[i].ins.shape) > 1)
        .collect();
    let [y] = arrays.as_slice() else { return Ok(None) };
    if g.nodes[*y].class != OpClass::Convolution {
        return Ok(None);
    }
    let reductions = k
        .members
        .iter()
        .filter(|&&m| g.nodes[m].class == OpClass::Reduce)
        .count();
    let blocks = sizer.shape(&g.nodes[*y].ins.shape)?.padded_elements as f64 / VREG_ELEMENTS as f64;
    let per_block = hp.mxu_fused_op_cycles.unwrap_or(hp.fused_op_cycles);
    let cycles = (blocks * per_block * reductions as f64).max(0.0).round() as u64;
    Ok(Some(KernelCost {
        name: g.nodes[k.anchor].ins.name.clone(),
        kind: KernelKind::Reduce,
        instructions: k.members.iter().map(|&m| g.nodes[m].ins.name.clone()).collect(),
        cycles,
        start_cycle: 0,
        bound_by: Bound::Vpu,
        flops: elements(&g.nodes[*y].ins.shape).saturating_mul(reductions as u64),
        hbm_bytes: 0,
        hbm_unpadded_bytes: 0,
        padding_bytes: 0,
        vmem_bytes: 0,
        nodes: k.members.clone(),
    }))
}
