//! `tpusim hlo` rules for kernel gradients, strided and depthwise convolutions and the prefetch of convolution
//! activations, read off the compiler corpus's optimized modules (`hlo::conv_backward`, `hlo::conv_strided`,
//! `hlo::conv_depthwise`, `hlo::conv_prefetch`). Each module is written by hand here, with its expected kernels,
//! bytes and cycles worked out in the test.

use sim_tpu::hlo::{hlo_params, HloParams, KernelCost, KernelKind, ModuleCost};
use sim_tpu::tensorcore::cost::{plan_mxu_resident, Residency};
use sim_tpu::tensorcore::lower::MxuWork;
use sim_tpu::tensorcore::ChipModel;
use sim_tpu::tensorcore::Dtype;

mod support;
use support::hlo::cost_on;

fn params(chip: &str) -> HloParams {
    hlo_params().into_iter().find(|h| h.name == chip).unwrap()
}

fn mxu_kernel(c: &ModuleCost) -> &KernelCost {
    let mxu: Vec<&KernelCost> = c.kernels.iter().filter(|k| k.kind == KernelKind::Mxu).collect();
    assert_eq!(
        mxu.len(),
        1,
        "{:?}",
        c.kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
    );
    mxu[0]
}

/// The launch an MXU kernel pays: the op model's MXU launch scaled by the fitted launch factor.
fn mxu_launch(model: &ChipModel, hp: &HloParams) -> u64 {
    (model.params.mxu_launch_cycles * hp.launch_factor.clamp(0.2, 1.0))
        .max(0.0)
        .round() as u64
}

/// A kernel gradient as jax writes it: `x` (bf16[16,128,128,128], labels `f01b`: the batch 16 is contracted) against
/// the output gradient `dy` (bf16[16,128,128,128] as a 128 x 128 window), result bf16[3,3,128,128]. The compiler
/// runs one product, M = 128 channels x 9 taps = 1,152 rows, K = 16 x 128 x 128 = 262,144 (batch and window
/// positions), N = 128, with every operand window fetched once; the kernel takes the longer of that product's MXU
/// work (nothing over HBM) and streaming the operands not on chip at the HBM rate.
/// - tpu7x (prefetch budget 32 MiB): `x` and `dy` are 33,554,432 B each, both streamed: 67,108,864 B.
/// - v5e (budget 112 MiB): `dy` (the weight side) is prefetched on chip; `x`, a convolution activation over 32 MiB,
///   is not (`conv_prefetch`): 33,554,432 B streamed.
#[test]
fn a_kernel_gradient_is_one_product_streaming_its_operands_once() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[16,128,128,128]{3,2,1,0} parameter(0)\n  \
        dy = bf16[16,128,128,128]{3,2,1,0} parameter(1)\n  \
        ROOT g = bf16[3,3,128,128]{3,2,1,0} convolution(x, dy), window={size=128x128 pad=1_1x1_1}, \
        dim_labels=f01b_i01o->01bf\n}\n";
    let operand = 16u64 * 128 * 128 * 128 * 2;
    for (chip, streamed) in [("tpu7x", 2 * operand), ("v5e", operand)] {
        let model = ChipModel::preset(chip).unwrap();
        let hp = params(chip);
        let product = MxuWork {
            batch: 1,
            m: 128 * 9,
            k: 16 * 128 * 128,
            n: 128,
            taps_h: 1,
            taps_w: 1,
            dtype: Dtype::Bfloat16,
            out_bits: 16,
            conv: false,
        };
        // The MXU kernel's epilogue runs at the op model's rates scaled by the fitted epilogue factor.
        let mut fused = model.clone();
        let f = hp.mxu_epilogue_factor.clamp(0.0, 1.0);
        fused.params.mm_out_16bit *= f;
        fused.params.mm_out_32bit *= f;
        fused.params.mm_acc_32bit *= f;
        let on_chip = Residency {
            lhs: true,
            rhs: true,
            out: false,
        };
        let compute = plan_mxu_resident(&product, &fused, on_chip).body_cycles;
        let stream = streamed as f64 / hp.hbm_bytes_per_cycle;
        let c = cost_on(text, chip);
        let k = mxu_kernel(&c);
        assert_eq!(k.flops, 2 * 1152 * 262_144 * 128, "{chip}");
        assert_eq!(
            k.cycles,
            mxu_launch(&model, &hp) + compute.max(stream).round() as u64,
            "{chip}: compute {compute:.0}, stream {stream:.0}"
        );
        // The 128-channel result fills the sublanes: no copy out; nothing else runs.
        assert_eq!(c.kernels.len(), 1, "{chip}");
    }
}

/// Cycles of a copy the op model times as a transpose (`VpuClass::Transpose`) of `blocks` 1,024-element blocks of
/// a 16-bit array moving `bytes` (read and written) on `chip`: its launch, then each block at the resident rate
/// (`relayout`) when the bytes fit the resident limit, at `transpose_stream` otherwise, plus the fixed 16-bit
/// transpose cycles.
fn transpose_copy_cycles(chip: &str, blocks: f64, bytes: u64) -> u64 {
    let p = ChipModel::preset(chip).unwrap().params;
    let rate = if bytes as f64 <= p.resident_limit_bytes {
        p.relayout
    } else {
        p.transpose_stream
    };
    p.launch_cycles.round() as u64 + (blocks * rate + p.transpose_16bit_cycles).round() as u64
}

/// The kernel gradient of a stride-2 3x3 convolution over a batch of 2: `x` bf16[2,32,32,128], `dy`
/// bf16[2,16,16,128] as a 16 x 16 window dilated by 2 (`pad=0_1`: 32 + 1 - 31 + 1 = 3 output positions). The
/// compiler builds the input's windows column by column of the kernel, 3 columns, each two passes: the shifted
/// stride-phase window, a copy of `x` (524,288 B, aligned: 2 x 32 x 32 x 128 x 2, read and written), then its
/// dynamic-update-slice into the stacked array, a copy of the column's stacked window `[32, 8 x 2, 48 / 8, 128]`
/// (the width 32 with the kernel's halo, 34, padded to whole stride phases of 8 rows, 16: 48; the 128 channels
/// in the lanes, 16 rows in the sublanes): 32 x 16 x 6 x 128 = 393,216 elements, 786,432 B, 384 blocks. With a
/// batch of 8, or without the dilation (a stride-1 gradient), there are none; and the small-batch input copies
/// (`relayout`, a forward convolution's) never apply to a gradient.
#[test]
fn a_strided_small_batch_kernel_gradient_windows_its_input_per_kernel_column() {
    let module = |n: u64, dilate: &str| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = bf16[{n},32,32,128]{{3,2,1,0}} parameter(0)\n  \
             dy = bf16[{n},16,16,128]{{3,2,1,0}} parameter(1)\n  \
             ROOT g = bf16[3,3,128,128]{{3,2,1,0}} convolution(x, dy), window={{size=16x16 pad=0_1x0_1{dilate}}}, \
             dim_labels=f01b_i01o->01bf\n}}\n"
        )
    };
    for chip in ["v5e", "v6e", "v4"] {
        let c = cost_on(&module(2, " rhs_dilate=2x2"), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        let windows: Vec<&KernelCost> = c.kernels.iter().filter(|k| k.name.starts_with("x.window")).collect();
        let stacks: Vec<&KernelCost> = c.kernels.iter().filter(|k| k.name.starts_with("x.stack")).collect();
        assert_eq!(windows.len(), 3, "{chip}: {names:?}");
        assert_eq!(stacks.len(), 3, "{chip}: {names:?}");
        assert_eq!(c.kernels.len(), 7, "{chip}: {names:?}");
        assert_eq!(
            c.kernels[6].kind,
            KernelKind::Mxu,
            "{chip}: the windows come first: {names:?}"
        );
        for w in &windows {
            assert_eq!(w.hbm_bytes, 2 * 524_288, "{chip}");
            assert_eq!(w.cycles, windows[0].cycles, "{chip}");
            assert!(w.cycles > 0, "{chip}");
        }
        for s in &stacks {
            assert_eq!(s.hbm_bytes, 2 * 786_432, "{chip}");
            assert_eq!(s.cycles, transpose_copy_cycles(chip, 384.0, 2 * 786_432), "{chip}");
        }
        let c = cost_on(&module(8, " rhs_dilate=2x2"), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["g"], "{chip}, batch 8");
    }
}

/// A unit-stride kernel gradient over a small batch windows its input the same way when the forward convolution
/// is windowed (images at least 8 wide) and the kernel has several columns: `x` bf16[2,16,16,128], 3x3 (`dy`
/// bf16[2,16,16,128] as a 16 x 16 window, `pad=1_1`: 16 + 2 - 16 + 1 = 3 positions). Per column a pass over `x`
/// (2 x 16 x 16 x 128 x 2 = 131,072 B, read and written) and one over the column's stacked window `[16, 16, 24 / 8,
/// 128]` (the width 16 with the halo, 18, padded to 8 rows: 24; the channels in the lanes): 16 x 16 x 3 x 128 =
/// 98,304 elements, 196,608 B, 96 blocks. Corpus conv.004 (bf16 N 7, 14 wide, depthwise 3x3, on every chip): three
/// window fusions `bf16[14,56,2,76,1]` and three slices and copies of the input (v5e 24,000 cycles of 67,294; tpusim
/// had none: 0.42-0.73x). None for 7-wide images (conv.015: N 2, 7 wide, 3x3: the gradient's fusion alone) nor for a
/// one-column (1x1) kernel, whose window is the input itself (resnet_block.007's 1x1 gradients).
#[test]
fn a_unit_stride_small_batch_gradient_windows_its_input_when_eight_wide() {
    let module = |w: u64, pad: &str, out: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = bf16[2,{w},{w},128]{{3,2,1,0}} parameter(0)\n  \
             dy = bf16[2,{w},{w},128]{{3,2,1,0}} parameter(1)\n  \
             ROOT g = bf16[{out},{out},128,128]{{3,2,1,0}} convolution(x, dy), window={{size={w}x{w}{pad}}}, \
             dim_labels=f01b_i01o->01bf\n}}\n"
        )
    };
    for chip in ["v4", "v5e", "v6e", "tpu7x"] {
        let c = cost_on(&module(16, " pad=1_1x1_1", 3), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        let windows: Vec<&KernelCost> = c.kernels.iter().filter(|k| k.name.starts_with("x.window")).collect();
        let stacks: Vec<&KernelCost> = c.kernels.iter().filter(|k| k.name.starts_with("x.stack")).collect();
        assert_eq!(
            (windows.len(), stacks.len(), c.kernels.len()),
            (3, 3, 7),
            "{chip}: {names:?}"
        );
        for w in &windows {
            assert_eq!(w.hbm_bytes, 2 * 131_072, "{chip}");
        }
        for s in &stacks {
            assert_eq!(s.hbm_bytes, 2 * 196_608, "{chip}");
            assert_eq!(s.cycles, transpose_copy_cycles(chip, 96.0, 2 * 196_608), "{chip}");
        }
        for (w, pad, out) in [(7, " pad=1_1x1_1", 3), (16, "", 1)] {
            let c = cost_on(&module(w, pad, out), chip);
            let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
            assert!(
                !names.iter().any(|n| n.contains("window") || n.contains("stack")),
                "{chip}, {w} wide, {out} columns: {names:?}"
            );
        }
    }
}

/// The kernel gradient of a stride-2 7x7 convolution over 2 images of 6 channels (corpus conv.014's shape at a
/// quarter of its width): `x` bf16[2,64,64,6], `dy` bf16[2,32,32,64] as a 32 x 32 window dilated by 2 (`pad=2_3`:
/// 64 + 5 - 63 + 1 = 7 output positions), result bf16[7,7,6,64]. Each column's stacked window is `[64, 16, 80 /
/// 8, 6]` (the width 64 with the halo, 70, padded to whole stride phases of 16: 80). With the 6 channels in the
/// lanes its tiles would be 128 x 16 = 2,048 elements per row of columns; with the 16 batch-phase rows in the lanes
/// and the 6 channels in 8 sublanes, 128 x 8 = 1,024, so the compiler puts the batch in the lanes (conv.014:
/// `bf16[224,16,30,6,7]{1,3,4,2,0}`): 64 x 10 x 1,024 = 655,360 elements, 1,310,720 B, 640 blocks per column, 5.3
/// times the input's 2 x 64 x 64 x 6 x 2 = 98,304 logical bytes. Seven columns: seven windows and seven stacks.
#[test]
fn a_gradient_over_few_channels_stacks_its_windows_batch_minor() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[2,64,64,6]{3,2,1,0} parameter(0)\n  \
        dy = bf16[2,32,32,64]{3,2,1,0} parameter(1)\n  \
        ROOT g = bf16[7,7,6,64]{3,2,1,0} convolution(x, dy), window={size=32x32 pad=2_3x2_3 rhs_dilate=2x2}, \
        dim_labels=f01b_i01o->01bf\n}\n";
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let c = cost_on(text, chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        let stacks: Vec<&KernelCost> = c.kernels.iter().filter(|k| k.name.starts_with("x.stack")).collect();
        assert_eq!(stacks.len(), 7, "{chip}: {names:?}");
        assert_eq!(
            c.kernels.iter().filter(|k| k.name.starts_with("x.window")).count(),
            7,
            "{chip}"
        );
        for s in &stacks {
            assert_eq!(s.hbm_bytes, 2 * 1_310_720, "{chip}");
            assert_eq!(s.cycles, transpose_copy_cycles(chip, 640.0, 2 * 1_310_720), "{chip}");
        }
    }
}

/// A strided convolution reads its whole input: a 1x1 stride-2 convolution of `x` bf16[40,64,64,256]
/// (83,886,080 B, aligned: over every chip's prefetch budget and over 32 MiB) into bf16[40,32,32,128] on v4 takes at
/// least the input's bytes at the HBM rate, 83,886,080 / `hbm_bytes_per_cycle` (178,533 cycles at v4's 469.856),
/// after the launch; the window plan, counting only the subsampled quarter of the input, is shorter. The
/// batch of 40 fills the sublanes: no copies around it.
#[test]
fn a_strided_convolution_streams_its_whole_input() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[40,64,64,256]{3,2,1,0} parameter(0)\n  \
        w = bf16[1,1,256,128]{3,2,1,0} parameter(1)\n  \
        ROOT y = bf16[40,32,32,128]{3,2,1,0} convolution(x, w), window={size=1x1 stride=2x2}, \
        dim_labels=b01f_01io->b01f\n}\n";
    let chip = "v4";
    let model = ChipModel::preset(chip).unwrap();
    let hp = params(chip);
    let c = cost_on(text, chip);
    assert_eq!(c.kernels.len(), 1);
    let floor = 83_886_080f64 / hp.hbm_bytes_per_cycle;
    assert_eq!(c.kernels[0].cycles, mxu_launch(&model, &hp) + floor.round() as u64);
}

/// A convolution activation is prefetched on chip up to 32 MiB and no further (`conv_prefetch`): on v5e (budget
/// 112 MiB) a 1x1 convolution of `x` bf16[16,64,64,256] (exactly 33,554,432 B) with `w` bf16[1,1,256,256]
/// (131,072 B) reads `w` and writes the 33,554,432-byte result over HBM, `x` being on chip; with a batch of 17
/// (35,651,584 B) `x` is read over HBM too, and the weight is prefetched instead.
#[test]
fn a_convolution_activation_over_32_mib_is_not_prefetched() {
    let module = |n: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = bf16[{n},64,64,256]{{3,2,1,0}} parameter(0)\n  \
             w = bf16[1,1,256,256]{{3,2,1,0}} parameter(1)\n  \
             ROOT y = bf16[{n},64,64,256]{{3,2,1,0}} convolution(x, w), window={{size=1x1}}, \
             dim_labels=b01f_01io->b01f\n}}\n"
        )
    };
    let at_limit = cost_on(&module(16), "v5e");
    let k = mxu_kernel(&at_limit);
    assert_eq!(k.hbm_bytes, 131_072 + 33_554_432);
    let over = cost_on(&module(17), "v5e");
    let k = mxu_kernel(&over);
    assert_eq!(k.hbm_bytes, 35_651_584 + 35_651_584);
}

/// The kernel gradient of a 1x1 convolution: `x` bf16[8,16,16,512] against `dy` bf16[8,16,16,256] as a 16 x 16
/// window, result bf16[1,1,512,256]. Both operands are channel-minor activations, so the contracted batch and
/// positions (K = 8 x 16 x 16 = 2,048) are their major dimensions and each MXU pass reads a transposed block:
/// ceil(512 / 128) x ceil(2,048 / 128) x ceil(256 / 128) = 4 x 16 x 2 = 128 blocks on a 128-wide MXU, each at the
/// weight transpose rate (corpus resnet_block.023 on v4: [512,256] over K 3,528, 224 blocks, 37,135 cycles, 263
/// blocks' worth at 135 cycles). On v4 that is 128 x 135.42 = 17,334 cycles, far above the product's MXU work
/// (2 x 512 x 2,048 x 256 = 536,870,912 FLOPs over 4 MXUs of 128 x 128 x 2 per cycle: 4,096 cycles) and the
/// operands' 3 MiB over HBM: the kernel is its launch plus the transposes. On every chip the kernel takes at
/// least that floor (shared by v5p's two TensorCores; 256-wide blocks on v6e and tpu7x: 2 x 8 x 1 = 16).
#[test]
fn a_one_tap_kernel_gradient_transposes_a_block_per_mxu_pass() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[8,16,16,512]{3,2,1,0} parameter(0)\n  \
        dy = bf16[8,16,16,256]{3,2,1,0} parameter(1)\n  \
        ROOT g = bf16[1,1,512,256]{3,2,1,0} convolution(x, dy), window={size=16x16}, \
        dim_labels=f01b_i01o->01bf\n}\n";
    for (chip, blocks, cores) in [
        ("v4", 128.0, 1.0),
        ("v5e", 128.0, 1.0),
        ("v5p", 128.0, 2.0),
        ("v6e", 16.0, 1.0),
    ] {
        let model = ChipModel::preset(chip).unwrap();
        let hp = params(chip);
        let floor = blocks * model.params.mxu_weight_transpose_cycles / cores;
        let c = cost_on(text, chip);
        let k = mxu_kernel(&c);
        assert!(
            k.cycles >= mxu_launch(&model, &hp) + floor.round() as u64 - 1,
            "{chip}: {} < floor {floor:.0}",
            k.cycles
        );
        if chip == "v4" {
            assert_eq!(k.cycles, mxu_launch(&model, &hp) + floor.round() as u64, "{chip}");
        }
    }
}

/// A depthwise 3x3 convolution over bf16[16,32,32,128] (`feature_group_count=128`, one channel per group, kernel
/// bf16[3,3,1,128]) takes a multiply-add per output block and tap: the output bf16[16,32,32,128] is 16 x 32 x 32 x
/// 128 = 2,097,152 elements (aligned in any layout), 2,048 blocks, times 9 taps at 2.25 cycles (corpus conv.017:
/// 2.19-2.26 per block-tap on v5e, v6e and tpu7x) = 41,472 cycles after the MXU launch; on v5p the megacore pair
/// splits it, 20,736. The op model's plan of the one-channel contraction is shorter, so the floor is the body.
#[test]
fn a_depthwise_convolution_takes_a_multiply_add_per_output_block_and_tap() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[16,32,32,128]{3,2,1,0} parameter(0)\n  \
        k = bf16[3,3,1,128]{3,2,1,0} parameter(1)\n  \
        ROOT y = bf16[16,32,32,128]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1}, \
        dim_labels=b01f_01io->b01f, feature_group_count=128\n}\n";
    for (chip, floor) in [
        ("v5e", 41_472),
        ("v6e", 41_472),
        ("tpu7x", 41_472),
        ("v4", 41_472),
        ("v5p", 20_736),
    ] {
        let model = ChipModel::preset(chip).unwrap();
        let hp = params(chip);
        let c = cost_on(text, chip);
        let k = mxu_kernel(&c);
        assert_eq!(k.cycles, mxu_launch(&model, &hp) + floor, "{chip}");
    }
}
