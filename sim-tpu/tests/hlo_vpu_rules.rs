//! `tpusim hlo` rules for vector-bound programs (softmax cross-entropy, norms), read off the compiler corpus's
//! optimized modules (testdata/hlo/corpus/, tools/corpus/). Each module is written by hand here, with its expected
//! kernels and cycles worked out in the test.

use sim_tpu::hlo::{cost_module, hlo_params, HloModule, HloParams, KernelKind, ModuleCost};
use sim_tpu::tensorcore::ChipModel;

mod support;
use support::hlo::cost_on;

const REDUCERS: &str = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
                        max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] maximum(a, b)\n}\n\n";

/// The installed fused-kernel constants of `chip`, with the chip's stream rate, as `cost_module` uses them.
fn params(chip: &str) -> (ChipModel, HloParams) {
    let c = ChipModel::preset(chip).unwrap();
    let mut hp = hlo_params().into_iter().find(|h| h.name == chip).unwrap();
    hp.hbm_bytes_per_cycle = c.hbm.hlo_stream_bytes_per_cycle;
    (c, hp)
}

/// A log-softmax over f32 logits `h w` (f32[512,16] x [16,16384] -> [512,16384], 32 MiB): the logits are 25.6
/// times the operands' padded bytes (h: 512 x 128 lanes x 4 B = 256 KiB; w: 16 x 16384 x 4 B = 1 MiB), more than
/// the grouping's recompute ratio of 8, and their rows (16,384) are longer than one window holds (8,192), but the
/// log-softmax is their only consumer, so one kernel computes them: the compiler still makes three passes
/// (softmax_xent.014 on v5e, f32 logits [8320,8897] 8.4 times their operands: the dot with the row max, `exp`
/// and its sum, the subtraction, 1.0, 1.35 and 1.35 M cycles; tpusim's one kernel cost 1.55 M for all three).
/// So three kernels, as for small logits.
///
/// On v4 (2 MiB of VMEM for intermediates) the logits go to HBM. The last kernel, `logits - max - log(sum)`,
/// reads the logits and writes the result: 2 x 32 MiB = 67,108,864 padded bytes. Its 8,192 blocks of 1,024
/// elements stream two full-size arrays and broadcast two per-row vectors along the rows, so it costs the loop
/// launch plus the longer of its DMA (67,108,864 B at the stream rate) and its loop pipeline (8,192 x
/// (`loop_block_cycles` + 2 `stream_block_cycles`)), plus 8,192 `row_block_cycles` of cross-lane work. Before
/// the rule the module was one MXU kernel.
#[test]
fn a_large_matmul_result_one_kernel_computes_is_split_into_passes() {
    let text = format!(
        "HloModule m\n\n{REDUCERS}ENTRY main {{\n  h = f32[512,16]{{1,0}} parameter(0)\n  \
         w = f32[16,16384]{{1,0}} parameter(1)\n  \
         x = f32[512,16384]{{1,0}} dot(h, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         ninf = f32[] constant(-inf)\n  zero = f32[] constant(0)\n  \
         m = f32[512]{{0}} reduce(x, ninf), dimensions={{1}}, to_apply=max\n  \
         mb = f32[512,16384]{{1,0}} broadcast(m), dimensions={{0}}\n  sh = f32[512,16384]{{1,0}} subtract(x, mb)\n  \
         e = f32[512,16384]{{1,0}} exponential(sh)\n  s = f32[512]{{0}} reduce(e, zero), dimensions={{1}}, to_apply=add\n  \
         l = f32[512]{{0}} log(s)\n  lb = f32[512,16384]{{1,0}} broadcast(l), dimensions={{0}}\n  \
         ROOT ls = f32[512,16384]{{1,0}} subtract(sh, lb)\n}}\n"
    );
    let c = cost_on(&text, "v4");
    let kinds: Vec<KernelKind> = c.kernels.iter().map(|k| k.kind).collect();
    assert_eq!(
        kinds,
        [KernelKind::Mxu, KernelKind::Reduce, KernelKind::Loop],
        "{:#?}",
        c.kernels
    );
    let last = &c.kernels[2];
    assert!(last.instructions.iter().any(|i| i == "ls"), "{:?}", last.instructions);
    let bytes = 2 * 512 * 16384 * 4u64;
    assert_eq!(last.hbm_bytes, bytes);
    let (chip, hp) = params("v4");
    let blocks = 512.0 * 16384.0 / 1024.0;
    let dma = bytes as f64 / hp.hbm_bytes_per_cycle;
    let pipeline = blocks * (hp.loop_block_cycles + 2.0 * hp.stream_block_cycles);
    let rows = blocks * hp.row_block_cycles;
    let want = chip.loop_launch_cycles() + (dma.max(pipeline) + rows).round() as u64;
    assert_eq!(last.cycles, want, "{last:?}");
}

/// The same log-softmax over bf16 logits [128,1024] on v5e, whose 112 MiB VMEM budget holds every intermediate,
/// summed over its rows (`dimensions={0}`, f32[1024], 4 KiB) so that no full-size array leaves the chip. The last
/// pass, `logits - max - log(sum)` and that sum, counts blocks only for its reduction (128 blocks of
/// f32[128,1024] at the on-chip op rate `mxu_fused_op_cycles`). The compiler's kernel over VMEM arrays passes
/// every block of its largest array through the vector unit at least once (softmax_xent.018 on v5e, bf16 logits
/// [151,4480]: its elementwise-only pass costs 5,553 cycles, 5.6 per block over the launch, where tpusim had the
/// launch alone): 128 blocks at the loop kernel's `fused_op_cycles` (5.3 on v5e) at least, after the launch.
#[test]
fn a_loop_kernel_over_vmem_arrays_passes_each_block_once() {
    let text = format!(
        "HloModule m\n\n{REDUCERS}ENTRY main {{\n  h = bf16[128,512]{{1,0}} parameter(0)\n  \
         w = bf16[512,1024]{{1,0}} parameter(1)\n  \
         d = bf16[128,1024]{{1,0}} dot(h, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         x = f32[128,1024]{{1,0}} convert(d)\n  ninf = f32[] constant(-inf)\n  zero = f32[] constant(0)\n  \
         m = f32[128]{{0}} reduce(x, ninf), dimensions={{1}}, to_apply=max\n  \
         mb = f32[128,1024]{{1,0}} broadcast(m), dimensions={{0}}\n  sh = f32[128,1024]{{1,0}} subtract(x, mb)\n  \
         e = f32[128,1024]{{1,0}} exponential(sh)\n  s = f32[128]{{0}} reduce(e, zero), dimensions={{1}}, to_apply=add\n  \
         l = f32[128]{{0}} log(s)\n  lb = f32[128,1024]{{1,0}} broadcast(l), dimensions={{0}}\n  \
         ls = f32[128,1024]{{1,0}} subtract(sh, lb)\n  \
         ROOT cs = f32[1024]{{0}} reduce(ls, zero), dimensions={{0}}, to_apply=add\n}}\n"
    );
    let c = cost_on(&text, "v5e");
    let pass = c
        .kernels
        .iter()
        .find(|k| k.instructions.iter().any(|i| i == "cs"))
        .unwrap_or_else(|| panic!("no kernel computing cs: {:#?}", c.kernels));
    assert_eq!(pass.kind, KernelKind::Reduce);
    assert!(pass.instructions.iter().any(|i| i == "ls"), "{:?}", pass.instructions);
    // Only the 4 KiB sum is written.
    assert_eq!(pass.hbm_bytes, 4096, "{pass:?}");
    let (chip, hp) = params("v5e");
    let reduce = 128.0 * hp.mxu_fused_op_cycles.unwrap_or(hp.fused_op_cycles);
    let want = chip.loop_launch_cycles() + reduce.max(128.0 * hp.fused_op_cycles).round() as u64;
    assert_eq!(pass.cycles, want, "{pass:?}");
}

/// A label gather from a log-softmax returned by an inlined call (jax's `take_along_axis` over
/// `log_softmax(logits)`, each a call: softmax_xent.023): the gather, in the second call, reads its table
/// through the first call's tuple.
/// The compiler's gather reads only the rows it gathers (its kernel carries no estimate in softmax_xent.023's
/// module); tpusim charged the whole f32[256,4096] table (4 MiB) at the HBM rate. On v4 (2 MiB of VMEM for
/// intermediates) the table is in HBM. The gather of 256 scalars
/// (f32[256,1]: 256 rows x 128 lanes x 4 B = 128 KiB padded) and its s32[256,1,1] indices costs the launch
/// plus its indices and twice its result at the stream rate, well under the table's 4 MiB.
#[test]
fn a_gather_through_a_calls_tuple_reads_only_its_rows() {
    let text = "HloModule m\n\nsq {\n  p = f32[256,4096]{1,0} parameter(0)\n  y = f32[256,4096]{1,0} multiply(p, p)\n  \
                ROOT t = (f32[256,4096]{1,0}, f32[256,4096]{1,0}) tuple(y, p)\n}\n\n\
                take {\n  a = f32[256,4096]{1,0} parameter(0)\n  j = s32[256,1,1]{2,1,0} parameter(1)\n  \
                ROOT g = f32[256,1]{1,0} gather(a, j), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, \
                operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}\n}\n\n\
                ENTRY main {\n  x = f32[256,4096]{1,0} parameter(0)\n  i = s32[256,1,1]{2,1,0} parameter(1)\n  \
                c = (f32[256,4096]{1,0}, f32[256,4096]{1,0}) call(x), to_apply=sq\n  \
                y = f32[256,4096]{1,0} get-tuple-element(c), index=0\n  \
                ROOT r = f32[256,1]{1,0} call(y, i), to_apply=take\n}\n";
    let chip = ChipModel::preset("v4").unwrap();
    let c: ModuleCost = cost_module(&HloModule::parse(text).unwrap(), &chip).unwrap();
    let g = c
        .kernels
        .iter()
        .find(|k| k.kind == KernelKind::Unmodelled)
        .unwrap_or_else(|| panic!("no gather kernel: {:#?}", c.kernels));
    let (chip, hp) = params("v4");
    let table = 256.0 * 4096.0 * 4.0;
    // Indices s32[256,1,1] and the result f32[256,1], each at most 256 rows of one 128-lane tile row.
    let small = 3.0 * 256.0 * 128.0 * 4.0;
    let most = chip.loop_launch_cycles() + (small / hp.hbm_bytes_per_cycle).ceil() as u64;
    assert!(g.cycles <= most, "{} cycles, at most {most}: {g:?}", g.cycles);
    assert!(
        (g.cycles as f64) < table / hp.hbm_bytes_per_cycle,
        "{} cycles: the table is read whole",
        g.cycles
    );
}

const BF16_ADD: &str =
    "addh {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT s = bf16[] add(a, b)\n}\n\n";

/// jax's bf16 `sum` of bf16[1536,8] over its rows: widened to f32, reduced, narrowed back to bf16[8] (corpus
/// reduction.007). The compiler drops both converts and emits one `reduce` of the bf16 array (2,173 cycles on
/// v6e, one launch), so tpusim's kernel is exactly the module the compiler optimizes it to, a single bf16
/// reduce: one kernel, the same cycles. Its bytes by hand: the compiler lays bf16[1536,8] out rows-on-lanes,
/// 8 rows (one (8,128) tile row with two bf16 packed per 32-bit word) x 1536 lanes x 2 B = 24,576 B read, and
/// the bf16[8] result pads to one 256-element tile, 512 B written. Before the rule the narrowing convert was a
/// second kernel of its own launch (2,118 cycles), twice the compiler's total.
#[test]
fn a_widened_reduction_narrowed_back_is_one_narrow_reduce() {
    let widened = format!(
        "HloModule m\n\n{REDUCERS}ENTRY main {{\n  x = bf16[1536,8]{{1,0}} parameter(0)\n  \
         c = f32[1536,8]{{1,0}} convert(x)\n  z = f32[] constant(0)\n  \
         s = f32[8]{{0}} reduce(c, z), dimensions={{0}}, to_apply=add\n  ROOT o = bf16[8]{{0}} convert(s)\n}}\n"
    );
    let narrow = format!(
        "HloModule m\n\n{BF16_ADD}ENTRY main {{\n  x = bf16[1536,8]{{1,0}} parameter(0)\n  \
         z = bf16[] constant(0)\n  ROOT s = bf16[8]{{0}} reduce(x, z), dimensions={{0}}, to_apply=addh\n}}\n"
    );
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let w = cost_on(&widened, chip);
        let n = cost_on(&narrow, chip);
        assert_eq!(w.kernels.len(), 1, "{chip}: {:?}", w.kernels);
        assert_eq!(w.kernels[0].kind, KernelKind::Reduce);
        assert_eq!(w.kernels[0].hbm_bytes, 24_576 + 512, "{chip}");
        assert_eq!(w.total_cycles, n.total_cycles, "{chip}");
    }
    let v6e = cost_on(&widened, "v6e").total_cycles as f64;
    assert!(
        (v6e / 2173.0).max(2173.0 / v6e) < 1.1,
        "{v6e} cycles against the compiler's 2,173"
    );
}

/// The rule needs both converts: a reduction of an f32 array (not widened) narrowed to bf16 keeps its convert
/// a kernel of its own (corpus moe_routing.000 on v6e: `reduce_max` of f32 router probabilities, then a
/// `convert` kernel of 2,120 cycles).
#[test]
fn a_reduction_of_a_wide_array_keeps_its_narrowing_convert_apart() {
    let text = format!(
        "HloModule m\n\n{REDUCERS}ENTRY main {{\n  x = f32[397,8]{{1,0}} parameter(0)\n  \
         z = f32[] constant(0)\n  s = f32[397]{{0}} reduce(x, z), dimensions={{1}}, to_apply=max\n  \
         ROOT o = bf16[397]{{0}} convert(s)\n}}\n"
    );
    assert_eq!(cost_on(&text, "v6e").kernels.len(), 2);
}

const BF16_MAX: &str =
    "maxh {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT s = bf16[] maximum(a, b)\n}\n\n";

/// A max over dim 0 of bf16[557,128,2] laid out `{1,2,0:T(2,128)(2,1)}` (corpus reduction.022, the layout the
/// compiler gives it): 557 tiles of 2 x 128 = 256 elements, a quarter of a vreg each, but each takes one vreg
/// operation, so the vector work is 557 vregs, not the 557 x 256 / 1,024 = 139.25 the padded count makes. The
/// same reduction over bf16[557,8,128] in full (8,128) tiles (1,024 elements each, 557 vregs) is the same
/// vector work; both arrays (285 KiB and 1.1 MiB) are under every chip's resident limit, where the op model's
/// time is the launch plus vregs times its resident rate, so the two cost the same cycles on every chip. The
/// compiler: 4,709 cycles on v6e, 3,628 on tpu7x (tpusim had 2,788 and 2,624 before the rule).
#[test]
fn a_tile_smaller_than_a_vreg_costs_a_whole_vreg() {
    let module = |input: &str, out: &str| {
        format!(
            "HloModule m\n\n{BF16_MAX}ENTRY main {{\n  x = {input} parameter(0)\n  z = bf16[] constant(-inf)\n  \
             ROOT r = {out} reduce(x, z), dimensions={{0}}, to_apply=maxh\n}}\n"
        )
    };
    let quarter = module("bf16[557,128,2]{1,2,0:T(2,128)(2,1)}", "bf16[128,2]{0,1:T(2,128)(2,1)}");
    let full = module("bf16[557,8,128]{2,1,0:T(8,128)(2,1)}", "bf16[8,128]{1,0:T(8,128)(2,1)}");
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let q = cost_on(&quarter, chip);
        assert_eq!(q.kernels.len(), 1);
        assert_eq!(q.kernels[0].hbm_bytes, 557 * 256 * 2 + 128 * 2 * 2, "{chip}");
        assert_eq!(q.total_cycles, cost_on(&full, chip).total_cycles, "{chip}");
    }
    for (chip, compiler) in [("v6e", 4709.0), ("tpu7x", 3628.0)] {
        let c = cost_on(&quarter, chip).total_cycles as f64;
        assert!(
            (c / compiler).max(compiler / c) < 1.1,
            "{chip}: {c} against the compiler's {compiler}"
        );
    }
}
