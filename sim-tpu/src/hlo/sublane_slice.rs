//! A `dynamic-slice` that takes fewer rows than a tile holds along its input's sublane dimension (the
//! second-minor dimension of the tiled layout) is a kernel of its own: a strided DMA reading every tile the
//! window crosses into VMEM, which the consuming kernel then reads on chip.
//!
//! The compiler lays out a stacked `lax.scan` input `xs[T, B, H]` with the steps in the sublanes whenever that
//! pads least (its entry layout, [`crate::tiling::tpu_layout`]), so step `t`'s rows sit one row of each
//! `(8,128)` tile apart. Evidence (compiler corpus, optimized loop bodies; every scan whose `xs` is laid out
//! steps-in-sublanes, none otherwise): a kLoop `constant_dynamic-slice_fusion` reading `xs` in HBM and writing
//! `[1, B, H]` to VMEM (`S(1)`, `S(3)` on v4) before the step's matmul kernel, on all five chips:
//! - fit record scan.008 (bf16[231,2420,811] `{1,0,2}`: 811 x 19 = 15,409 tiles of 2 KiB, 31.6 MB touched for a
//!   3.9 MB step) costs 233,017 cycles a trip on v4, 223,478 on v5e, 88,574 on v5p, 136,342 on v6e and 86,454 on
//!   tpu7x: 3.5, 3.5, 4.3, 4.0 and 5.3 times the touched tiles at the compiler's HBM rate, after the loop
//!   launch ([`STRIDED_TILE_READS`]). tpusim fused the slice into the matmul kernel reading 3.9 MB, 3-4x under
//!   on every chip;
//! - fit record scan.000 (bf16[129,41,1536] `{2,0,1}`: 492 tiles) costs 8,934 cycles on v4 and 5,714 on v6e
//!   (4.3 and 3.5 times, again after the launch);
//! - the small ones (scan.004, .006, .009, .010, held-out .001: at most a few hundred tiles) cost the launch
//!   and little more (scan.006: 702 cycles on v4, 2,158 on v6e, the op model's `launch_cycles` 607 and 2,116),
//!   and so do slices of an `xs` the loop keeps on chip (scan.009's `S(1)` input: 2,465 cycles on v6e).

use super::bytes::Sizer;
use super::fusion::Group;
use super::graph::Graph;
use super::{HloError, KernelCost, KernelKind};
use crate::tensorcore::{Bound, ChipModel};
use std::collections::BTreeSet;

/// HBM time of a strided slice per tile it touches, in whole-tile transfers at the compiler's HBM rate: each
/// tile yields one packed row, and the DMA of such short rows runs at about a quarter of the streaming rate.
/// Read off fit record scan.008 (3.5 v4, 3.5 v5e, 4.3 v5p, 4.0 v6e, 5.3 tpu7x); not fitted by `hlo_fit`.
pub(super) const STRIDED_TILE_READS: f64 = 4.0;

/// A slice the compiler gives a kernel of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SublaneSlice {
    /// The `dynamic-slice` node.
    pub slice: usize,
    /// The array it reads (an input of the kernel it was grouped in).
    pub input: usize,
    /// Bytes of the input's tiles the window crosses.
    pub tile_bytes: u64,
}

/// The dynamic-slices of kernel `k` that take fewer rows than a tile along their input's sublane dimension, of
/// inputs in the entry's layout (`laid`: entry parameters, or loop state holding them) that the kernel reads
/// only through such slices ([`super::inplace::windowed_reads`]), when the kernel does more than slice (a
/// kernel that is the slice alone already is one).
///
/// Only the entry's layout is known: the compiler lays out the arrays a program makes itself as their writers
/// need. A scan's backward loop slicing the stacks its forward loop wrote step by step reads them steps-major,
/// with no slice kernel (scan.010, fit, bf16[19,9,128] stacks `{2,1,0}`: one slice kernel per loop, of `xs`).
pub(super) fn sublane_slices(
    g: &Graph<'_>,
    k: &Group,
    laid: &BTreeSet<usize>,
    sizer: &Sizer,
) -> Result<Vec<SublaneSlice>, HloError> {
    let is_slice = |m: usize| g.nodes[m].ins.opcode == "dynamic-slice";
    if k.members.iter().all(|&m| is_slice(m)) {
        return Ok(Vec::new());
    }
    let windowed = super::inplace::windowed_reads(g, k, sizer)?;
    let mut out = Vec::new();
    for &m in &k.members {
        let n = &g.nodes[m];
        let Some(&input) = n.operands.first() else { continue };
        if !is_slice(m) || !windowed.contains_key(&input) || !laid.contains(&input) {
            continue;
        }
        let read = |a: &sim_core::layout::ArrayShape| {
            let l = a.layout.as_ref()?;
            let t = l.tiles.first().filter(|t| t.dims.len() == 2)?;
            let lane = usize::try_from(*l.minor_to_major.first()?).ok()?;
            let sub = usize::try_from(*l.minor_to_major.get(1)?).ok()?;
            Some((
                lane,
                sub,
                u64::try_from(t.dims[0]).ok()?,
                u64::try_from(t.dims[1]).ok()?,
            ))
        };
        let Some((lane, sub, rows, lanes)) = super::relayout::entry_layout(&g.nodes[input].ins.shape, sizer, read)?
        else {
            continue;
        };
        let whole = super::bytes::dims_of(&g.nodes[input].ins.shape);
        let window = super::bytes::dims_of(&n.ins.shape);
        if window.len() != whole.len() || rows < 2 || lanes == 0 {
            continue;
        }
        let (Some(&w_sub), Some(&a_sub)) = (window.get(sub), whole.get(sub)) else {
            continue;
        };
        if w_sub >= a_sub || w_sub >= rows {
            continue;
        }
        let mut tiles = window[lane].div_ceil(lanes);
        for (d, &extent) in window.iter().enumerate() {
            if d != lane && d != sub {
                tiles = tiles.saturating_mul(extent);
            }
        }
        let bits = match &n.ins.shape {
            sim_core::layout::Shape::Array(a) => a.element_type.bit_width() as u64,
            _ => continue,
        };
        let tile_bytes = tiles.saturating_mul((rows * lanes * bits).div_ceil(8));
        out.push(SublaneSlice {
            slice: m,
            input,
            tile_bytes,
        });
    }
    Ok(out)
}

/// The slice's own kernel: the op model's loop launch, then [`STRIDED_TILE_READS`] transfers of each touched tile
/// at `hbm_bytes_per_cycle`, or the launch alone when the input is on chip (`on_chip`).
pub(super) fn slice_kernel(
    g: &Graph<'_>,
    s: &SublaneSlice,
    on_chip: bool,
    chip: &ChipModel,
    hbm_bytes_per_cycle: f64,
) -> KernelCost {
    let launch = chip.loop_launch_cycles();
    let (hbm, body) = if on_chip {
        (0, 0)
    } else {
        let t = STRIDED_TILE_READS * s.tile_bytes as f64 / hbm_bytes_per_cycle.max(1e-9);
        (s.tile_bytes, t.round() as u64)
    };
    let n = &g.nodes[s.slice];
    KernelCost {
        name: n.ins.name.clone(),
        kind: KernelKind::Loop,
        instructions: vec![n.ins.name.clone()],
        cycles: launch.saturating_add(body),
        start_cycle: 0,
        bound_by: if body > launch { Bound::Hbm } else { Bound::Launch },
        flops: 0,
        hbm_bytes: hbm,
        hbm_unpadded_bytes: hbm,
        padding_bytes: 0,
        vmem_bytes: s.tile_bytes,
        nodes: vec![s.slice],
    }
}

/// The inputs of `slices`: read on chip by the kernel they were grouped in.
pub(super) fn sliced_inputs(slices: &[SublaneSlice]) -> BTreeSet<usize> {
    slices.iter().map(|s| s.input).collect()
}

/// The state elements of the loop whose initial tuple is node `init` of `outer` and whose body is `body` that
/// hold a parameter of `outer`, passed through unchanged: laid out as `outer`'s caller lays out its arguments.
pub(super) fn parameter_elements(outer: &Graph<'_>, init: usize, body: &Graph<'_>) -> BTreeSet<usize> {
    super::loop_convert::passed_parameters(outer, init, body)
        .iter()
        .map(|p| p.element)
        .collect()
}
