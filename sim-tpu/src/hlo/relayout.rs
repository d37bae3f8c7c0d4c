//! The relayout copies the compiler adds around a convolution (its input and its result leaving the program)
//! and around a gather from a table that fits on chip.
//!
//! The compiler writes a convolution's result with the batch dimension inside the spatial ones (layout
//! `{3,0,2,1}` for `b01f`, or the output reshaped to `[H, N*W/k, k, C]`), the order its windowed MXU passes
//! produce; an entry output must be in the entry's row-major layout, so a `copy` kernel moves it there.
//! Evidence (compiler corpus, `tools/corpus/compare_kernels.py`): 54 of the 79 conv and ResNet-block records
//! (all chips) have a copy of the output's shape into `{3,2,1,0}` (e.g. conv.011 on v6e: a 5,388-cycle
//! convolution fusion, then a 6,591-cycle copy of f32[9,17,17,145]); the others end in a stride-2 slice or a
//! small-image layout the copy is folded into. A copy that keeps the channel in the lanes moves rows only, timed
//! as the op model's row relayout; one whose array the compiler lays out with another dimension in the lanes is
//! a transpose ([`conv_copy_class`]). Loop bodies choose their own layouts, so only the entry graph pays it.

use super::bytes::{dims_of, Sizer, MAX_UNTILED_BATCH};
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;
use super::{HloError, KernelCost};
use crate::tensorcore::cost::time_kernel;
use crate::tensorcore::lower::{Kernel, VpuClass, Work, VREG_ELEMENTS};
use crate::tensorcore::ChipModel;
use crate::tiling::tpu_layout;
use sim_core::layout::Shape;

/// The copies the compiler adds before and after kernel `k` of the entry graph (convolution inputs and results,
/// their windowing, gathers' tables and rows).
pub(super) fn copies_around(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<(Vec<KernelCost>, Vec<KernelCost>), HloError> {
    let (table, rows) = gather_copies(g, k, sizer, chip)?;
    let (mut before, mut after) = (Vec::new(), Vec::new());
    if let Some(w) = small_batch_conv(g, k) {
        let (input, conv) = (w.input, w.conv);
        let in_class = conv_copy_class(g, conv, input, sizer)?;
        let out_class = conv_copy_class(g, conv, conv, sizer)?;
        if w.relayouted {
            before.push(relayout_kernel(g, input, sizer, chip, "relayout", in_class)?);
        }
        if w.padded {
            before.push(relayout_kernel(g, input, sizer, chip, "pad", in_class)?);
        }
        let blocks = written_blocks(
            sizer.shape(&g.nodes[conv].ins.shape)?.padded_elements,
            windowed_tile_rows(&g.nodes[conv]),
        );
        after.push(copy_kernel(g, conv, sizer, chip, "crop", out_class, blocks)?);
        if w.relayouted && w.padded {
            after.push(relayout_kernel(g, conv, sizer, chip, "slice", out_class)?);
        }
    }
    if let Some(input) = lane_moved_activation(g, k, sizer)? {
        before.push(relayout_kernel(g, input, sizer, chip, "relayout", VpuClass::Transpose)?);
    }
    before.extend(table);
    if k.kind == KernelKind::Mxu {
        for w in super::conv_backward::small_batch_gradient_windows(g, &k.members) {
            for _ in 0..w.columns {
                before.push(relayout_kernel(g, w.input, sizer, chip, "window", VpuClass::Transpose)?);
                before.push(stack_kernel(g, &w, chip));
            }
        }
    }
    after.extend(conv_output_relayout(g, k, sizer, chip)?);
    after.extend(rows);
    Ok((before, after))
}

/// Peak bytes of the HBM temporaries of the copies around kernel `k` of the entry graph ([`copies_around`]'s
/// convolution copies), on a chip whose MXU results cannot stay on chip (a megacore chip without CMEM: v5p): the
/// relayouted and the padded input, the windowed result and its crop, each read by the next step, so two
/// neighbours of that chain are live at once; a convolution result copied out to the entry's layout is a
/// temporary of its own until the copy. Evidence (compiler corpus, `memory_analysis` temp bytes on v5p, where
/// tpusim counted none): conv.011 (f32[9,17,17,145], copied out) 4,751,360 B, the result's 3,760,128 padded bytes
/// in tpusim's layout (the compiler's batch-inside layout pads 9 to 16 rows: 4,734,976); conv.018 (bf16 N 5,
/// input copied, padded, result cropped and copied) 8,044,544 B, two 4,014,080-byte arrays live at once.
pub(super) fn copy_temporaries(g: &Graph<'_>, k: &Group, sizer: &Sizer) -> Result<u64, HloError> {
    let mut chain = Vec::new();
    if let Some(w) = small_batch_conv(g, k) {
        let x = sizer.shape(&g.nodes[w.input].ins.shape)?.padded_bytes;
        let y = sizer.shape(&g.nodes[w.conv].ins.shape)?.padded_bytes;
        if w.relayouted {
            chain.push(x);
        }
        if w.padded {
            chain.push(x);
        }
        chain.extend([y, y]);
    }
    if let Some(conv) = copied_out_conv(g, k, sizer)? {
        let y = sizer.shape(&g.nodes[conv].ins.shape)?.padded_bytes;
        if chain.is_empty() {
            chain.push(y);
        }
    }
    let pairs = chain.windows(2).map(|w| w[0].saturating_add(w[1])).max();
    Ok(pairs.unwrap_or_else(|| chain.first().copied().unwrap_or(0)))
}

/// The spatial convolution of MXU kernel `k` whose result leaves the entry through a relayout copy
/// ([`conv_output_relayout`]'s condition).
pub(super) fn copied_out_conv(g: &Graph<'_>, k: &Group, sizer: &Sizer) -> Result<Option<usize>, HloError> {
    if k.kind != KernelKind::Mxu {
        return Ok(None);
    }
    let Some(conv) = k.members.iter().copied().find(|&m| {
        let n = &g.nodes[m];
        n.class == OpClass::Convolution && rank(&n.ins.shape) >= 3
    }) else {
        return Ok(None);
    };
    let entry_outputs = g.outputs();
    let Some(out) = k
        .outputs
        .iter()
        .copied()
        .find(|o| entry_outputs.contains(o) && rank(&g.nodes[*o].ins.shape) >= 3)
    else {
        return Ok(None);
    };
    let kept = batch_fills_sublanes(g, conv, out)
        || (!windowed_batch(g, conv) && entry_layout_is_batch_inside(g, conv, out, sizer)?);
    Ok((!kept).then_some(conv))
}

/// Whether convolution `conv` runs over a batch below one sublane tile (at most 7) of images at least 8 wide, which
/// the compiler windows ([`small_batch_conv`], whatever produced the input): its result is `[H, 8 N, k, C]`.
fn windowed_batch(g: &Graph<'_>, conv: usize) -> bool {
    let n = &g.nodes[conv];
    let (Some(lhs), Some(&x)) = (
        n.ins.attr("dim_labels").and_then(|l| l.split('_').next()),
        n.operands.first(),
    ) else {
        return false;
    };
    let dims = dims_of(&g.nodes[x].ins.shape);
    let dim = |c: char| lhs.find(c).and_then(|i| dims.get(i)).copied();
    dim('b').is_some_and(|b| b <= MAX_UNTILED_BATCH) && dim('1').is_some_and(|w| w >= 8)
}

/// Whether the compiler's entry layout for output `out` of convolution `conv`'s kernel (of the convolution's
/// shape) is the convolution's own: the channel in the lanes and the batch in the sublanes (`{3,0,2,1}` for
/// `b01f`), which [`crate::tiling::tpu_layout`] picks when the batch pads fewer rows than the width. Unless the
/// compiler windows the convolution ([`windowed_batch`]: its result is `[H, 8 N, k, C]`, copied out all the same),
/// the result then leaves the program as the kernel writes it, with no copy. Evidence
/// (compiler corpus, the entry layouts of the optimized modules, fit records, no copy on any chip): conv.007
/// (bf16[29,33,33,64]: 29 rows pad to 32, 33 to 48), where tpusim's copy (127,490 cycles on v4, 15,049 on v6e)
/// put it at 1.36-1.68x the compiler; resnet_block.001 (N 58, 10 wide), .011 (N 52, 14 wide), .026 (f32 N 4, 7
/// wide, `T(4,128)`), conv.033 (N 53, 7 wide); held out, conv.012 (f32 N 45, 7 wide: 1.0-1.78x before). The
/// windowed ones copy: conv.009 (N 2, `copy.3` into `{3,0,2,1:T(2,128)}`, 63,960 cycles on v5e),
/// resnet_block.019 (N 2, a copy fused with the epilogue).
fn entry_layout_is_batch_inside(g: &Graph<'_>, conv: usize, out: usize, sizer: &Sizer) -> Result<bool, HloError> {
    let Some(labels) = g.nodes[conv].ins.attr("dim_labels").and_then(|l| l.split_once("->")) else {
        return Ok(false);
    };
    let (Some(f), Some(b)) = (labels.1.find('f'), labels.1.find('b')) else {
        return Ok(false);
    };
    if dims_of(&g.nodes[out].ins.shape) != dims_of(&g.nodes[conv].ins.shape) {
        return Ok(false);
    }
    let order = entry_layout(&g.nodes[out].ins.shape, sizer, |a| {
        a.layout
            .as_ref()
            .map(|l| l.minor_to_major.iter().take(2).copied().collect::<Vec<_>>())
    })?;
    Ok(order.is_some_and(|o| o.len() == 2 && o[0] == f as i64 && o[1] == b as i64))
}

/// The relayout kernel following MXU kernel `k` of the entry graph `g`, when `k` computes a convolution with
/// spatial dimensions and writes an entry output of rank 3 or more; `None` otherwise.
pub(super) fn conv_output_relayout(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<Option<KernelCost>, HloError> {
    let Some(conv) = copied_out_conv(g, k, sizer)? else {
        return Ok(None);
    };
    let entry_outputs = g.outputs();
    let Some(&out) = k
        .outputs
        .iter()
        .find(|o| entry_outputs.contains(o) && rank(&g.nodes[**o].ins.shape) >= 3)
    else {
        return Ok(None);
    };
    let class = conv_copy_class(g, conv, out, sizer)?;
    let s = sizer.shape(&g.nodes[out].ins.shape)?;
    let blocks = written_blocks(s.padded_elements, entry_tile_rows(&g.nodes[out].ins.shape, sizer)?);
    copy_kernel(g, out, sizer, chip, "relayout", class, blocks).map(Some)
}

/// Vector blocks of work of a copy writing `padded_elements` elements into tiles of `rows` rows of 128 lanes
/// (`None`: whole 8-row tiles). A tile of fewer than 8 rows (the compiler's entry layout for a batch of 1-4 in the
/// sublanes, `T(2,128)` for 2 images) is stored as a vreg of its own: the read side costs its elements
/// (`padded_elements / 1024` blocks), the written side a whole block per tile, and the copy the mean of the two.
/// Evidence (compiler corpus, fit records of the conv and ResNet-block families, copies' cycles per 1,024 padded
/// elements, median per chip): into `T(2,128)` 61.0 on v4, 46.2 on v5e, 22.0 on v5p, 24.2 on v6e, 14.2 on tpu7x,
/// into `T(4,128)` 36.0, 22.6, 13.2, 14.9, 10.8, against 22.4, 15.0, 8.0, 9.1, 7.1 into 8-row tiles: 2.0-3.1x
/// and 1.5-1.65x, where this rule gives 2.5x and 1.5x. The entry output copies of resnet_block.019 (v5e,
/// bf16[2,14,14,2048] into `{3,0,2,1:T(2,128)}`, 80,824 cycles), resnet_block.014 (72,373) and conv.009 (63,960)
/// were 3.4-7x tpusim's row relayout of their elements. Reading such tiles costs no more: the input copy of
/// resnet_block.014 out of `T(2,128)` is 47,028 cycles, 1.15x the row relayout of its elements.
fn written_blocks(padded_elements: u64, rows: Option<u64>) -> f64 {
    let blocks = padded_elements as f64 / VREG_ELEMENTS as f64;
    match rows {
        Some(r) if r > 0 && r < 8 => {
            let tiles = padded_elements as f64 / (r * 128) as f64;
            (blocks + tiles) / 2.0
        }
        _ => blocks,
    }
}

/// The rows of the tiles the compiler writes a small-batch convolution's windowed result into when it crops it
/// ([`small_batch_conv`]), or `None` for whole 8-row tiles. The windowed result is `[H, 8 N, k, C]`: the output
/// width padded to whole tiles (its window's halo included), `Wp = round_up(W + kw - 1, 8)`, split into 8 rows of
/// `k = Wp / 8` columns; the crop copies it row-major, `{3,2,1,0}`, in tiles of `k` rows rounded up to a power of
/// two when `k` is at most 4, and lays a wider `k` (5, 7) out another way in 8-row tiles.
/// Evidence (compiler corpus, v5e, fit and held-out records, every such copy of the 28 conv and ResNet-block
/// programs): k = 4 into `T(4,128)`: conv.016 (bf16[28,24,4,192], 28 wide, 3x3), .019, .023, .024, .026;
/// k = 3 into `T(4,128)`: resnet_block.007 (bf16[19,24,3,256]), .024; k = 2 into `T(2,128)`: conv.025,
/// resnet_block.007 (10 wide after stride 2), .009, .013, .019; k = 5 or 7 into `{3,0,2,1:T(8,128)}`: conv.005,
/// .009, .018, .032, resnet_block.014 (56 wide).
fn windowed_tile_rows(conv: &super::graph::Node<'_>) -> Option<u64> {
    let labels = conv.ins.attr("dim_labels")?.split_once("->")?.1;
    let Shape::Array(a) = &conv.ins.shape else { return None };
    let width = a.dims.get(labels.find('1')?)?.upper_bound()?;
    let kw = conv.ins.window_field("size").last().copied().unwrap_or(1).max(1);
    let k = u64::try_from((width + kw - 1).max(1)).ok()?.div_ceil(8);
    (k <= 4).then(|| k.next_power_of_two())
}

/// The rows of the first tile of an entry array's layout (its own tiled layout, or the compiler's entry layout
/// for it, [`crate::tiling::tpu_layout`]); `None` for arrays of rank below 2.
fn entry_tile_rows(s: &Shape, sizer: &Sizer) -> Result<Option<u64>, HloError> {
    let Shape::Array(a) = s else { return Ok(None) };
    if a.dims.len() < 2 {
        return Ok(None);
    }
    entry_layout(s, sizer, |a| {
        a.layout
            .as_ref()
            .and_then(|l| l.tiles.first())
            .filter(|t| t.dims.len() == 2)
            .and_then(|t| u64::try_from(t.dims[0]).ok())
    })
}

/// `read` of an array as the compiler lays it out: its own tiled layout, or the compiler's entry layout for it
/// ([`crate::tiling::tpu_layout`]); `None` for a tuple.
pub(super) fn entry_layout<T>(
    s: &Shape,
    sizer: &Sizer,
    read: impl Fn(&sim_core::layout::ArrayShape) -> Option<T>,
) -> Result<Option<T>, HloError> {
    let Shape::Array(a) = s else { return Ok(None) };
    if a.layout.as_ref().is_some_and(|l| !l.tiles.is_empty()) {
        return Ok(read(a));
    }
    let dims: Vec<i64> = dims_of(s).iter().map(|&d| d as i64).collect();
    match tpu_layout(a.element_type, &dims, sizer.chip()).map_err(|e| HloError::Unsupported(e.to_string()))? {
        Shape::Array(laid) => Ok(read(&laid)),
        _ => Ok(None),
    }
}

/// Whether entry output `out` of convolution `conv`'s kernel (of the convolution's shape) has a batch that is a
/// multiple of 8, the rows of a tile: the compiler then returns the result in the convolution's own layout (batch
/// inside the spatial dimensions, `{3,0,2,1}` for `b01f`), with no copy. Evidence (compiler corpus, the entry
/// layouts of the optimized modules): every forward conv and ResNet-block program with such a batch (conv.006,
/// N 32; conv.021, N 56; resnet_block.015, N 40) returns `{3,0,2,1}` on all five chips, no copy (conv.021 on v6e:
/// the tpusim copy was 623,329 cycles of a 640,742-cycle program). Of the 203 forward records whose batch is not
/// a multiple of 8, 138 copy into `{3,2,1,0}`; the other 65 (e.g. conv.009, N 2) keep the convolution's layout by a
/// choice not matched here.
fn batch_fills_sublanes(g: &Graph<'_>, conv: usize, out: usize) -> bool {
    let c = &g.nodes[conv];
    let Some(b) = c
        .ins
        .attr("dim_labels")
        .and_then(|l| l.split_once("->").map(|(_, o)| o.to_string()))
        .and_then(|o| o.find('b'))
    else {
        return false;
    };
    let (Shape::Array(ca), Shape::Array(oa)) = (&c.ins.shape, &g.nodes[out].ins.shape) else {
        return false;
    };
    let batch = |a: &sim_core::layout::ArrayShape| a.dims.get(b).and_then(|d| d.upper_bound());
    ca.dims.len() == oa.dims.len() && batch(ca) == batch(oa) && batch(oa).is_some_and(|n| n > 0 && n % 8 == 0)
}

/// The relayout copy the compiler adds before a convolution reading an activation straight from an entry
/// parameter, when the batch is below one sublane tile (N <= 7) and the images are at least 8 wide: it moves the
/// batch inside the spatial dimensions (`{3,2,0,1}`). A batch of 8 or more fills the tile's rows itself and is
/// read in place; a 1x1 window with a stride dividing the width is read through a strided slice instead (but
/// padded and cropped, below).
/// Evidence (compiler corpus, conv family, 28 programs on every chip): the copy is there for N 1-7 and W >= 14 in
/// bf16 and f32 (conv.000, .004, .005 f32, .009, .013, .016, .018, .020, .024, .026, .031, .032; conv.026 on v5e:
/// bf16[6,28,28,69] into `{3,2,0,1}`, 10,715 cycles) and absent for N 9-56 (conv.006, .007, .011, .012, .021,
/// .028, .033, .035: one convolution fusion, e.g. conv.033 on v6e, N 53, 24,634 cycles in all, where the copy
/// would cost 199,000), for 7-wide images (conv.008, .015, .034) and for 1x1 stride-2 windows over an even width
/// (conv.023, .025). Not matched: conv.010 (N 25, 112 wide, copied) and conv.019 (N 7 depthwise, not copied).
///
/// The same small-batch windowing pads the relayouted input to the window (a `pad` kernel, or a kLoop fusion of
/// pad and an iota mask, over the input) and writes the result in the windowed layout, which a further copy and a
/// kLoop `slice` fusion crop back to the output's width (one more pass over the result). Evidence: conv.013 on
/// v6e (bf16 N 2, 224 wide, 3x3): input copy 146,280 cycles, pad 279,125 and its mask 96,215, convolution
/// 304,820, windowed-result copy 450,080 and crop 315,055, output copy 857,920; conv.009 (1x1 stride 2) pad
/// 4,602, windowed-result copy 12,368 and crop 11,603; conv.005 (f32 N 7) pad 13,742, crop 3,846.
///
/// The crop of a relayouted and padded input's result is two passes: the windowed result's copy, then a kLoop
/// `slice` fusion back to the output's width (the `crop` and `slice` kernels). Evidence (fit records, v5e): conv.024
/// (bf16 N 5, 28 wide, 3x3) copy of bf16[28,40,4,317] 78,067 cycles and slice fusion to bf16[5,28,28,317] 25,670;
/// conv.016 (N 3, 28 wide) 11,051 for its slice; conv.013 (N 2, 224 wide) 661,835; conv.005 (f32 N 7) 14,135; no
/// slice where no pad was made (conv.018: the copy alone) nor after a strided 1x1 window's single crop (conv.023,
/// .025).
///
/// A 1x1 window whose stride divides the width reads its input through a strided slice, not a relayout copy, but
/// is padded and cropped all the same. Evidence: conv.023 on v5e (bf16 N 1, 56 wide, stride 2): pad 13,635
/// cycles, crop 5,827; conv.025 on v5e (N 1, 28 wide): pad 3,299, crop 3,320; no input copy in either.
fn small_batch_conv(g: &Graph<'_>, k: &Group) -> Option<SmallBatchConv> {
    if k.kind != KernelKind::Mxu {
        return None;
    }
    for &m in &k.members {
        let n = &g.nodes[m];
        if n.class != OpClass::Convolution
            || rank(&n.ins.shape) < 4
            || super::conv_backward::is_windowed_small_batch_gradient(g, n)
        {
            continue;
        }
        let Some(&input) = n.operands.first() else { continue };
        let x = &g.nodes[input];
        let Shape::Array(a) = &x.ins.shape else { continue };
        let dims: Vec<i64> = a.dims.iter().map(|d| d.upper_bound().unwrap_or(0)).collect();
        let Some(lhs) = n
            .ins
            .attr("dim_labels")
            .and_then(|l| l.split('_').next().map(str::to_string))
        else {
            continue;
        };
        let batch = lhs.find('b').and_then(|i| dims.get(i)).copied().unwrap_or(1);
        let width = lhs.find('1').and_then(|i| dims.get(i)).copied().unwrap_or(1);
        if x.ins.opcode == "parameter" && batch <= MAX_UNTILED_BATCH as i64 && width >= 8 {
            let relayouted = !strided_pointwise(n, width);
            return Some(SmallBatchConv {
                input,
                conv: m,
                relayouted,
                // One padded copy serves every convolution of the input (a block's shortcut and first layer).
                padded: g.users[input].iter().any(|&u| {
                    let c = &g.nodes[u];
                    c.class == OpClass::Convolution && c.operands.first() == Some(&input) && needs_pad(c, width)
                }),
            });
        }
    }
    None
}

/// A small-batch convolution windowed by the compiler ([`small_batch_conv`]).
struct SmallBatchConv {
    /// The input parameter.
    input: usize,
    /// The convolution.
    conv: usize,
    /// Whether the input is copied with the batch inside the spatial dimensions before it is padded.
    relayouted: bool,
    /// Whether the input is padded to the window ([`needs_pad`]).
    padded: bool,
}

/// Whether the compiler pads a small-batch convolution's input (width `width`) to its window: unless the window
/// is unpadded with a unit stride and the width fills whole sublane tiles of 8 rows, when the windowed layout is
/// the input's own. Evidence (compiler corpus, fit records, small-batch convolutions reading an entry parameter):
/// no `pad` kernel for conv.018 (bf16 N 5, 56 wide, 1x1: input copy 16,451 cycles on v6e, convolution, result copy
/// 12,163 and output copy 16,451) nor conv.031 (N 1, 224 wide, 1x1); a pad for every other one, the 1x1 windows
/// included when the width is not a multiple of 8 (conv.026, 28 wide: `pad` to bf16[28,6,32,69], 5,644 cycles;
/// resnet_block.019, 14 wide, to 16; resnet_block.024, 19 wide, to 24) or the window strided (conv.009, .023) or
/// padded (every 3x3 and 7x7 window: conv.000, .005, .013, .016, .020, .024, .032). An input that several
/// convolutions read is padded once if any of them needs it: resnet_block.014 (bf16 N 2, 56 wide) pads its input to
/// bf16[56,2,64,512] for the 1x1 stride-2 shortcut, which the unstrided 1x1 first layer reads too.
fn needs_pad(n: &super::graph::Node<'_>, width: i64) -> bool {
    let padding = n.ins.attr("window").is_some_and(|w| {
        w.trim_matches(|c| c == '{' || c == '}')
            .split_whitespace()
            .filter_map(|f| f.strip_prefix("pad="))
            .any(|p| p.split(['_', 'x']).any(|v| v != "0"))
    });
    let strided = n.ins.window_field("stride").iter().any(|&v| v > 1);
    padding || strided || width % 8 != 0
}

/// The entry parameter a convolution of MXU kernel `k` reads as its activation, when its batch fills the
/// sublane tiles (no small-batch copies) but the compiler's entry layout for it puts a dimension other than the
/// channel in the lanes (the one padding least, [`tpu_minor_dim`]): the convolution windows a channel-minor
/// input, so a copy moves the channel into the lanes first, a transpose. Evidence (compiler corpus, fit record
/// conv.010, bf16[25,112,112,64], 1x1 stride 2): the entry layout is `{2,3,1,0}` (W in the lanes: 112 pads less
/// than 64 channels), and a copy into `{3,0,2,1}` takes 799,120 cycles on v6e before a 296,814-cycle convolution;
/// no copy for the channel-minor inputs of conv.006 (325 channels), .021, .028 and every ResNet block.
fn lane_moved_activation(g: &Graph<'_>, k: &Group, sizer: &Sizer) -> Result<Option<usize>, HloError> {
    if k.kind != KernelKind::Mxu || small_batch_conv(g, k).is_some() {
        return Ok(None);
    }
    for &m in &k.members {
        let n = &g.nodes[m];
        let Some(&input) = n.operands.first() else { continue };
        if n.class != OpClass::Convolution
            || rank(&n.ins.shape) < 4
            || g.nodes[input].ins.opcode != "parameter"
            || super::conv_backward::is_windowed_small_batch_gradient(g, n)
        {
            continue;
        }
        let Some(labels) = side_labels(g, m, input) else {
            continue;
        };
        if !labels.chars().any(|c| c.is_ascii_digit()) || !labels.starts_with('b') {
            continue;
        }
        let minor = tpu_minor_dim(&g.nodes[input].ins.shape, sizer)?;
        if minor.and_then(|i| labels.chars().nth(i)).is_some_and(|c| c != 'f') {
            return Ok(Some(input));
        }
    }
    Ok(None)
}

/// The copies around a gather from a table that fits on chip: the compiler first copies the whole table into
/// VMEM (CMEM on v4) and gathers there, writing the rows transposed (`{0,1}`), then copies them to row-major.
/// Evidence (compiler corpus, embedding family, every chip): embedding.001 (bf16[5754,100] table, 256 ids) on
/// v5e: a copy of the table into S(1), 8,780 cycles, and a copy of the bf16[256,100]{0,1} rows, 2,116 cycles,
/// around a gather that carries no estimate; so too embedding.005 and .012. Only a table narrower than one
/// 128-lane row is copied: the compiler gives it a column-major entry layout (`{0,1}`) that a row gather cannot
/// read. A wider table keeps its row-major entry layout and is gathered where it is, at most prefetched into
/// VMEM by an asynchronous `copy-start` that no kernel waits on, and its rows come out row-major: no copy kernel
/// on either side. Evidence (compiler corpus, every chip): embedding.000, .003, .004, .016, .018 (256-wide
/// tables) and .014, .019 (128-wide) have no copy of the table or the rows, where .001, .002, .005-.013 and .015
/// (16 to 100 wide) have both; the reference sample's softmax_xent.n512_v32768_fwdbwd_f32 gathers each row's
/// label from its f32[512,32768] logits parameter with no copy on v4, v5e or v6e (tpusim's 334,756-cycle table
/// copy made it 1.53 times the compiler's on v6e). Returns (before, after).
pub(super) fn gather_copies(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<(Option<KernelCost>, Option<KernelCost>), HloError> {
    let anchor = &g.nodes[k.anchor];
    if anchor.ins.opcode != "gather" {
        return Ok((None, None));
    }
    let Some(&table) = anchor.operands.first() else {
        return Ok((None, None));
    };
    let on_chip = chip.prefetch_budget_bytes.max(chip.cmem_bytes);
    let bytes = sizer.shape(&g.nodes[table].ins.shape)?.padded_bytes;
    let row_major = dims_of(&g.nodes[table].ins.shape)
        .last()
        .is_none_or(|&minor| minor >= GATHER_LANES);
    if g.nodes[table].ins.opcode != "parameter" || bytes > on_chip || row_major {
        return Ok((None, None));
    }
    Ok((
        Some(relayout_kernel(g, table, sizer, chip, "relayout", VpuClass::Transpose)?),
        Some(relayout_kernel(
            g,
            k.anchor,
            sizer,
            chip,
            "relayout",
            VpuClass::Transpose,
        )?),
    ))
}

/// Lanes of a vector register row: a gather table at least this wide keeps its row-major entry layout.
const GATHER_LANES: u64 = 128;

/// A copy of node `v`'s array into another layout, timed as the op model's vector `class` (a transpose, or a
/// row relayout when the lanes stay: [`conv_copy_class`]) of as many elements; named `<v>.<what>`.
fn relayout_kernel(
    g: &Graph<'_>,
    v: usize,
    sizer: &Sizer,
    chip: &ChipModel,
    what: &str,
    class: VpuClass,
) -> Result<KernelCost, HloError> {
    let blocks = sizer.shape(&g.nodes[v].ins.shape)?.padded_elements as f64 / VREG_ELEMENTS as f64;
    copy_kernel(g, v, sizer, chip, what, class, blocks)
}

/// The dynamic-update-slice writing one kernel column's stride-phase window of a small-batch kernel
/// gradient into the stacked array ([`super::conv_backward::GradientWindows`]): a copy of the column's stacked
/// window, read and written, timed as the windows' copies (a transpose) over its padded blocks.
fn stack_kernel(g: &Graph<'_>, w: &super::conv_backward::GradientWindows, chip: &ChipModel) -> KernelCost {
    let node = &g.nodes[w.input];
    let elem_bytes = element_bytes(&node.ins.shape);
    let bytes = w.stacked_elements.saturating_mul(elem_bytes);
    let kernel = Kernel {
        name: "copy",
        work: Work::Vpu {
            class: VpuClass::Transpose,
            blocks: w.stacked_elements as f64 / VREG_ELEMENTS as f64,
            elem_bytes,
        },
        in_bytes: bytes,
        out_bytes: bytes,
        unpadded_bytes: w.stacked_logical.saturating_mul(elem_bytes).saturating_mul(2),
    };
    added_copy(format!("{}.stack", node.ins.name), &kernel, chip)
}

/// Bytes of one element of an array `shape` (whole bytes, at least one); 4 for a tuple.
fn element_bytes(shape: &Shape) -> u64 {
    match shape {
        Shape::Array(a) => a.element_type.byte_width().max(1),
        _ => 4,
    }
}

/// [`relayout_kernel`] of `blocks` blocks of vector work.
fn copy_kernel(
    g: &Graph<'_>,
    v: usize,
    sizer: &Sizer,
    chip: &ChipModel,
    what: &str,
    class: VpuClass,
    blocks: f64,
) -> Result<KernelCost, HloError> {
    let node = &g.nodes[v];
    let s = sizer.shape(&node.ins.shape)?;
    let elem_bytes = element_bytes(&node.ins.shape);
    let kernel = Kernel {
        name: "copy",
        work: Work::Vpu {
            class,
            blocks,
            elem_bytes,
        },
        in_bytes: s.padded_bytes,
        out_bytes: s.padded_bytes,
        unpadded_bytes: s.logical_bytes.saturating_mul(2),
    };
    Ok(added_copy(format!("{}.{what}", node.ins.name), &kernel, chip))
}

/// The cost of a copy kernel the compiler adds (a relayout, a convert before a loop): the op model's time for
/// `kernel`, reading and writing HBM. It computes no value of the module: a collective never waits on it.
pub(super) fn added_copy(name: String, kernel: &Kernel, chip: &ChipModel) -> KernelCost {
    let t = time_kernel(kernel, chip);
    let hbm = kernel.in_bytes.saturating_add(kernel.out_bytes);
    KernelCost {
        name,
        kind: KernelKind::Loop,
        instructions: Vec::new(),
        cycles: t.cycles,
        start_cycle: 0,
        bound_by: t.bound,
        flops: 0,
        hbm_bytes: hbm,
        hbm_unpadded_bytes: kernel.unpadded_bytes,
        padding_bytes: hbm.saturating_sub(kernel.unpadded_bytes),
        vmem_bytes: t.vmem_bytes,
        nodes: Vec::new(),
    }
}

/// The op model's class of a copy of `v` (convolution `conv`'s input, or its result or an epilogue value of the
/// result's shape) around that convolution: the copies move the batch among the spatial dimensions, pad and crop
/// the width, and never the minor dimension, so when that dimension is the channel (`f` in the convolution's
/// labels for `v`'s side, as in every `b01f` program) the lanes stay as they are and only sublane rows move: the
/// op model's row relayout (`VpuClass::RowRelayout`, its convolution result copy's class), not a transpose.
///
/// Evidence (compiler corpus, fit records, cycles per 1,024-element padded block of the copied array): conv.018
/// (bf16[5,56,56,64] into `{3,1,2,0}` and the result back to `{3,2,1,0}`, 1,960 blocks each): 19.8 per block on
/// v4, 8.4 on v6e, where the op model's transpose streams at 21.4 and 20.3 and its row relayout at 24.5 and 6.8;
/// conv.026 (bf16[6,28,28,128] result copy, 672 blocks): 15.9 on v4, 10.2 on v6e; conv.005 (f32[7,33,33,128]
/// result copy, 1,155 blocks): 20.1 on v4, 6.4 on v6e. Timed as transposes, tpusim's copies around convolutions
/// were a median 1.44x the compiler's on v6e, 1.55x on tpu7x and 0.72x on v4 over the fit records of the conv and
/// ResNet-block families; as row relayouts the entry output copies are 0.94x (v6e) to 1.17x (v4) (v5p 1.58x,
/// whose fitted row rate is slower than its transpose's).
///
/// The side's minor dimension is the compiler's entry layout's, which puts the dimension padding least in the
/// lanes: a result it lays out width-minor (conv.013, bf16[2,224,224,320] as `{2,3,1,0}`: 224 of 256 lanes
/// against 320 of 384) is copied out of the convolution's channel-minor order by a transpose, 857,920 cycles on
/// v6e.
fn conv_copy_class(g: &Graph<'_>, conv: usize, v: usize, sizer: &Sizer) -> Result<VpuClass, HloError> {
    let Some(labels) = side_labels(g, conv, v) else {
        return Ok(VpuClass::Transpose);
    };
    let minor = tpu_minor_dim(&g.nodes[v].ins.shape, sizer)?;
    let channel_minor = minor.and_then(|i| labels.chars().nth(i)) == Some('f');
    Ok(if channel_minor {
        VpuClass::RowRelayout
    } else {
        VpuClass::Transpose
    })
}

/// Convolution `conv`'s dim labels for `v`: its input's when `v` is its first operand, its result's otherwise;
/// `None` when they do not read or do not match `v`'s rank.
fn side_labels<'a>(g: &'a Graph<'_>, conv: usize, v: usize) -> Option<&'a str> {
    let node = &g.nodes[conv];
    let (lhs, rest) = node.ins.attr("dim_labels")?.split_once('_')?;
    let labels = if node.operands.first() == Some(&v) {
        lhs
    } else {
        rest.split_once("->")?.1
    };
    (labels.chars().count() == rank(&g.nodes[v].ins.shape)).then_some(labels)
}

/// The dimension in the lanes (minor) of an array: its tiled layout's, or the compiler's entry layout for it
/// ([`crate::tiling::tpu_layout`], which puts the dimension padding least in the lanes).
fn tpu_minor_dim(s: &Shape, sizer: &Sizer) -> Result<Option<usize>, HloError> {
    entry_layout(s, sizer, |a| {
        a.layout
            .as_ref()
            .and_then(|l| l.minor_to_major.first().copied())
            .and_then(|d| usize::try_from(d).ok())
    })
}

/// Whether convolution `n` has a 1x1 window whose stride (above 1) divides the image width `width`: the compiler
/// subsamples its input with a strided slice rather than relayouting it.
fn strided_pointwise(n: &super::graph::Node<'_>, width: i64) -> bool {
    let (size, stride) = (n.ins.window_field("size"), n.ins.window_field("stride"));
    let pointwise = !size.is_empty() && size.iter().all(|&s| s == 1);
    let step = stride.last().copied().unwrap_or(1);
    pointwise && step > 1 && width % step == 0
}

fn rank(s: &Shape) -> usize {
    match s {
        Shape::Array(a) => a.dims.len(),
        _ => 0,
    }
}
