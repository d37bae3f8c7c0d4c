//! `tpusim hlo` rules for convolutions and their batch norms, read off the compiler corpus's optimized modules
//! (testdata/hlo/corpus/, tools/corpus/compare_kernels.py). Each module is written by hand here, with its expected
//! kernels and cycles worked out in the test.

use sim_tpu::hlo::{hlo_params, KernelKind};
use sim_tpu::tensorcore::ChipModel;

mod support;
use support::hlo::cost_on;

/// A 1x1 convolution f32[8,16,16,128] x f32[1,1,128,128] followed by `tail` (HLO lines reading `y`, ending in
/// `ROOT o`).
fn conv_then(tail: &str) -> String {
    format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         ENTRY main {{\n  x = f32[8,16,16,128]{{3,2,1,0}} parameter(0)\n  w = f32[1,1,128,128]{{3,2,1,0}} parameter(1)\n  \
         y = f32[8,16,16,128]{{3,2,1,0}} convolution(x, w), window={{size=1x1}}, dim_labels=b01f_01io->b01f\n  \
         z = f32[] constant(0)\n  inv = f32[] constant(0.00048828125)\n  invb = f32[128]{{0}} broadcast(inv), dimensions={{}}\n{tail}}}\n"
    )
}

/// Training-mode batch norm: mean over the batch and spatial dimensions, variance of `y - mean`, `(y - mean) *
/// rsqrt(var + eps)`.
const TRAINING_BN: &str = "  s = f32[128]{0} reduce(y, z), dimensions={0,1,2}, to_apply=add\n  \
    mean = f32[128]{0} multiply(s, invb)\n  mb = f32[8,16,16,128]{3,2,1,0} broadcast(mean), dimensions={3}\n  \
    d = f32[8,16,16,128]{3,2,1,0} subtract(y, mb)\n  sq = f32[8,16,16,128]{3,2,1,0} multiply(d, d)\n  \
    v = f32[128]{0} reduce(sq, z), dimensions={0,1,2}, to_apply=add\n  var = f32[128]{0} multiply(v, invb)\n  \
    eps = f32[] constant(1e-05)\n  epsb = f32[128]{0} broadcast(eps), dimensions={}\n  ve = f32[128]{0} add(var, epsb)\n  \
    r = f32[128]{0} rsqrt(ve)\n  rb = f32[8,16,16,128]{3,2,1,0} broadcast(r), dimensions={3}\n  \
    ROOT o = f32[8,16,16,128]{3,2,1,0} multiply(d, rb)\n";

/// Training-mode batch norm after a convolution: after the MXU kernel (convolution and sum), the compiler runs
/// `sum / n` (a launch), the variance pass over `y`, `rsqrt` (a launch) and the normalise pass (corpus conv.023
/// on v5e: 1,826, 5,016, 1,827 and 5,070 cycles). `y` is f32[8,16,16,128]: tile-aligned, 1,048,576 B, 262,144
/// elements, 256 blocks of 1024. The variance pass reads `y` (one streamed array), the normalise pass reads `y` and
/// writes `o` (two), each at the fused-kernel loop pipeline or HBM transfer, whichever is longer, after the launch.
#[test]
fn training_batch_norm_statistics_are_passes_after_the_convolution() {
    let text = conv_then(TRAINING_BN);
    for chip in ["v5e", "v6e", "v4"] {
        let model = ChipModel::preset(chip).unwrap();
        let hp = hlo_params().into_iter().find(|h| h.name == chip).unwrap();
        let launch = model.params.launch_cycles.round() as u64;
        let bw = model.hbm.hlo_stream_bytes_per_cycle;
        let y_bytes = 1_048_576f64;
        let blocks = 256.0;
        let pass = |streams: f64, bytes: f64| {
            launch
                + f64::max(
                    blocks * (hp.loop_block_cycles + hp.stream_block_cycles * streams),
                    bytes / bw,
                )
                .round() as u64
        };
        let c = cost_on(&text, chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        let at = |n: &str| {
            c.kernels
                .iter()
                .position(|k| k.name == n)
                .unwrap_or_else(|| panic!("{chip}: no {n} in {names:?}"))
        };
        assert_eq!(c.kernels[0].kind, KernelKind::Mxu, "{chip}: {names:?}");
        let (mean, var, rsqrt, norm) = (at("s.finish"), at("v.pass"), at("v.finish"), at("y.normalise"));
        assert_eq!([mean, var, rsqrt, norm], [1, 2, 3, 4], "{chip}: {names:?}");
        assert_eq!(c.kernels[mean].cycles, launch, "{chip}");
        assert_eq!(c.kernels[rsqrt].cycles, launch, "{chip}");
        assert_eq!(c.kernels[var].cycles, pass(1.0, y_bytes), "{chip}");
        assert_eq!(c.kernels[var].hbm_bytes, 1_048_576);
        assert_eq!(c.kernels[norm].cycles, pass(2.0, 2.0 * y_bytes), "{chip}");
        assert_eq!(c.kernels[norm].hbm_bytes, 2 * 1_048_576);
    }
}

/// Inference-mode batch norm (`y * g + b`, no statistics), a normalisation over the features of each position (a
/// reduce over the minor dimension only, as a layer norm's) and a statistic only written out (a bias gradient's
/// sum over the batch, scaled) stay in the convolution's kernel: no passes (corpus conv.006 on v5e, inference: one
/// kernel).
#[test]
fn a_scale_and_shift_or_a_per_row_statistic_adds_no_pass() {
    let inference = "  g = f32[128]{0} parameter(2)\n  gb = f32[8,16,16,128]{3,2,1,0} broadcast(g), dimensions={3}\n  \
        ROOT o = f32[8,16,16,128]{3,2,1,0} multiply(y, gb)\n";
    let per_row = "  s = f32[8,16,16]{2,1,0} reduce(y, z), dimensions={3}, to_apply=add\n  \
        sb = f32[8,16,16,128]{3,2,1,0} broadcast(s), dimensions={0,1,2}\n  \
        ROOT o = f32[8,16,16,128]{3,2,1,0} subtract(y, sb)\n";
    let summed_only = "  s = f32[128]{0} reduce(y, z), dimensions={0,1,2}, to_apply=add\n  \
        ROOT o = f32[128]{0} multiply(s, invb)\n";
    for tail in [inference, per_row, summed_only] {
        let c = cost_on(&conv_then(tail), "v5e");
        let extra: Vec<&str> = c
            .kernels
            .iter()
            .map(|k| k.name.as_str())
            .filter(|n| n.ends_with(".pass") || n.ends_with(".finish") || n.ends_with(".normalise"))
            .collect();
        assert!(extra.is_empty(), "{extra:?}");
    }
}

/// A 1x1 convolution f32[N,2,8,128] x f32[1,1,128,128] returned by the program: with a batch of 8 (a tile's rows)
/// the compiler returns it in the convolution's own layout, so the program is the convolution kernel alone (corpus
/// conv.006, N 32, on every chip: one kernel); with a batch of 9 a copy into row-major follows, moving the
/// 9 x 2 x 8 x 128 x 4 B = 73,728 B result in and out.
#[test]
fn a_convolution_result_with_a_batch_of_eight_keeps_its_layout() {
    let module = |n: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = f32[{n},2,8,128]{{3,2,1,0}} parameter(0)\n  \
             w = f32[1,1,128,128]{{3,2,1,0}} parameter(1)\n  ROOT c = f32[{n},2,8,128]{{3,2,1,0}} convolution(x, w), \
             window={{size=1x1}}, dim_labels=b01f_01io->b01f\n}}\n"
        )
    };
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let eight = cost_on(&module(8), chip);
        assert_eq!(eight.kernels.len(), 1, "{chip}: {:?}", eight.kernels);
        assert_eq!(eight.kernels[0].kind, KernelKind::Mxu);
        let nine = cost_on(&module(9), chip);
        assert_eq!(nine.kernels.len(), 2, "{chip}: {:?}", nine.kernels);
        assert_eq!(nine.kernels[1].name, "c.relayout");
        assert_eq!(nine.kernels[1].hbm_bytes, 2 * 73_728);
    }
}

/// A 3x3 convolution returning bf16[29,33,33,64]: the compiler's entry layout for the result puts the fewest
/// padded rows in the sublanes, the batch (29 rows pad to 32: 33 x 33 x 32 x 128 padded elements) rather than the
/// width (33 pads to 40 or 48: at least 29 x 33 x 40 x 128), `{3,0,2,1}`, the convolution's own order, so the
/// program is the convolution kernel alone (corpus conv.007 on every chip). bf16[9,32,32,64] pads the batch 9 to
/// 16 rows but the width 32 not at all, so its entry layout is row-major and the result is copied out.
#[test]
fn a_result_whose_entry_layout_is_batch_inside_is_not_copied() {
    let module = |n: u64, w: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = bf16[{n},{w},{w},64]{{3,2,1,0}} parameter(0)\n  \
             k = bf16[3,3,64,64]{{3,2,1,0}} parameter(1)\n  ROOT c = bf16[{n},{w},{w},64]{{3,2,1,0}} convolution(x, k), \
             window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f\n}}\n"
        )
    };
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let kept = cost_on(&module(29, 33), chip);
        let names: Vec<&str> = kept.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["c"], "{chip}");
        let copied = cost_on(&module(9, 32), chip);
        let names: Vec<&str> = copied.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["c", "c.relayout"], "{chip}");
    }
}

/// On v5p (megacore, no CMEM: an MXU kernel's result cannot stay in one core's VMEM) a convolution result copied
/// out to the entry's layout is an HBM temporary until the copy: f32[9,2,8,128], 9 x 2 x 8 x 128 x 4 B = 73,728 B
/// (tile-aligned), plus the allocation's fixed overhead, in 16 KiB granules, as the only temporary (corpus conv.011 on v5p: 4,751,360
/// temp bytes, where tpusim counted none). With a small batch the input is copied and padded and the result
/// cropped: bf16[2,16,8,128] in and out, 2 x 16 x 8 x 128 x 2 B = 65,536 B each, two of the chain live at once:
/// 131,072 B. On v5e, whose VMEM holds them, no temporary.
#[test]
fn a_copied_convolution_result_is_a_temporary_on_v5p() {
    let overhead = hlo_params()
        .into_iter()
        .find(|h| h.name == "v5p")
        .unwrap()
        .temp_overhead_bytes;
    let module = |dtype: &str, n: u64, w: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = {dtype}[{n},{w},8,128]{{3,2,1,0}} parameter(0)\n  \
             k = {dtype}[1,1,128,128]{{3,2,1,0}} parameter(1)\n  ROOT c = {dtype}[{n},{w},8,128]{{3,2,1,0}} \
             convolution(x, k), window={{size=1x1}}, dim_labels=b01f_01io->b01f\n}}\n"
        )
    };
    let copied = module("f32", 9, 2);
    // The compiler allocates temporaries in whole 16 KiB granules (every corpus record's temp_bytes is a multiple
    // of 16,384).
    assert_eq!(
        cost_on(&copied, "v5p").temp_bytes,
        (73_728 + overhead).div_ceil(16_384) * 16_384
    );
    assert_eq!(cost_on(&copied, "v5e").temp_bytes, 0);
    // bf16[2,16,8,128]: 2 x 16 x 8 x 128 x 2 B = 65,536 B per array; input copy, result, crop (an unpadded 1x1
    // window over 8 columns needs no pad), two of the chain live at once.
    let small_batch = module("bf16", 2, 16);
    let c = cost_on(&small_batch, "v5p");
    let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["x.relayout", "c", "c.crop", "c.relayout"]);
    assert_eq!(c.temp_bytes, (2 * 65_536 + overhead).div_ceil(16_384) * 16_384);
    // A batch of 8 keeps its layout: no copy, no temporary.
    assert_eq!(cost_on(&module("f32", 8, 2), "v5p").temp_bytes, 0);
}

/// A loss summed over a convolution's result, the result also returned: the compiler computes the sum in the
/// convolution kernel's epilogue (corpus conv.001 on v5e: one kOutput fusion of the convolution and the sum), so
/// the reduce kernel reads nothing from HBM and pays no launch: its one reduction over `y` (f32[8,16,16,128],
/// tile-aligned: 256 blocks of 1024) at the fused-op rate of an MXU kernel. Without the rule it read `y`'s
/// 1,048,576 B again after a launch.
#[test]
fn a_sum_over_a_convolution_result_is_its_epilogue() {
    let tail = "  sq = f32[8,16,16,128]{3,2,1,0} multiply(y, y)\n  \
        s = f32[] reduce(sq, z), dimensions={0,1,2,3}, to_apply=add\n  \
        ROOT o = (f32[8,16,16,128]{3,2,1,0}, f32[]) tuple(y, s)\n";
    for chip in ["v5e", "v6e"] {
        let hp = hlo_params().into_iter().find(|h| h.name == chip).unwrap();
        let c = cost_on(&conv_then(tail), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        let r = c
            .kernels
            .iter()
            .find(|k| k.name == "s")
            .unwrap_or_else(|| panic!("{chip}: {names:?}"));
        assert_eq!(r.kind, KernelKind::Reduce);
        assert_eq!(r.hbm_bytes, 0, "{chip}");
        let per_block = hp.mxu_fused_op_cycles.unwrap_or(hp.fused_op_cycles);
        assert_eq!(r.cycles, (256.0 * per_block).round() as u64, "{chip}");
    }
}

/// A 1x1 convolution of stride 2 over one bf16[1,16,16,128] image: the compiler reads the input through a strided
/// slice (no input copy) but pads it to the window and crops the windowed result all the same (corpus conv.023 on
/// v5e: pad 13,635 cycles, crop 5,827; conv.025: pad 3,299, crop 3,320). Pad, convolution, crop and the output copy;
/// the pad moves the input's 1 x 16 x 16 x 128 x 2 B = 65,536 B in and out, the crop and the copy the result's
/// 1 x 8 x 8 x 128 x 2 B = 16,384 B (tile-aligned: `tpusim layout --chip v5e bf16[1,8,8,128]` gives the (8,128)(2,1)
/// tile). Before the rule the program was the convolution and its output copy only.
#[test]
fn a_strided_pointwise_convolution_with_a_small_batch_is_padded_and_cropped() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[1,16,16,128]{3,2,1,0} parameter(0)\n  \
                k = bf16[1,1,128,128]{3,2,1,0} parameter(1)\n  \
                ROOT c = bf16[1,8,8,128]{3,2,1,0} convolution(x, k), window={size=1x1 stride=2x2}, \
                dim_labels=b01f_01io->b01f\n}\n";
    let c = cost_on(text, "v5e");
    let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["x.pad", "c", "c.crop", "c.relayout"]);
    assert_eq!(c.kernels[0].hbm_bytes, 2 * 65_536);
    assert_eq!(c.kernels[2].hbm_bytes, 2 * 16_384);
    assert_eq!(c.kernels[3].hbm_bytes, 2 * 16_384);
}

/// Cycles of a copy the op model times as a row relayout (`VpuClass::RowRelayout`, the same rate resident or
/// streaming) of `blocks` 1024-element blocks on `chip`: its launch, then each block at `row_relayout`.
fn row_relayout_cycles(chip: &str, blocks: f64) -> u64 {
    let p = ChipModel::preset(chip).unwrap().params;
    p.launch_cycles.round() as u64 + (blocks * p.row_relayout).round() as u64
}

/// A 3x3 convolution (padding 1) over a small batch, bf16[2,16,16,128], channel-minor in and out: the compiler's
/// copies around it (the input into the batch-inside layout, its pad, the windowed result's copy and its slice
/// back to the output's width, the output copy: corpus conv.024 on v5e, copy 78,067 cycles and slice 25,670)
/// move the batch among the spatial dimensions and never the 128 channels in the lanes, so each is a row relayout,
/// not a transpose (corpus conv.018 on v6e: 16,451 cycles for each of its bf16[5,56,56,64] and [5,56,56,128]
/// copies, 8.4 per block, against the transpose's 20.3 and the row relayout's 6.8). Each array is 2 x 16 x 16 x
/// 128 elements = 64 blocks of 1024 (tile-aligned), 131,072 B. The crop writes the windowed result `[16, 16, 3,
/// 128]` (the width with its halo, 16 + 2 = 18, padded to 24 = 8 rows of 3 columns) row-major in 4-row tiles
/// (corpus resnet_block.007, bf16[19,24,3,256] into `T(4,128)`): the mean of its 64 blocks read and its 65,536 /
/// 512 = 128 tiles written, 96 blocks.
#[test]
fn channel_minor_convolution_copies_move_rows() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[2,16,16,128]{3,2,1,0} parameter(0)\n  \
                k = bf16[3,3,128,128]{3,2,1,0} parameter(1)\n  \
                ROOT c = bf16[2,16,16,128]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1}, \
                dim_labels=b01f_01io->b01f\n}\n";
    for chip in ["v4", "v5e", "v6e", "tpu7x"] {
        let c = cost_on(text, chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            names,
            ["x.relayout", "x.pad", "c", "c.crop", "c.slice", "c.relayout"],
            "{chip}"
        );
        for k in c.kernels.iter().filter(|k| k.kind == KernelKind::Loop) {
            let blocks = if k.name == "c.crop" { 96.0 } else { 64.0 };
            assert_eq!(k.hbm_bytes, 2 * 131_072, "{chip} {}", k.name);
            assert_eq!(k.cycles, row_relayout_cycles(chip, blocks), "{chip} {}", k.name);
        }
    }
}

/// A convolution result over 2 images 14 wide, bf16[2,14,14,256], leaves the program in the compiler's entry
/// layout for it: row-major would pad the width 14 to a 16-row tile, so the batch takes the sublanes instead,
/// `{3,0,2,1:T(2,128)(2,1)}`, tiles of 2 rows (corpus resnet_block.019, bf16[2,14,14,2048] the same way). Writing
/// 2-row tiles costs a whole block per tile, so the output copy is the mean of its read side (2 x 14 x 14 x 256 =
/// 100,352 elements = 98 blocks of 1,024) and its written side (100,352 / 256 = 392 tiles): 245 blocks of row
/// relayout (corpus: copies into `T(2,128)` cost 2.0-3.1x the 8-row tiles' per element). Reading the 2-row
/// tiles costs their elements: the input copy is 98 blocks. The crop writes the windowed result (the width 14
/// padded to 16 = 8 rows of 2 columns) in 2-row tiles too: 245 blocks (corpus resnet_block.019, bf16[14,16,2,2048]
/// into `T(2,128)`, 80,824 cycles on v5e). With 16-wide images the entry layout is row-major in 16-row tiles and
/// the output copy is its elements, 2 x 16 x 16 x 256 / 1,024 = 128 blocks.
#[test]
fn copies_into_tiles_of_fewer_than_eight_rows_write_a_block_per_tile() {
    let module = |w: u64| one_by_one_conv(14, w, 256);
    for chip in ["v4", "v5e", "v6e", "tpu7x"] {
        let c = cost_on(&module(14), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            names,
            ["x.relayout", "x.pad", "c", "c.crop", "c.slice", "c.relayout"],
            "{chip}"
        );
        assert_eq!(c.kernels[0].cycles, row_relayout_cycles(chip, 98.0), "{chip}");
        assert_eq!(c.kernels[3].cycles, row_relayout_cycles(chip, 245.0), "{chip}");
        assert_eq!(c.kernels[5].cycles, row_relayout_cycles(chip, 245.0), "{chip}");
        let wide = cost_on(&one_by_one_conv(16, 16, 256), chip);
        let out = wide.kernels.last().unwrap();
        assert_eq!(out.name, "c.relayout", "{chip}");
        assert_eq!(out.cycles, row_relayout_cycles(chip, 128.0), "{chip}");
    }
}

/// A bf16 1x1 convolution of a batch of 2 `[2, h, w, c]` images into `c` channels, row-major (NHWC).
fn one_by_one_conv(h: u64, w: u64, c: u64) -> String {
    format!(
        "HloModule m\n\nENTRY main {{\n  x = bf16[2,{h},{w},{c}]{{3,2,1,0}} parameter(0)\n  \
         k = bf16[1,1,{c},{c}]{{3,2,1,0}} parameter(1)\n  ROOT c = bf16[2,{h},{w},{c}]{{3,2,1,0}} \
         convolution(x, k), window={{size=1x1}}, dim_labels=b01f_01io->b01f\n}}\n"
    )
}

/// A small-batch convolution's input is padded to the window unless the window is unpadded with a unit stride
/// and the width fills whole tiles of 8 rows (corpus conv.018, 56 wide, and conv.031, 224 wide, 1x1: no `pad`;
/// conv.026, 28 wide, 1x1: a pad to 32). bf16[2,16,W,128] under a 1x1 window: W = 16 gives the input copy, the
/// convolution, the crop and the output copy; W = 12 (not a multiple of 8) adds the pad and, the result being
/// windowed wider than the output, the slice back to its width; so does a 3x3 window's padding at W = 16 (the
/// test above).
#[test]
fn an_unpadded_window_over_whole_tiles_is_not_padded() {
    let module = |w: u64| one_by_one_conv(16, w, 128);
    for chip in ["v5e", "v6e"] {
        let names = |w| -> Vec<String> { cost_on(&module(w), chip).kernels.into_iter().map(|k| k.name).collect() };
        assert_eq!(names(16), ["x.relayout", "c", "c.crop", "c.relayout"], "{chip}");
        assert_eq!(
            names(12),
            ["x.relayout", "x.pad", "c", "c.crop", "c.slice", "c.relayout"],
            "{chip}"
        );
    }
}

/// A convolution activation with a batch of 8 (no small-batch copies) whose channels pad more than its width:
/// bf16[8,4,112,64]. The compiler's entry layout puts the dimension padding least in the lanes, here W (112 of 128
/// lanes, where 64 channels fill half), so a copy moves the channels into the lanes before the convolution, a
/// lane-changing transpose (corpus conv.010, bf16[25,112,112,64] laid out `{2,3,1,0}`: a 799,120-cycle copy on v6e
/// before its convolution). In W-minor tiles the array is 8 x 4 x 64 rows of 128 lanes = 262,144 elements, 256
/// blocks, 524,288 B; the copy reads and writes them, timed as the op model's bf16 transpose: launch, the fixed
/// 16-bit cost, and 256 blocks at the resident or streaming transpose rate. With 128 channels (channel-minor) there
/// is no copy. The result's batch of 8 keeps the convolution's layout: no output copy either way.
#[test]
fn an_activation_laid_out_width_minor_is_transposed_first() {
    let module = |c: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = bf16[8,4,112,{c}]{{3,2,1,0}} parameter(0)\n  \
             k = bf16[1,1,{c},128]{{3,2,1,0}} parameter(1)\n  ROOT y = bf16[8,4,112,128]{{3,2,1,0}} \
             convolution(x, k), window={{size=1x1}}, dim_labels=b01f_01io->b01f\n}}\n"
        )
    };
    for chip in ["v4", "v5e", "v6e", "tpu7x"] {
        let c = cost_on(&module(64), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["x.relayout", "y"], "{chip}");
        let p = ChipModel::preset(chip).unwrap().params;
        let bytes = 524_288u64;
        let rate = if (2 * bytes) as f64 <= p.resident_limit_bytes {
            p.relayout
        } else {
            p.transpose_stream
        };
        let body = 256.0 * rate + p.transpose_16bit_cycles;
        assert_eq!(c.kernels[0].hbm_bytes, 2 * bytes, "{chip}");
        assert_eq!(
            c.kernels[0].cycles,
            p.launch_cycles.round() as u64 + body.round() as u64,
            "{chip}"
        );
        let channel_minor: Vec<String> = cost_on(&module(128), chip)
            .kernels
            .into_iter()
            .map(|k| k.name)
            .collect();
        assert_eq!(channel_minor, ["y"], "{chip}");
    }
}
