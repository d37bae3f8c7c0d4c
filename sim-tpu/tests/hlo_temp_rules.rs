//! `tpusim hlo`'s temp rules for values the compiler writes to HBM for one kernel only (`hlo::temp`), read off
//! the compiler corpus's optimized modules (/work/scratch-corpus/opt). Each module is written by hand here, with
//! its expected temp bytes worked out in the test.

use sim_tpu::hlo::{cost_module_with, hlo_params, HloModule, HloParams};
use sim_tpu::tensorcore::ChipModel;

/// One granule of the compiler's temp allocation.
const GRANULE: u64 = 16_384;

/// `chip`'s constants with a 64 MiB on-chip budget for temporaries (every kernel output of these modules fits),
/// a 40 KiB allocation overhead (which a rule's scratch must not bring in) and no row-reduction scratch, so a
/// test's temp is the rule's bytes alone.
fn bare(chip: &str) -> (ChipModel, HloParams) {
    let model = ChipModel::preset(chip).unwrap();
    let mut hp = hlo_params().into_iter().find(|h| h.name == chip).unwrap();
    hp.hbm_bytes_per_cycle = model.hbm.hlo_stream_bytes_per_cycle;
    hp.temp_fast_bytes = 64 << 20;
    hp.temp_overhead_bytes = 40_960;
    hp.temp_row_reduce_bytes = 0;
    (model, hp)
}

fn temp(text: &str, chip: &str) -> u64 {
    let (model, hp) = bare(chip);
    cost_module_with(&HloModule::parse(text).unwrap(), &model, &hp)
        .unwrap()
        .temp_bytes
}

/// `sum(x * x)` over an f32[128,1024] parameter as `r` (`root` its prefix: `ROOT ` or nothing), then
/// `epilogue`.
fn mean_square(root: &str, epilogue: &str) -> String {
    format!(
        "HloModule m\n\nadd_f {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         ENTRY main {{\n  x = f32[128,1024]{{1,0}} parameter(0)\n  sq = f32[128,1024]{{1,0}} multiply(x, x)\n  \
         zero = f32[] constant(0)\n  {root}r = f32[] reduce(sq, zero), dimensions={{0,1}}, to_apply=add_f\n  {epilogue}\n}}\n"
    )
}

/// The compiler ends a fusion at a reduction to a scalar: `r` (f32[], one 512-byte padded tile) is written to
/// HBM and the `/ N` reads it back (reduction.001 on every chip: `multiply_reduce_fusion = f32[]{:T(128)}` then
/// `multiply`, temp 16,384). tpusim's kernel holds both, so the scalar is scratch of that kernel: 512 B, one
/// granule, and no allocation overhead (the 40 KiB set here would make it 3 granules).
#[test]
fn a_scalar_reduction_read_by_its_epilogue_is_one_granule_in_hbm() {
    let div = mean_square("", "n = f32[] constant(131072)\n  ROOT d = f32[] divide(r, n)");
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        assert_eq!(temp(&div, chip), GRANULE, "{chip}");
    }
}

/// The same reduction as the program's result has no epilogue (reduction.002 on v6e, `max` over all axes as the
/// `ROOT`: temp 0), and a convert after it is folded into the reduction (reduction.005, a bf16 sum accumulated in
/// f32: one `reduce` to `bf16[]`, temp 0).
#[test]
fn a_scalar_reduction_without_an_epilogue_has_no_temporary() {
    let root = mean_square("ROOT ", "");
    let convert = mean_square("", "ROOT c = bf16[] convert(r)");
    for chip in ["v5p", "v6e"] {
        assert_eq!(temp(&root, chip), 0, "{chip}");
        assert_eq!(temp(&convert, chip), 0, "{chip}");
    }
}

/// `x [1,K] . w [K,768]`, M = 1, with `x` an entry parameter.
fn row_vector_product(dtype: &str, k: u64) -> String {
    format!(
        "HloModule m\n\nENTRY main {{\n  x = {dtype}[1,{k}]{{1,0}} parameter(0)\n  w = {dtype}[{k},768]{{1,0}} parameter(1)\n  \
         ROOT y = {dtype}[1,768]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    )
}

/// On v5p (two cores, no CMEM) the compiler relays a matrix-vector product's vector out to one dimension with a
/// `reduce` into HBM, padded to 1,024 elements: bf16 K = 1,536 is 2,048 x 2 = 4,096 B, one granule
/// (decode_matmul.003@v5p: `reduce.3 = bf16[1536]{0:T(1024)}`, temp 16,384); bf16 K = 12,252 is 12,288 x 2 =
/// 24,576 B, two granules (matvec.018@v5p: 32,768); f32 K = 8,211 is 9,216 x 4 = 36,864 B, three granules
/// (matvec.013@v5p: 49,152). An f32 vector of 3,072 elements (3 x 1,024) is only bitcast (matvec.012@v5p: temp 0).
/// Elsewhere the relaid-out vector is in VMEM: temp 0 (the same records on v6e).
#[test]
fn a_matvec_vector_is_relaid_out_in_hbm_on_v5p() {
    assert_eq!(temp(&row_vector_product("bf16", 1536), "v5p"), GRANULE);
    assert_eq!(temp(&row_vector_product("bf16", 12252), "v5p"), 2 * GRANULE);
    assert_eq!(temp(&row_vector_product("f32", 8211), "v5p"), 3 * GRANULE);
    assert_eq!(temp(&row_vector_product("f32", 3072), "v5p"), 0);
    for chip in ["v4", "v5e", "v6e"] {
        assert_eq!(temp(&row_vector_product("bf16", 1536), chip), 0, "{chip}");
    }
}

/// The vector on the right (`w [768,K] . v [K,1]`, N = 1) is relaid out the same way (matvec.001@v5p, K = 1,218
/// bf16: `reduce.2 = bf16[1218]{0:T(1024)}`, 2,048 x 2 = 4,096 B: one granule); a product with two columns is
/// not a matrix-vector product (matvec.000@v5p, N = 2: temp 0).
#[test]
fn a_column_vector_is_relaid_out_too() {
    let text = |n: u64| {
        format!(
            "HloModule m\n\nENTRY main {{\n  w = bf16[768,1218]{{1,0}} parameter(0)\n  v = bf16[1218,{n}]{{1,0}} parameter(1)\n  \
             ROOT y = bf16[768,{n}]{{1,0}} dot(w, v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
        )
    };
    assert_eq!(temp(&text(1), "v5p"), GRANULE);
    assert_eq!(temp(&text(2), "v5p"), 0);
}

/// `table [rows,cols]` gathered at 256 ids (`[256,1]`, one row each) into `[256,1,cols]`, then `exp` of the rows
/// as the program's result (so the rows are a temporary).
fn gather_rows(dtype: &str, rows: u64, cols: u64) -> String {
    format!(
        "HloModule m\n\nENTRY main {{\n  table = {dtype}[{rows},{cols}]{{1,0}} parameter(0)\n  ids = s32[256,1]{{1,0}} parameter(1)\n  \
         g = {dtype}[256,1,{cols}]{{2,1,0}} gather(table, ids), offset_dims={{1,2}}, collapsed_slice_dims={{}}, \
         start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{cols}}}\n  \
         ROOT e = {dtype}[256,1,{cols}]{{2,1,0}} exponential(g)\n}}\n"
    )
}

/// A gather's rows are written by both cores on v5p, so they are in HBM, and a table narrower than 128 lanes is
/// relaid out to row-major in HBM first (embedding.001@v5p: `copy = bf16[5754,100]{1,0:T(8,128)(2,1)}` and
/// `gather_fusion = bf16[256,100]`, temp 1,556,480). With a 64 MiB on-chip budget and a 40 KiB overhead:
/// - bf16[5754,100]: the copy pads to 5,760 x 128 x 2 = 1,474,560 B and the rows to 256 x 128 x 2 = 65,536 B,
///   live together: 1,540,096 B = 94 granules exactly. The rows as a buffer of their own (tpusim's layout pads
///   the minor 100 to fewer lanes) plus the overhead stay below that, so the copy sets the peak.
/// - bf16[88182,256] (a row-major table, prefetched by the compiler, embedding.000@v5p): no copy; the rows'
///   buffer, 256 x 256 x 2 = 131,072 B, plus the 40,960-byte overhead: 172,032 B, 10.5 granules, so 11.
/// - On v6e the same rows stay in VMEM and the copy is there too: temp 0 (embedding.001@v6e).
#[test]
fn gathered_rows_and_a_narrow_tables_copy_are_in_hbm_on_v5p() {
    assert_eq!(temp(&gather_rows("bf16", 5754, 100), "v5p"), 1_540_096);
    assert_eq!(temp(&gather_rows("bf16", 88182, 256), "v5p"), 11 * GRANULE);
    assert_eq!(temp(&gather_rows("bf16", 5754, 100), "v6e"), 0);
}

/// `y = (x + r) * rsqrt(sum((x + r)^2, rows))` over `dtype[rows,cols]` entry parameters `x` and `r`: an rmsnorm
/// after a residual add, as in norm.008.
fn residual_rmsnorm(dtype: &str, rows: u64, cols: u64) -> String {
    format!(
        "HloModule m\n\nadd_f {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         ENTRY main {{\n  x = {dtype}[{rows},{cols}]{{1,0}} parameter(0)\n  r = {dtype}[{rows},{cols}]{{1,0}} parameter(1)\n  \
         s = {dtype}[{rows},{cols}]{{1,0}} add(x, r)\n  s32 = f32[{rows},{cols}]{{1,0}} convert(s)\n  \
         sq = f32[{rows},{cols}]{{1,0}} multiply(s32, s32)\n  zero = f32[] constant(0)\n  \
         ss = f32[{rows}]{{0}} reduce(sq, zero), dimensions={{1}}, to_apply=add_f\n  rs = f32[{rows}]{{0}} rsqrt(ss)\n  \
         b = f32[{rows},{cols}]{{1,0}} broadcast(rs), dimensions={{0}}\n  ROOT y = f32[{rows},{cols}]{{1,0}} multiply(s32, b)\n}}\n"
    )
}

/// The compiler writes an f32 residual sum read by two kernels once, beside the row reduction over it (a
/// multi-output fusion), rather than re-read `x` and `r` in the second (norm.008 on every chip: temp = the sum's
/// 14,208 x 13,952 x 4 bytes). Here the sum is f32[4096,8192], 4,096 x 8,192 x 4 = 134,217,728 B, over the 64 MiB
/// on-chip budget `bare` sets, so it is in HBM with the 40,960-byte allocation overhead: 134,258,688 B, rounded up
/// to whole granules 134,266,880 (8,195 granules). At f32[1024,8192] (32 MiB) it fits on chip: temp 0 (norm.013,
/// 23 MB, is `S(1)`). A bf16 sum is recomputed by both kernels (norm.009, norm.017: temp 0).
#[test]
fn an_f32_residual_sum_two_kernels_read_is_written_once() {
    let big = 4096 * 8192 * 4 + 40_960u64;
    assert_eq!(big.div_ceil(GRANULE), 8_195);
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        assert_eq!(
            temp(&residual_rmsnorm("f32", 4096, 8192), chip),
            8_195 * GRANULE,
            "{chip}"
        );
        assert_eq!(temp(&residual_rmsnorm("f32", 1024, 8192), chip), 0, "{chip}");
        assert_eq!(temp(&residual_rmsnorm("bf16", 4096, 8192), chip), 0, "{chip}");
    }
}

/// A 1x1 convolution f32[9,W,8,128] x f32[1,1,128,128] returned by the program: a batch of 9 does not fill a
/// tile's 8 rows, so the compiler writes the result in the convolution's layout and copies it to the entry's.
fn copied_out_conv(w: u64) -> String {
    format!(
        "HloModule m\n\nENTRY main {{\n  x = f32[9,{w},8,128]{{3,2,1,0}} parameter(0)\n  \
         k = f32[1,1,128,128]{{3,2,1,0}} parameter(1)\n  ROOT c = f32[9,{w},8,128]{{3,2,1,0}} convolution(x, k), \
         window={{size=1x1}}, dim_labels=b01f_01io->b01f\n}}\n"
    )
}

/// The convolution's result before its copy to the entry's layout is a temporary; on chips where MXU results
/// may stay on chip it is in HBM when the on-chip budget cannot hold it (resnet_block.005 on v4, v5e and v6e:
/// `fusion.5 = f32[27,28,28,2048]{3,0,2,1}` in HBM, temp 205,668,352 B). At W = 2,048 the result is
/// 9 x 2,048 x 8 x 128 x 4 = 75,497,472 B (4,608 granules), over `bare`'s 64 MiB: with the 40,960-byte overhead,
/// 4,611 granules on every chip (v5p keeps every copied-out result in HBM). At W = 1,024 (37,748,736 B) it fits:
/// temp 0 except on v5p (2,304 granules + overhead = 2,307).
#[test]
fn a_copied_out_convolution_result_over_the_on_chip_budget_is_in_hbm() {
    assert_eq!(9 * 2048 * 8 * 128 * 4, 4_608 * GRANULE);
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        assert_eq!(temp(&copied_out_conv(2048), chip), 4_611 * GRANULE, "{chip}");
        let small = if chip == "v5p" { 2_307 * GRANULE } else { 0 };
        assert_eq!(temp(&copied_out_conv(1024), chip), small, "{chip}");
    }
}

/// Four trips of `acc += 1` over an f32[8192,4096] state started from entry parameter `x`; `after` reads the
/// loop's result `w` and ends the entry.
fn counted_loop(after: &str) -> String {
    format!(
        "HloModule m\n\n\
         cond {{\n  p = (s32[], f32[8192,4096]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  \
         n = s32[] constant(4)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}}\n\n\
         body {{\n  p = (s32[], f32[8192,4096]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  \
         one = s32[] constant(1)\n  i1 = s32[] add(i, one)\n  a = f32[8192,4096]{{1,0}} get-tuple-element(p), index=1\n  \
         c = f32[] constant(1)\n  b = f32[8192,4096]{{1,0}} broadcast(c), dimensions={{}}\n  \
         a1 = f32[8192,4096]{{1,0}} add(a, b)\n  ROOT t = (s32[], f32[8192,4096]) tuple(i1, a1)\n}}\n\n\
         ENTRY main {{\n  x = f32[8192,4096]{{1,0}} parameter(0)\n  z = s32[] constant(0)\n  \
         t = (s32[], f32[8192,4096]) tuple(z, x)\n  w = (s32[], f32[8192,4096]) while(t), condition=cond, body=body\n  \
         {after}\n}}\n"
    )
}

/// A loop runs in place: its state is not a second buffer. Returned by the entry, the state element is the
/// output: temp 0 (scan.011 on v4, v5e, v6e and tpu7x: the `AllocateBuffer` the loop fills is the entry's
/// result, temp 0; the whole 128 MiB state tuple counted as a temporary before). Read by a kernel after the loop
/// instead (`a * a` returned), the element outlives the loop: 8,192 x 4,096 x 4 = 134,217,728 B (8,192 granules),
/// over `bare`'s 64 MiB, plus the 40,960-byte overhead: 8,195 granules.
#[test]
fn a_loops_state_is_no_second_buffer() {
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let returned = counted_loop("ROOT a = f32[8192,4096]{1,0} get-tuple-element(w), index=1");
        assert_eq!(temp(&returned, chip), 0, "{chip}");
        let squared = counted_loop(
            "a = f32[8192,4096]{1,0} get-tuple-element(w), index=1\n  ROOT r = f32[8192,4096]{1,0} multiply(a, a)",
        );
        assert_eq!(temp(&squared, chip), 8_195 * GRANULE, "{chip}");
    }
}

/// Four trips of `h = h . w` over f32 `h` [128,512] and a weight `w` [512,512] the body passes through: the
/// compiler converts `w` to bf16 once before the loop (`hlo::loop_convert`). On v5p the bf16 copy is in HBM while
/// the loop runs (scan.011@v5p: temp 27,623,424 B, the copies' 27,131,904 and the loop's own; 0 on v6e): 512 x 512
/// x 2 = 524,288 B, 32 granules; the returned `h` is the output and `w` is dead after the loop. Elsewhere the copy
/// is on chip: temp 0.
#[test]
fn a_loops_bf16_weight_copy_is_in_hbm_on_v5p() {
    let text = "HloModule m\n\n\
        cond {\n  p = (s32[], f32[128,512], f32[512,512]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  \
        n = s32[] constant(4)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n\
        body {\n  p = (s32[], f32[128,512], f32[512,512]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  \
        one = s32[] constant(1)\n  i1 = s32[] add(i, one)\n  h = f32[128,512]{1,0} get-tuple-element(p), index=1\n  \
        w = f32[512,512]{1,0} get-tuple-element(p), index=2\n  \
        h1 = f32[128,512]{1,0} dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
        ROOT t = (s32[], f32[128,512], f32[512,512]) tuple(i1, h1, w)\n}\n\n\
        ENTRY main {\n  h0 = f32[128,512]{1,0} parameter(0)\n  w0 = f32[512,512]{1,0} parameter(1)\n  \
        z = s32[] constant(0)\n  t = (s32[], f32[128,512], f32[512,512]) tuple(z, h0, w0)\n  \
        l = (s32[], f32[128,512], f32[512,512]) while(t), condition=cond, body=body\n  \
        ROOT h = f32[128,512]{1,0} get-tuple-element(l), index=1\n}\n";
    assert_eq!(512 * 512 * 2, 32 * GRANULE);
    assert_eq!(temp(text, "v5p"), 32 * GRANULE);
    for chip in ["v4", "v5e", "v6e", "tpu7x"] {
        assert_eq!(temp(text, chip), 0, "{chip}");
    }
}

/// A loop whose initial state is a kernel's result (`x * x`, f32[128,512], 262,144 B): on v5p both cores run the
/// body, so the state cannot start in one core's VMEM: the result is in HBM until the loop (fwd+bwd scans on v5p,
/// `hlo::temp::written_by_both_cores`), with the 40,960-byte overhead: 303,104 B, 19 granules. Elsewhere it stays
/// on chip: temp 0.
#[test]
fn a_loops_initial_state_from_a_kernel_is_in_hbm_on_v5p() {
    let text = "HloModule m\n\n\
        cond {\n  p = (s32[], f32[128,512]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  \
        n = s32[] constant(4)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n\
        body {\n  p = (s32[], f32[128,512]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  \
        one = s32[] constant(1)\n  i1 = s32[] add(i, one)\n  a = f32[128,512]{1,0} get-tuple-element(p), index=1\n  \
        c = f32[] constant(1)\n  b = f32[128,512]{1,0} broadcast(c), dimensions={}\n  \
        a1 = f32[128,512]{1,0} add(a, b)\n  ROOT t = (s32[], f32[128,512]) tuple(i1, a1)\n}\n\n\
        ENTRY main {\n  x = f32[128,512]{1,0} parameter(0)\n  y = f32[128,512]{1,0} multiply(x, x)\n  \
        z = s32[] constant(0)\n  t = (s32[], f32[128,512]) tuple(z, y)\n  \
        w = (s32[], f32[128,512]) while(t), condition=cond, body=body\n  \
        ROOT a = f32[128,512]{1,0} get-tuple-element(w), index=1\n}\n";
    assert_eq!((128 * 512 * 4 + 40_960u64).div_ceil(GRANULE), 19);
    assert_eq!(temp(text, "v5p"), 19 * GRANULE);
    for chip in ["v4", "v5e", "v6e", "tpu7x"] {
        assert_eq!(temp(text, chip), 0, "{chip}");
    }
}
