//! A loop or reduce kernel reading a convolution's result whole (a batch-norm variance, a relu-mask gradient sum,
//! a normalise pass) sweeps it in the convolution's own batch-inside layout at the loop pipeline's rate, whether
//! the result sits in VMEM or in HBM.
//!
//! The compiler writes a convolution result `[N, H, W, C]` (`b01f`) with the channels in the lanes and the batch
//! in the sublanes (`{3,0,2,1:T(8,128)}`), so a batch that is not a multiple of 8 is padded to one, and the
//! channels to 128. A pass over that result costs the loop pipeline (`loop_block_cycles` and one stream,
//! `stream_block_cycles`) per padded 1,024-element block, in VMEM (`S(1)`) as in HBM: not the cheaper rate of
//! vector work on tiles already on chip. tpusim counted the result's blocks in its default layout (the width in
//! the sublanes) and, with the result placed in VMEM, at the on-chip rate.
//!
//! Evidence (compiler corpus, fit records' optimized entry modules, kLoop reduce fusions over the result;
//! `(estimate - launch) / padded blocks`): resnet_block.010 (bf16 `[10,56,56,96]`, 10 rows pad to 16: 6,272
//! blocks where tpusim counted 3,920; `[10,56,56,384]`, 18,816 blocks) variance passes 92,191 and 274,331 cycles
//! on v5e (14.4 a block, in `S(1)`), 44,157 and 128,006 on v6e (6.7), 30,342 on tpu7x (4.5), 89,244 on v4
//! (14.1), 37,861 on v5p (5.7), where tpusim priced them on chip (27,462 on v5e); the relu-mask gradient sums of
//! `[10,56,56,384]` 278,366 and 280,830 on v5e. The same rate on resnet_block.000 (N 29 pads to 32: 14.5 on v5e),
//! .003 (N 12), .006 (N 28), .011 (N 52), .021 (N 19 pads to 24: 13.75), conv.007 (N 29); held out, conv.021 (N
//! 56, 14.4) and resnet_block.016 (N 13, 14.5). The installed `loop_block_cycles + stream_block_cycles` (v5e
//! 15.7, v6e 7.5, tpu7x 4.4, v4 13.9, v5p 5.5) is within 12% of each. A batch of at most 7 over images at least
//! 8 wide is windowed instead (`relayout`): its result is not in this layout, and the rule leaves it.

use super::bytes::{dims_of, MAX_UNTILED_BATCH};
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;
use super::HloParams;
use crate::tensorcore::lower::VREG_ELEMENTS;

/// Rows of a sublane tile the batch is padded to.
const SUBLANES: u64 = 8;
/// Lanes of a tile the channels are padded to.
const LANES: u64 = 128;

/// 1,024-element blocks of convolution `conv`'s result in the compiler's batch-inside layout (batch padded to 8
/// rows, features to 128 lanes, the spatial dimensions whole), when `conv` is a convolution with spatial
/// dimensions over a batch of at least 8 (one that fills a tile's rows, so never windowed); `None` otherwise.
pub(super) fn batch_inside_blocks(g: &Graph<'_>, conv: usize) -> Option<f64> {
    let n = &g.nodes[conv];
    if n.class != OpClass::Convolution {
        return None;
    }
    let out_labels = n.ins.attr("dim_labels")?.split_once("->")?.1;
    let dims = dims_of(&n.ins.shape);
    if dims.len() < 3 || out_labels.len() != dims.len() {
        return None;
    }
    let (b, f) = (out_labels.find('b')?, out_labels.find('f')?);
    let batch = dims[b];
    if batch <= MAX_UNTILED_BATCH {
        return None;
    }
    let mut padded = batch.div_ceil(SUBLANES).saturating_mul(SUBLANES);
    padded = padded.saturating_mul(dims[f].div_ceil(LANES).saturating_mul(LANES));
    for (i, &d) in dims.iter().enumerate() {
        if i != b && i != f {
            padded = padded.saturating_mul(d);
        }
    }
    Some(padded as f64 / VREG_ELEMENTS as f64)
}

/// The least body cycles (launch excluded) of loop or reduce kernel `k` when it reads a convolution's result
/// whole: the loop pipeline with one stream over the result's batch-inside blocks ([`batch_inside_blocks`]), the
/// largest such input's. `inputs` are `k`'s inputs as the values they forward ([`super::cost`]'s `forwarded`);
/// inputs read through a window (a slice) are left out by the caller. `None` when no input is such a result.
pub(super) fn pass_floor(g: &Graph<'_>, k: &Group, inputs: &[usize], hp: &HloParams) -> Option<f64> {
    if !matches!(k.kind, KernelKind::Loop | KernelKind::Reduce) {
        return None;
    }
    let blocks = inputs
        .iter()
        .filter_map(|&i| batch_inside_blocks(g, i))
        .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))))?;
    Some(blocks * (hp.loop_block_cycles + hp.stream_block_cycles))
}
