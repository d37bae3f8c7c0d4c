//! `tpusim hlo` rules read off the compiler corpus's optimized modules (testdata/hlo/corpus/, tools/corpus/):
//! loop kernels pay the whole launch, and a convolution result leaving the program is relayouted. Each module is
//! written by hand here, with its expected kernels and cycles worked out in the test.

use sim_tpu::hlo::KernelKind;
use sim_tpu::tensorcore::{cost, ChipModel, OpSpec};

mod support;
use support::hlo::{cost_on, dot_module};

/// `(x + y) * x` on f32[8,128]: one loop kernel. The compiler's estimate of such a kernel is its fixed launch
/// (corpus record elementwise.001@v6e, one f32[128,7] tanh: 2,124 cycles; the smallest of 253 kLoop fusions
/// on v6e is 2,116). The body streams two 4 KiB inputs and a 4 KiB output: 12,288 bytes, under 40 cycles at
/// any v6e HBM rate above 300 B/cycle, plus one block of vector work (under 40 cycles at the fitted per-block
/// bounds). Before the rule the launch was scaled by the fitted launch_factor (0.314 on v6e: 664 cycles).
#[test]
fn a_small_loop_kernel_pays_the_whole_launch() {
    let text =
        "HloModule m\n\nENTRY main {\n  x = f32[8,128]{1,0} parameter(0)\n  y = f32[8,128]{1,0} parameter(1)\n  \
                s = f32[8,128]{1,0} add(x, y)\n  ROOT p = f32[8,128]{1,0} multiply(s, x)\n}\n";
    for (chip, launch) in [
        ("v4", 611u64),
        ("v5e", 1818),
        ("v5p", 2117),
        ("v6e", 2116),
        ("tpu7x", 2296),
    ] {
        let c = cost_on(text, chip);
        assert_eq!(c.kernels.len(), 1, "{chip}");
        assert_eq!(c.kernels[0].kind, KernelKind::Loop);
        // `launch`: the smallest kLoop estimate of the chip in the corpus; the op model's launch is within 1%.
        let cyc = c.total_cycles;
        assert!(
            cyc as f64 >= launch as f64 * 0.99 && cyc <= launch + 80,
            "{chip}: {cyc} cycles, expected the launch {launch} plus under 80"
        );
    }
}

/// A 1x1 convolution f32[9,2,8,128] x f32[1,1,128,128] whose result is the program's output: the convolution
/// kernel, then a copy of the result into the entry's row-major layout. The copy moves the result's padded
/// bytes in and out: 9 x 2 x 8 x 128 x 4 B = 73,728 B each way (every dimension already tile-aligned; a batch of 9,
/// so no input copy, and not a multiple of 8, whose result would keep the convolution's layout:
/// tests/hlo_conv_rules.rs). The copy keeps the 128 channels in the lanes and moves rows only, so it costs the op
/// model's row relayout of as many elements: its launch, then 9 x 2 x 8 x 128 = 18,432 elements = 18 blocks of
/// 1024 at `row_relayout` each (tests/hlo_conv_rules.rs).
#[test]
fn a_convolution_result_leaving_the_program_is_relayouted() {
    let text = "HloModule m\n\nENTRY main {\n  x = f32[9,2,8,128]{3,2,1,0} parameter(0)\n  \
                w = f32[1,1,128,128]{3,2,1,0} parameter(1)\n  \
                ROOT c = f32[9,2,8,128]{3,2,1,0} convolution(x, w), window={size=1x1}, dim_labels=b01f_01io->b01f\n}\n";
    let chip = ChipModel::preset("v5e").unwrap();
    let c = cost_on(text, "v5e");
    assert_eq!(c.kernels.len(), 2, "{:?}", c.kernels);
    assert_eq!(c.kernels[0].kind, KernelKind::Mxu);
    let r = &c.kernels[1];
    assert_eq!(r.kind, KernelKind::Loop);
    assert_eq!(r.hbm_bytes, 2 * 73_728);
    let p = &chip.params;
    assert_eq!(
        r.cycles,
        p.launch_cycles.round() as u64 + (18.0 * p.row_relayout).round() as u64
    );
    assert_eq!(c.total_cycles, c.kernels[0].cycles + r.cycles);
}

/// The same convolution feeding a reduction: its result never leaves the program in row-major layout, so no copy.
#[test]
fn a_convolution_result_used_inside_the_program_is_not_relayouted() {
    let text =
        "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
                ENTRY main {\n  x = f32[8,2,8,128]{3,2,1,0} parameter(0)\n  \
                w = f32[1,1,128,128]{3,2,1,0} parameter(1)\n  \
                c = f32[8,2,8,128]{3,2,1,0} convolution(x, w), window={size=1x1}, dim_labels=b01f_01io->b01f\n  \
                z = f32[] constant(0)\n  ROOT r = f32[128]{0} reduce(c, z), dimensions={0,1,2}, to_apply=add\n}\n";
    let c = cost_on(text, "v5e");
    assert!(
        c.kernels.iter().all(|k| !k.name.ends_with(".relayout")),
        "{:?}",
        c.kernels
    );
}

const ADD: &str = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n";

/// A bf16[640,11] array summed in f32 and converted back to a bf16 scalar (corpus program reduction.005): the
/// compiler emits one `reduce` kernel, 2,163 cycles on v6e, one launch (2,116) and the 640 x 11 input: 640
/// rows x 128 padded lanes x 2 B = 160 KiB at v6e's HBM rate of 935 B/cycle is 175 cycles, and the reduction
/// hides under it or under the launch. The convert of the scalar is part of that kernel, not a second launch.
#[test]
fn a_scalar_reductions_epilogue_is_part_of_its_kernel() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = bf16[640,11]{{1,0}} parameter(0)\n  \
         c = f32[640,11]{{1,0}} convert(x)\n  z = f32[] constant(0)\n  \
         s = f32[] reduce(c, z), dimensions={{0,1}}, to_apply=add\n  ROOT o = bf16[] convert(s)\n}}\n"
    );
    let c = cost_on(&text, "v6e");
    assert_eq!(c.kernels.len(), 1, "{:?}", c.kernels);
    assert_eq!(c.kernels[0].kind, KernelKind::Reduce);
    let err = (c.total_cycles as f64 / 2163.0).max(2163.0 / c.total_cycles as f64) - 1.0;
    assert!(err < 0.25, "{} cycles against the compiler's 2,163", c.total_cycles);
}

/// A row-wise reduction (f32[12,1664] to f32[12]) followed by an rsqrt of the row values: the compiler keeps the
/// rsqrt a kernel of its own (corpus norm.015 on v6e: 2,122 cycles apart from its reduce), so two kernels.
#[test]
fn a_row_reductions_epilogue_keeps_its_own_kernel() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[12,1664]{{1,0}} parameter(0)\n  z = f32[] constant(0)\n  \
         s = f32[12]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add\n  ROOT r = f32[12]{{0}} rsqrt(s)\n}}\n"
    );
    let c = cost_on(&text, "v6e");
    assert_eq!(c.kernels.len(), 2, "{:?}", c.kernels);
}

/// Integer scalar arithmetic (a loop counter's `s32[] add(i, 1)`) runs on the scalar unit: no kernel launch
/// (corpus scan.017 on v6e: the loop body's 2,551 cycles are its one loop fusion's; the counter carries no
/// estimate). A float scalar op is vector work and keeps its kernel and launch.
#[test]
fn integer_scalar_arithmetic_costs_no_kernel() {
    let int = "HloModule m\n\nENTRY main {\n  i = s32[] parameter(0)\n  one = s32[] constant(1)\n  \
               ROOT n = s32[] add(i, one)\n}\n";
    assert_eq!(cost_on(int, "v6e").total_cycles, 0);
    let float = "HloModule m\n\nENTRY main {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  \
                 ROOT s = f32[] add(x, y)\n}\n";
    // The launch alone: v6e's smallest loop-kernel estimate in the corpus is 2,116 cycles.
    assert!(cost_on(float, "v6e").total_cycles >= 2_095);
}

/// Softmax over attention scores kept in VMEM (corpus program attention.007: B 26, H 1, S 136, causal, f32):
/// the kernel computing exp and the row sum streams nothing from HBM, so it costs its vector work at the MXU
/// epilogue's rate, not the HBM loop pipeline. Scores f32[26,1,136,136] take the row-major TPU layout (T(8,128)
/// on the 136 x 136 minor dimensions): 26 x 136 x 256 = 905,216 padded elements = 884 blocks of 1,024; exp and
/// the sum's input are 2 x 884 = 1,768 op blocks; plus the launch. (The compiler's loop kernel for the exp and
/// sum over the VMEM-resident scores: 17,919 cycles on v5e. With bf16 scores, as attention.017 used here before,
/// the exp and sum now join the scores' MXU kernel: `hlo_attention_rules.rs`.)
#[test]
fn a_softmax_over_scores_in_vmem_costs_its_vector_work_only() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/hlo/corpus/hlo/attention.007.hlo.txt.gz");
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&std::fs::read(path).unwrap()[..]),
        &mut text,
    )
    .unwrap();
    let c = cost_on(&text, "v5e");
    let k = c
        .kernels
        .iter()
        .find(|k| k.instructions.iter().any(|i| i == "exp.1"))
        .expect("a kernel computes exp.1");
    assert_eq!(k.hbm_bytes, 0, "{k:?}");
    let hp = sim_tpu::hlo::hlo_params()
        .into_iter()
        .find(|h| h.name == "v5e")
        .unwrap();
    let rate = hp.mxu_fused_op_cycles.unwrap_or(hp.fused_op_cycles);
    let launch = ChipModel::preset("v5e").unwrap().params.launch_cycles.round();
    let expected = launch + (1_768.0 * rate).round();
    assert!(
        (k.cycles as f64 - expected).abs() <= 1.0,
        "{} cycles, expected {expected}",
        k.cycles
    );
}

/// A vector times a matrix, bf16 [1,1536] x [1536,768] (corpus program decode_matmul.003): on v4-v6e the
/// compiler emits a multiply-reduce loop fusion, 12,365 of the program's 16,696 cycles on v6e, beside the
/// vector's `reduce` and the result's `reshape` relayout kernels; tpusim costs the fusion as the op model's
/// matrix-vector kernel plus the two relayouts (`hlo::matvec`), within 10% of `tpusim op`'s three kernels on
/// that matmul and of the compiler's program total (the MXU window plan gave 4,228, 4x under). tpu7x runs it
/// on the MXU.
#[test]
fn a_vector_times_a_matrix_is_a_vpu_kernel_below_tpu7x() {
    let text =
        "HloModule m\n\nENTRY main {\n  x = bf16[1,1536]{1,0} parameter(0)\n  w = bf16[1536,768]{1,0} parameter(1)\n  \
                ROOT d = bf16[1,768]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    let op = OpSpec::from_json(r#"{"op":"matmul","params":{"M":1,"K":1536,"N":768,"dtype":"bfloat16"}}"#).unwrap();
    for chip in ["v4", "v5e", "v5p", "v6e"] {
        let c = cost_on(text, chip);
        assert_eq!(c.kernels.len(), 1, "{chip}");
        assert_eq!(c.kernels[0].kind, KernelKind::Loop, "{chip}");
        let model = ChipModel::preset(chip).unwrap();
        // The op model costs the vector's reduce, the fused multiply-reduce and the result's reshape as three
        // kernels; the hlo model folds the relayouts into the one kernel.
        let op_cost = cost(&op, &model).unwrap();
        let multiply_reduce = op_cost.kernels.iter().find(|k| k.name == "loop fusion").unwrap();
        let (hlo, op) = (c.total_cycles as f64, op_cost.cycles as f64);
        assert!(
            c.total_cycles > multiply_reduce.cycles,
            "{chip}: the relayouts cost something"
        );
        assert!((hlo / op).max(op / hlo) - 1.0 < 0.1, "{chip}: hlo {hlo}, op {op}");
    }
    let v6e = cost_on(text, "v6e").total_cycles as f64;
    assert!((v6e / 16_696.0).max(16_696.0 / v6e) - 1.0 < 0.1, "{v6e}");
    assert_eq!(cost_on(text, "tpu7x").kernels[0].kind, KernelKind::Mxu);
}

/// A matrix times two vectors, bf16 [28416,256] x [256,2] (corpus program matvec.009): the compiler lays the
/// result out as [28416,2]{0,1}, computing the transposed product [2,256] x [256,28416] (same MXU passes), not
/// 28,416 result rows padded to 128 lanes (62,675 cycles on v4 before the rule, against the compiler's 13,319).
/// The matrix, row-major [28416,256], is then the stationary operand with its contracting dim minor, so it goes
/// through the transpose unit (`hlo::mxu_layout`) where the row-major [256,28416] of the written-out transpose
/// does not: the skinny product costs at least its transpose and at most 1.5 times it, and within 12 % of the
/// compiler's 13,319 on v4 (12,043 since v4's op refit with the int8 tiling rule lowered its MXU launch from
/// 1,527 to 1,438 cycles; 10 % before).
#[test]
fn a_matrix_times_a_few_vectors_costs_its_transpose() {
    let skinny = dot_module("bf16[28416,256]{1,0}", "bf16[256,2]{1,0}", "bf16[28416,2]{1,0}");
    let wide = dot_module("bf16[2,256]{1,0}", "bf16[256,28416]{1,0}", "bf16[2,28416]{1,0}");
    for chip in ["v4", "v5e", "v6e"] {
        let (s, w) = (
            cost_on(&skinny, chip).total_cycles as f64,
            cost_on(&wide, chip).total_cycles as f64,
        );
        assert!(s >= w && s <= 1.5 * w, "{chip}: {s} against its transpose's {w}");
    }
    let v4 = cost_on(&skinny, "v4").total_cycles as f64;
    assert!((v4 / 13_319.0).max(13_319.0 / v4) - 1.0 < 0.12, "{v4}");
}

/// Cross-program prefetch: the largest entry parameter a matmul reads that fits the chip's prefetch budget (v5e:
/// 112 MiB, VMEM 128 MiB less the 16 MiB scoped window) is on chip before the program starts. bf16
/// [2,256] x [256,28416]: the 14,548,992-byte matrix (256 x 28,416 x 2 B) is not HBM traffic of the kernel; the
/// rest is the [2,256] vector (1,024 B) and the [2,28416] result (113,664 B), both unpadded in the TPU layout
/// of two rows, T(2,128) (`tpusim layout`). A 256 MiB matrix ([1024,131072]) does not fit and is streamed.
#[test]
fn the_largest_matmul_parameter_that_fits_is_prefetched() {
    let fits = cost_on(
        &dot_module("bf16[2,256]{1,0}", "bf16[256,28416]{1,0}", "bf16[2,28416]{1,0}"),
        "v5e",
    );
    assert_eq!(fits.kernels[0].hbm_bytes, 1_024 + 113_664);
    let big = cost_on(
        &dot_module("bf16[2,1024]{1,0}", "bf16[1024,131072]{1,0}", "bf16[2,131072]{1,0}"),
        "v5e",
    );
    assert!(
        big.kernels[0].hbm_bytes >= 1024 * 131_072 * 2,
        "{}",
        big.kernels[0].hbm_bytes
    );
}

fn conv_module(dtype: &str, n: u64, w: u64) -> String {
    format!(
        "HloModule m\n\nENTRY main {{\n  x = {dtype}[{n},16,{w},128]{{3,2,1,0}} parameter(0)\n  \
         k = {dtype}[1,1,128,128]{{3,2,1,0}} parameter(1)\n  \
         ROOT c = {dtype}[{n},16,{w},128]{{3,2,1,0}} convolution(x, k), window={{size=1x1}}, dim_labels=b01f_01io->b01f\n}}\n"
    )
}

/// A convolution reading a batch of 2 images 16 wide straight from a parameter: the compiler first copies the
/// input with the batch inside the spatial dimensions (corpus conv.026, .018, .009, .000 in bf16, conv.005 in
/// f32), pads it to the window (not here: an unpadded 1x1 window over 16 columns, whole 8-row tiles, needs none,
/// tests/hlo_conv_rules.rs), and writes the result windowed, cropped back by one more pass (conv.013 on v6e:
/// pad 279,125 cycles, crop 315,055): four kernels, input copy, convolution, crop, output copy. The bf16
/// input copy moves 2 x 16 x 16 x 128 x 2 B = 131,072 B in and out (tile-aligned), the f32 one twice that; the
/// result has the input's shape here, so every copy moves as much. One image is copied too (conv.020, .031,
/// .032). No input copy: a batch of 8 or more, which fills a tile's rows (conv.006 N 32, .033 N 53: one fusion),
/// 7-wide images (conv.008), and a 1x1 window of stride 2 over an even width (conv.023, .025).
#[test]
fn a_convolution_input_with_a_small_batch_is_relayouted_first() {
    for (dtype, n, bytes) in [("bf16", 2, 131_072u64), ("f32", 2, 262_144), ("bf16", 1, 65_536)] {
        let c = cost_on(&conv_module(dtype, n, 16), "v5e");
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["x.relayout", "c", "c.crop", "c.relayout"], "{dtype} N {n}");
        // Input and result have the same padded bytes here; each copy moves its array in and out.
        for i in [0, 2, 3] {
            assert_eq!(c.kernels[i].hbm_bytes, 2 * bytes, "{dtype} N {n}: {}", names[i]);
        }
        assert_eq!(c.kernels[1].kind, KernelKind::Mxu);
    }
    for (dtype, n, w) in [("bf16", 8, 16), ("f32", 32, 16), ("bf16", 2, 7)] {
        let c = cost_on(&conv_module(dtype, n, w), "v5e");
        // The convolution, and an output copy unless the batch is a multiple of 8 (tests/hlo_conv_rules.rs).
        let kernels = if n % 8 == 0 { 1 } else { 2 };
        assert_eq!(c.kernels.len(), kernels, "{dtype} N {n} W {w}: {:?}", c.kernels);
        assert_ne!(c.kernels[0].name, "x.relayout");
    }
    // 1x1, stride 2: bf16[2,16,16,128] -> bf16[2,8,8,128]; the input is subsampled, not relayouted.
    let strided = "HloModule m\n\nENTRY main {\n  x = bf16[2,16,16,128]{3,2,1,0} parameter(0)\n  \
                   k = bf16[1,1,128,128]{3,2,1,0} parameter(1)\n  \
                   ROOT c = bf16[2,8,8,128]{3,2,1,0} convolution(x, k), window={size=1x1 stride=2x2}, \
                   dim_labels=b01f_01io->b01f\n}\n";
    let c = cost_on(strided, "v5e");
    assert!(c.kernels.iter().all(|k| k.name != "x.relayout"), "{:?}", c.kernels);
}

/// A gather of 256 rows from a bf16[5754,100] table (corpus program embedding.001): the table (1,198,080 padded
/// bytes in its TPU layout, `tpusim layout`) fits on chip, so the compiler copies it there first and copies the
/// gathered rows (53,248 padded bytes) to row-major after: three kernels, each copy moving its array in and out.
/// A table over the chip's on-chip budget (v5e: 112 MiB; bf16[1048576,100], 208 MiB) is gathered in place.
#[test]
fn a_gather_from_a_table_that_fits_on_chip_copies_it_there_first() {
    let gather = |rows: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  t = bf16[{rows},100]{{1,0}} parameter(0)\n  i = s32[256,1]{{1,0}} parameter(1)\n  \
             ROOT g = bf16[256,100]{{1,0}} gather(t, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, \
             start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,100}}\n}}\n"
        )
    };
    let c = cost_on(&gather(5754), "v5e");
    let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["t.relayout", "g", "g.relayout"]);
    assert_eq!(c.kernels[0].hbm_bytes, 2 * 1_198_080);
    assert_eq!(c.kernels[2].hbm_bytes, 2 * 53_248);
    assert_eq!(cost_on(&gather(1_048_576), "v5e").kernels.len(), 1);
}

/// A gather from a table at least one 128-lane row wide needs no copies: the compiler keeps its row-major entry
/// layout and gathers in place (corpus embedding.000, bf16[88182,256]; the reference sample's
/// softmax_xent.n512_v32768_fwdbwd_f32 picking each row's label from f32[512,32768] logits). The 100-wide table of
/// the test above, widened to 128 or 256 lanes, or the logits' per-element gather, is one kernel, the gather;
/// 127 lanes is still copied both ways.
#[test]
fn a_gather_from_a_table_a_lane_row_wide_or_wider_is_not_copied() {
    let rows = |width: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  t = bf16[5754,{width}]{{1,0}} parameter(0)\n  i = s32[256,1]{{1,0}} parameter(1)\n  \
             ROOT g = bf16[256,{width}]{{1,0}} gather(t, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, \
             start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{width}}}\n}}\n"
        )
    };
    for (width, kernels) in [(127, 3), (128, 1), (256, 1)] {
        for chip in ["v4", "v5e", "v6e"] {
            let c = cost_on(&rows(width), chip);
            assert_eq!(c.kernels.len(), kernels, "{width} lanes on {chip}: {:?}", c.kernels);
        }
    }
    // take_along_axis: one element of each of 512 rows of f32[512,32768] (64 MiB, within v6e's on-chip budget).
    let elements = "HloModule m\n\nENTRY main {\n  t = f32[512,32768]{1,0} parameter(0)\n  \
                    i = s32[512,1,1]{2,1,0} parameter(1)\n  \
                    ROOT g = f32[512,1]{1,0} gather(t, i), offset_dims={}, collapsed_slice_dims={1}, \
                    start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, \
                    index_vector_dim=2, slice_sizes={1,1}\n}\n";
    for chip in ["v4", "v5e", "v6e"] {
        let names: Vec<String> = cost_on(elements, chip).kernels.iter().map(|k| k.name.clone()).collect();
        assert_eq!(names, ["g"], "{chip}");
    }
}

/// A dynamic-update-slice writes its [1,128,512] f32 update (262,144 B, tile-aligned) into a f32[199,128,512]
/// buffer in place: the kernel reads the update and writes it, 2 x 262,144 B of HBM traffic, not the 52 MB
/// buffer (corpus scan.011: 3,869 cycles per step on v5e for such a step).
#[test]
fn a_dynamic_update_slice_moves_only_its_update() {
    let text = "HloModule m\n\nENTRY main {\n  b = f32[199,128,512]{2,1,0} parameter(0)\n  u = f32[1,128,512]{2,1,0} parameter(1)\n  \
                z = s32[] constant(0)\n  ROOT d = f32[199,128,512]{2,1,0} dynamic-update-slice(b, u, z, z, z)\n}\n";
    let c = cost_on(text, "v5e");
    assert_eq!(c.kernels.len(), 1, "{:?}", c.kernels);
    assert_eq!(c.kernels[0].hbm_bytes, 2 * 262_144);
}

/// A kernel reading step `t`'s row of a stacked f32[199,128,512] input through a `dynamic-slice` (a `lax.scan`
/// step's `xs[t]`) reads that [1,128,512] row, 262,144 B (tile-aligned), and writes its tanh, 262,144 B: 524,288 B
/// of HBM traffic, not the 52 MB input (corpus scan.011 on v6e: 2,304 cycles per step in the compiler's body).
#[test]
fn a_kernel_reading_through_a_dynamic_slice_reads_only_the_window() {
    let text = "HloModule m\n\nENTRY main {\n  xs = f32[199,128,512]{2,1,0} parameter(0)\n  t = s32[] parameter(1)\n  \
                z = s32[] constant(0)\n  r = f32[1,128,512]{2,1,0} dynamic-slice(xs, t, z, z), dynamic_slice_sizes={1,128,512}\n  \
                ROOT h = f32[1,128,512]{2,1,0} tanh(r)\n}\n";
    let c = cost_on(text, "v5e");
    assert_eq!(c.kernels.len(), 1, "{:?}", c.kernels);
    // Beside the row and the result, only the s32[] index, at most one 512 B tile.
    let moved = c.kernels[0].hbm_bytes;
    assert!((2 * 262_144..=2 * 262_144 + 512).contains(&moved), "{moved} B moved");
}

/// A matmul f32[128,512] x f32[512,512] whose result is written by a `dynamic-update-slice` into row `t` of an
/// f32[199,128,512] buffer (a scan step storing its output): the epilogue writes the 262,144 B update in place,
/// not the 52 MB buffer. At v5e's datasheet HBM rate (819 GB/s at 1.5 GHz: 546 B per cycle) the update takes
/// 480 cycles, the buffer 95,600; so the kernel costs at most the plain matmul writing its own [128,512] result
/// plus 1,000 cycles.
#[test]
fn a_matmul_writing_through_a_dynamic_update_slice_writes_only_the_update() {
    let dus = "HloModule m\n\nENTRY main {\n  b = f32[199,128,512]{2,1,0} parameter(0)\n  h = f32[128,512]{1,0} parameter(1)\n  \
               w = f32[512,512]{1,0} parameter(2)\n  t = s32[] parameter(3)\n  z = s32[] constant(0)\n  \
               d = f32[128,512]{1,0} dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
               u = f32[1,128,512]{2,1,0} reshape(d)\n  \
               ROOT o = f32[199,128,512]{2,1,0} dynamic-update-slice(b, u, t, z, z)\n}\n";
    let plain =
        "HloModule m\n\nENTRY main {\n  h = f32[128,512]{1,0} parameter(0)\n  w = f32[512,512]{1,0} parameter(1)\n  \
                 ROOT d = f32[128,512]{1,0} dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    let (with_update, alone) = (cost_on(dus, "v5e"), cost_on(plain, "v5e"));
    assert_eq!(with_update.kernels.len(), 1, "{:?}", with_update.kernels);
    assert_eq!(with_update.kernels[0].kind, KernelKind::Mxu);
    assert!(
        with_update.total_cycles <= alone.total_cycles + 1_000,
        "{} cycles with the update, {} for the matmul alone",
        with_update.total_cycles,
        alone.total_cycles
    );
}

/// A decode-style matmul whose weight cannot be on chip: bf16[8,16384] x bf16[16384,16384], the weight
/// 536,870,912 B (tile-aligned), four times v6e's 128 MiB of VMEM and v4's 128 MiB of CMEM. The kernel streams it
/// from HBM at the compiler's rate, which the corpus shows at 774-848 B per cycle on v6e (HBM 935) and 419-440 on
/// v4 (decode_matmul.000, .004, .011, .016): so between 536,870,912 / 940 = 571,139 and / 700 = 766,958 cycles on
/// v6e, and between / 470 = 1,142,279 and / 400 = 1,342,177 on v4. The MXU's own work (2 x 8 x 16384^2 = 4.3
/// GFLOP) is under 30,000 cycles on either chip.
#[test]
fn a_matmul_weight_larger_than_on_chip_memory_streams_at_the_hbm_rate() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[8,16384]{1,0} parameter(0)\n  w = bf16[16384,16384]{1,0} parameter(1)\n  \
                ROOT d = bf16[8,16384]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    let bytes = 536_870_912f64;
    for (chip, fast, slow) in [("v6e", 940.0, 700.0), ("v4", 470.0, 400.0)] {
        let c = cost_on(text, chip);
        let cyc = c.total_cycles as f64;
        assert!(
            cyc >= bytes / fast && cyc <= bytes / slow,
            "{chip}: {cyc} cycles, expected {:.0}-{:.0}",
            bytes / fast,
            bytes / slow
        );
    }
}
