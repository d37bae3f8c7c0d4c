//! A kernel (filter) gradient: a convolution whose window is larger than its output, as jax writes the gradient
//! of a convolution's kernel (`x` with labels `f01b` against the output gradient `dy` as a `i01o` window, result
//! `01bf` of the kernel's shape). The compiler keeps the whole small result on chip and streams the two large
//! operands once, window by window, contracting over the batch and the positions of `dy` together: one product
//! with `M` = the result's rows (its `b` dimension times its spatial size: input channels times kernel taps),
//! `K` = the contracted batch times the window's positions, `N` = the output channels. The op model's convolution
//! plan instead treats each of the thousands of window positions as a kernel tap of a narrow contraction and
//! re-reads the window for every block of result rows.
//!
//! Evidence (compiler corpus, optimized modules): conv.001 (f32 x[55,112,112,125], 3x3) on v5e: the kernel
//! gradient's kOutput fusion `f32[3,3,125,128]` iterates over `dy` windows (`kernel_window_bounds` 14x38,
//! iteration bounds 8 x 3 x 7) with the result's window whole, 2,436,963 cycles, beside the forward convolution's
//! 2,342,620 (the same FLOPs); tpusim's plan took 9,726,115, reading 707 MB at 73 B per cycle. The same on v4
//! (+155% before) and v5p (+152%); on v6e the plan was MXU-bound (1,084,029 against 1,135,820) and stays so.

use super::bytes::{dims_of, Sizer, MAX_UNTILED_BATCH};
use super::graph::{Graph, Node};
use super::ops::OpClass;
use super::HloError;
use crate::tensorcore::cost::Residency;
use crate::tensorcore::lower::MxuWork;
use crate::tensorcore::ChipModel;

/// A kernel gradient as the compiler runs it: the product the MXU computes, with every operand on chip, and the
/// cycles it takes at least to stream its operands not already on chip once from HBM.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct KernelGradient {
    /// The product: `M` result rows, `K` contracted batch and window positions, `N` output channels.
    pub work: MxuWork,
    /// The operands' windows are fetched once, so the product's window plan moves nothing over HBM.
    pub residency: Residency,
    /// Cycles streaming the operands not `resident` (padded bytes) at `hbm_bytes_per_cycle`.
    pub stream_cycles: f64,
    /// Cycles the transpose unit takes at least ([`one_tap_transpose_cycles`]).
    pub transpose_cycles: f64,
}

/// Convolution `node` as a kernel gradient ([`KernelGradient`]) when its window (the right operand's spatial
/// size) has more positions than its output's spatial size; `None` otherwise. `work` is the convolution's work
/// as the op model sees it (rows `m` = batch times output positions, `k` = channels per group, `n` = output
/// channels), `residency` which operands are already on chip.
pub(super) fn kernel_gradient(
    g: &Graph<'_>,
    node: &Node<'_>,
    work: &MxuWork,
    residency: Residency,
    sizer: &Sizer,
    chip: &ChipModel,
    hbm_bytes_per_cycle: f64,
) -> Result<Option<KernelGradient>, HloError> {
    if node.class != OpClass::Convolution {
        return Ok(None);
    }
    let (Some(&x), Some(&dy)) = (node.operands.first(), node.operands.get(1)) else {
        return Ok(None);
    };
    let Some(window) = gradient_window(g, node) else {
        return Ok(None);
    };
    let mut bytes = 0u64;
    for (o, resident) in [(x, residency.lhs), (dy, residency.rhs)] {
        if !resident {
            bytes = bytes.saturating_add(sizer.shape(&g.nodes[o].ins.shape)?.padded_bytes);
        }
    }
    let product = MxuWork {
        batch: 1,
        m: work.m,
        k: work.k.saturating_mul(window),
        n: work.n,
        taps_h: 1,
        taps_w: 1,
        dtype: work.dtype,
        out_bits: work.out_bits,
        conv: false,
    };
    let transpose_cycles = one_tap_transpose_cycles(node, &product, chip);
    Ok(Some(KernelGradient {
        work: product,
        transpose_cycles,
        residency: Residency {
            lhs: true,
            rhs: true,
            out: residency.out,
        },
        stream_cycles: bytes as f64 / hbm_bytes_per_cycle.max(1e-9),
    }))
}

/// Cycles a kernel gradient of a one-tap (1x1) window spends at least on the transpose unit: both its operands
/// are activations stored channel-minor, so the contracted batch and positions are their major dimensions and
/// the MXU's streamed operand is read transposed, one block per MXU pass: `ceil(M / w) * ceil(K / w) * ceil(N /
/// w)` blocks of the array's width `w` at the weight transpose rate (`mxu_weight_transpose_cycles`), shared by
/// the TensorCores of a megacore device. A window of several taps reuses each transposed block across its taps
/// (fewer transposes than passes, not modelled: `0`).
///
/// Evidence (compiler corpus, fit records, the kernel gradients' kOutput fusions, cycles after the MXU launch
/// over this block count): resnet_block.023 (bf16, x[18,14,14,512], 1x1 gradients [512,256] over K 3,528 = 224
/// blocks, [512,1024] and [256,1024] over K 882 = 224 and 112 blocks): 263, 217 and 128 blocks' worth on v4 (135
/// cycles each: 37,135, 30,938 and 18,861 cycles, where the op model's plan gave 10,677, 11,838 and 7,121), 233,
/// 262, 145 on v5e, 211, 246, 112 on v5p (two TensorCores), 0.6-0.9x on v6e and tpu7x (256-wide blocks); so too
/// resnet_block.021, .007 and .009 (f32) within 0.8-1.3x. Held out: resnet_block.028 (v4 0.71x before, 0.78x
/// after). Some fall short of it (resnet_block.010's [96,384], 0.24-0.36x): the floor leaves them to the plan.
fn one_tap_transpose_cycles(node: &Node<'_>, product: &MxuWork, chip: &ChipModel) -> f64 {
    let taps = node
        .ins
        .attr("dim_labels")
        .and_then(|l| l.split_once("->"))
        .map(|(_, out)| {
            let dims = dims_of(&node.ins.shape);
            out.char_indices()
                .filter(|(_, c)| c.is_ascii_digit())
                .map(|(i, _)| dims.get(i).copied().unwrap_or(1))
                .product::<u64>()
        });
    if taps != Some(1) {
        return 0.0;
    }
    let w = chip.mxu.width.max(1);
    let blocks = product.m.div_ceil(w) * product.k.div_ceil(w) * product.n.div_ceil(w);
    blocks as f64 * chip.params.mxu_weight_transpose_cycles / f64::from(chip.device_tensorcores.max(1))
}

/// The spatial positions of convolution `node`'s window (its right operand's spatial size) when they outnumber
/// its output's, as in a kernel gradient; `None` otherwise, or when its `dim_labels` do not read.
fn gradient_window(g: &Graph<'_>, node: &Node<'_>) -> Option<u64> {
    let (_, rest) = node.ins.attr("dim_labels")?.split_once('_')?;
    let (rhs_l, out_l) = rest.split_once("->")?;
    let dy = *node.operands.get(1)?;
    let spatial = |labels: &str, dims: &[u64]| -> u64 {
        labels
            .char_indices()
            .filter(|(_, c)| c.is_ascii_digit())
            .map(|(i, _)| dims.get(i).copied().unwrap_or(1))
            .fold(1u64, |a, d| a.saturating_mul(d))
    };
    let window = spatial(rhs_l, &dims_of(&g.nodes[dy].ins.shape));
    (window > spatial(out_l, &dims_of(&node.ins.shape))).then_some(window)
}

/// The windows the compiler builds for a kernel gradient over a small batch
/// ([`small_batch_gradient_windows`]), per column of the kernel: a fusion materialising the column's shifted
/// stride-phase window of the input (pad, iota mask, select: a pass over an array of the input's size), then a
/// dynamic-update-slice writing it into the stacked array, a pass over the column's stacked window
/// ([`stacked_column_elements`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct GradientWindows {
    /// The gradient's input operand (the forward activation).
    pub input: usize,
    /// Columns of the kernel (the result's last spatial dimension): one window and one stacking pass each.
    pub columns: u64,
    /// Padded elements of one column's stacked window.
    pub stacked_elements: u64,
    /// Logical elements of one column's stacked window.
    pub stacked_logical: u64,
}

/// Convolution `node` when it is a kernel gradient ([`kernel_gradient`]'s condition) over a batch below one
/// sublane tile (the left operand's `f` dimension, the forward batch, at most 7) that the compiler windows: of a
/// strided convolution (a window dilation above 1: the forward stride), or of a unit-stride one whose kernel has
/// several columns over images at least 8 wide (the width from which the compiler windows a small-batch forward
/// convolution, `relayout::small_batch_conv`): its windows ([`GradientWindows`]).
///
/// Evidence for the unit stride (compiler corpus, optimized modules, fit records): conv.004 (bf16 x[7,14,14,76],
/// depthwise 3x3, every chip): three window fusions and copies `bf16[14,56,2,76,1]` (`[H, 8 N, Wp / 8, C]`,
/// 4,753, 4,753 and 3,595 cycles on v5e) after a copy and two slice fusions of the input (3,595, 3,690, 3,690):
/// 24,000 of the program's 67,294 cycles, which tpusim lacked (0.42-0.73x on every chip). None for 7-wide images
/// (conv.015: N 2, 3x3, only the gradient's fusion) nor for one-column (1x1) kernels (resnet_block.007's two 1x1
/// gradients over N 3, 19 and 10 wide: only their fusions).
fn windowed_small_batch_gradient(g: &Graph<'_>, node: &Node<'_>) -> Option<GradientWindows> {
    if node.class != OpClass::Convolution {
        return None;
    }
    gradient_window(g, node)?;
    let labels = node.ins.attr("dim_labels")?;
    let (lhs_l, rest) = labels.split_once('_')?;
    let (_, out_l) = rest.split_once("->")?;
    let x = *node.operands.first()?;
    let xd = dims_of(&g.nodes[x].ins.shape);
    let od = dims_of(&node.ins.shape);
    let stride = node.ins.window_field("rhs_dilate").iter().copied().max().unwrap_or(1);
    let dim = |label: char| lhs_l.find(label).and_then(|i| xd.get(i)).copied();
    let batch = dim('f')?;
    let width = dim('1').unwrap_or(1);
    // The kernel's width: the result's last spatial dimension.
    let last_spatial = out_l.char_indices().rfind(|(_, c)| c.is_ascii_digit());
    let columns = last_spatial.and_then(|(i, _)| od.get(i)).copied().unwrap_or(1).max(1);
    if batch > MAX_UNTILED_BATCH || (stride <= 1 && (width < 8 || columns < 2)) {
        return None;
    }
    let (rows, channels) = (dim('0').unwrap_or(1), dim('b')?);
    let (stacked_elements, stacked_logical) =
        stacked_column_elements(rows, batch, width, columns, u64::try_from(stride).ok()?, channels);
    Some(GradientWindows {
        input: x,
        columns,
        stacked_elements,
        stacked_logical,
    })
}

/// Padded and logical elements of one kernel column's stacked window of a small-batch kernel gradient:
/// `[H, 8 N, Wp / 8, C]`, the input's width with the kernel's halo padded to whole stride phases of 8 rows, `Wp =
/// round_up(W + kw - 1, 8 stride)`, split into 8 rows (with the batch) of `Wp / 8` columns. The lanes hold the
/// product's contracted rows (`8 N`) or its result rows (the channels `C`), whichever pads less in 8 x 128 tiles
/// (ties to the channels): a convolution over a handful of channels stacks its windows batch-minor, 16 of 128
/// lanes used, so each column's window is several times the input.
///
/// Evidence (compiler corpus, optimized modules, v5e, fit records): conv.014 (bf16 x[2,224,224,6], 7x7 stride
/// 2): `bf16[224,16,30,6,7]{1,3,4,2,0:T(8,128)}` (8 N = 16 minor, 6 channels in 8 sublanes), seven
/// dynamic-update-slice fusions of 97,383 cycles each, 14.5 per 1,024-element block of a column's 6,720 (tpusim
/// timed each pass as one of the input, 16,000 cycles: 0.21-0.41x the compiler on every chip); conv.002 (bf16
/// x[1,65,65,76], 7x7 stride 2): `bf16[65,8,10,76,7]{3,1,4,2,0}` (channels minor), 11,559-11,846 cycles over 650
/// blocks; conv.029 (x[2,65,65,301], 3x3 stride 2): `bf16[65,16,10,301,1]{3,1,4,2,0}` (channels minor), 59,208 and
/// 60,881 over 3,900 blocks.
pub(super) fn stacked_column_elements(
    rows: u64,
    batch: u64,
    width: u64,
    kernel_width: u64,
    stride: u64,
    channels: u64,
) -> (u64, u64) {
    let up = |x: u64, m: u64| x.div_ceil(m).saturating_mul(m);
    let phase_rows = batch.saturating_mul(8);
    let padded_width = up(
        width.saturating_add(kernel_width.max(1) - 1),
        stride.max(1).saturating_mul(8),
    );
    let columns = padded_width / 8;
    let channel_minor = up(channels, 128).saturating_mul(up(phase_rows, 8));
    let batch_minor = up(phase_rows, 128).saturating_mul(up(channels, 8));
    let per_row = rows.saturating_mul(columns);
    (
        per_row.saturating_mul(channel_minor.min(batch_minor)),
        per_row.saturating_mul(phase_rows.saturating_mul(channels)),
    )
}

/// Whether convolution `node` is a kernel gradient over a small batch, which
/// [`small_batch_gradient_windows`] windows (so the small-batch input copies of `relayout` do not apply to it).
pub(super) fn is_windowed_small_batch_gradient(g: &Graph<'_>, node: &Node<'_>) -> bool {
    windowed_small_batch_gradient(g, node).is_some()
}

/// The input windows the compiler builds for a kernel gradient over a batch below one sublane tile
/// ([`windowed_small_batch_gradient`]), for each such convolution of MXU kernel `k` ([`GradientWindows`]): per column of the kernel, a
/// fusion materialising that column's shifted stride-phase window of the input and a dynamic-update-slice
/// stacking it.
///
/// Evidence (compiler corpus, optimized modules, fit records): conv.029 on v5e (f32 x[2,65,65,301], 3x3 stride 2):
/// besides the two convolution fusions (41,682 cycles) the input goes through a pad fusion into stride phases
/// (`bf16[65,2,80,301]`, 215,917 cycles), copies and slice fusions of the phases (`bf16[65,2,8,10,301]`, 88,341
/// each) and two iota-mask fusions of `bf16[65,16,10,301,1]` (60,881, 59,208): about 800,000 cycles, 2.4 of
/// tpusim's input relayouts (86,701) per kernel column; conv.014 (bf16 N 2, 7x7 stride 2, 6 channels): seven
/// `constant_dynamic-update-slice_fusion`s of `bf16[224,16,30,6,7]` (97,383 each), one per kernel column, each
/// after a shifted slice and copy of the input. Confirmed on held-out conv.002 (bf16 N 1, 7x7 stride 2): seven
/// dynamic-update-slice fusions of `bf16[65,8,10,76,7]` and seven pad-and-mask fusions, 11,559-11,846 cycles
/// each, against 14,394 for tpusim's input relayout. Absent with a batch of 8 or more (resnet_block.021, N 19;
/// .027, N 45: only the convolutions and the batch-norm passes).
pub(super) fn small_batch_gradient_windows(g: &Graph<'_>, members: &[usize]) -> Vec<GradientWindows> {
    members
        .iter()
        .filter_map(|&m| windowed_small_batch_gradient(g, &g.nodes[m]))
        .collect()
}
