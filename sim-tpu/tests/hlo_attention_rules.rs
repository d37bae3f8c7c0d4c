//! `tpusim hlo` rules for attention's softmax and the compiler's temp allocation, read off the compiler corpus's
//! optimized modules (testdata/hlo/corpus/, /work/scratch-corpus/opt). Each module is written by hand here, with
//! its expected kernels and bytes worked out in the test.

use sim_tpu::hlo::{cost_module, cost_module_with, hlo_params, HloModule, HloParams, KernelKind};
use sim_tpu::tensorcore::ChipModel;

/// Softmax attention on f32[8,128,128] q, k, v: scores `s = q k^T`, row max `m`, `e = exp(s - m)`, row sum `l`,
/// `o = e v / l`. The scores (8 x 128 x 128 x 4 B = 512 KiB) are no larger than their operands (2 x 512 KiB), so
/// the dot is not recomputed by its consumers.
const ATTENTION: &str = "HloModule m\n\n\
max_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT x = f32[] maximum(a, b)\n}\n\n\
add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT x = f32[] add(a, b)\n}\n\n\
ENTRY main {\n  q = bf16[8,128,128]{2,1,0} parameter(0)\n  k = bf16[8,128,128]{2,1,0} parameter(1)\n  \
v = bf16[8,128,128]{2,1,0} parameter(2)\n  \
s = bf16[8,128,128]{2,1,0} dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}\n  \
sf = f32[8,128,128]{2,1,0} convert(s)\n  c8 = f32[] constant(8)\n  c8b = f32[8,128,128]{2,1,0} broadcast(c8), dimensions={}\n  \
x = f32[8,128,128]{2,1,0} divide(sf, c8b)\n  \
ninf = f32[] constant(-inf)\n  rm = f32[8,128]{1,0} reduce(x, ninf), dimensions={2}, to_apply=max_f\n  \
ninfb = f32[8,128]{1,0} broadcast(ninf), dimensions={}\n  m = f32[8,128]{1,0} maximum(rm, ninfb)\n  \
mb = f32[8,128,128]{2,1,0} broadcast(m), dimensions={0,1}\n  d = f32[8,128,128]{2,1,0} subtract(x, mb)\n  \
e = f32[8,128,128]{2,1,0} exponential(d)\n  zero = f32[] constant(0)\n  \
l = f32[8,128]{1,0} reduce(e, zero), dimensions={2}, to_apply=add_f\n  \
lb = f32[8,128,128]{2,1,0} broadcast(l), dimensions={0,1}\n  p = f32[8,128,128]{2,1,0} divide(e, lb)\n  \
pb = bf16[8,128,128]{2,1,0} convert(p)\n  \
ROOT o = bf16[8,128,128]{2,1,0} dot(pb, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n";

/// v5p's constants with no on-chip temporaries and no fixed temp overheads, so a test's temp is its buffers alone.
fn bare_v5p() -> (ChipModel, HloParams) {
    let chip = ChipModel::preset("v5p").unwrap();
    let mut hp = hlo_params().into_iter().find(|h| h.name == "v5p").unwrap();
    hp.hbm_bytes_per_cycle = chip.hbm.hlo_stream_bytes_per_cycle;
    hp.temp_fast_bytes = 0;
    hp.temp_overhead_bytes = 0;
    hp.temp_row_reduce_bytes = 0;
    (chip, hp)
}

/// The row max `rm` of the scores joins the scores' MXU kernel (`rowstats`: attention.002@v5e computes the
/// dot and the row max in one kOutput fusion). The pass rule (`passes`: a softmax over a matmul's result makes one
/// kernel per pass, softmax_xent.012@v6e) runs after it and gives `exp(x - m)` and its sum a pass of their own;
/// the compiler corpus's held-out programs favour this order (all chips 14.2 % median against 14.7 % with the
/// pass rule first, v5p temp 27.7 % against 42 %), though attention.002@v5e itself keeps the sum in the dot's
/// kernel: the two rules' evidence disagrees on short 16-bit rows, and the corpus decides. Here the dot contracts
/// 128 elements, a full MXU pass deep, so the one-pass rule (`rowstats::one_pass`, head dims 64 and 96 only:
/// attention.015 and .016 with 128 write their scores on four chips) does not apply. Three kernels: `s`
/// with `rm`; `e` with `l` (recomputing `x` from `s`); the second dot. Temp (no on-chip temporaries), at the
/// reduce kernel: `s` (8 x 128 x 128 x 2 B = 256 KiB) and `rm` (8 x 128 x 4 B = 4 KiB) read, `e` (512 KiB f32)
/// and `l` (4 KiB) written: 776 KiB = 794,624 B, 48.5 granules of 16 KiB, so 49 x 16,384 = 802,816 B.
#[test]
fn row_statistics_over_a_matmul_result_join_its_kernel() {
    let (chip, hp) = bare_v5p();
    let c = cost_module_with(&HloModule::parse(ATTENTION).unwrap(), &chip, &hp).unwrap();
    let kinds: Vec<KernelKind> = c.kernels.iter().map(|k| k.kind).collect();
    assert_eq!(
        kinds,
        [KernelKind::Mxu, KernelKind::Reduce, KernelKind::Mxu],
        "{:?}",
        c.kernels
    );
    let has = |k: usize, name: &str| c.kernels[k].instructions.iter().any(|i| i == name);
    assert!(has(0, "s") && has(0, "rm"), "{:?}", c.kernels[0].instructions);
    assert!(
        has(1, "e") && has(1, "l") && !has(1, "rm"),
        "{:?}",
        c.kernels[1].instructions
    );
    assert!(has(2, "o"));
    assert_eq!(c.temp_bytes, 49 * 16_384);
    // Costed whole, on every chip.
    for chip in ["v4", "v5e", "v6e", "tpu7x"] {
        let c = cost_module(&HloModule::parse(ATTENTION).unwrap(), &ChipModel::preset(chip).unwrap()).unwrap();
        assert_eq!(c.kernels.len(), 3, "{chip}: {:?}", c.kernels);
    }
}

/// A column reduction (over the rows, `dimensions={1}`) of a matmul result another kernel also reads is not
/// row statistics: each window holds a block of rows, not whole columns, so the reduce stays a kernel of its
/// own and the matmul writes its result.
#[test]
fn a_column_reduction_of_a_matmul_result_keeps_its_kernel() {
    let text = ATTENTION
        .replace(
            "l = f32[8,128]{1,0} reduce(e, zero), dimensions={2}",
            "l = f32[8,128]{1,0} reduce(e, zero), dimensions={1}",
        )
        .replace(
            "lb = f32[8,128,128]{2,1,0} broadcast(l), dimensions={0,1}",
            "lb = f32[8,128,128]{2,1,0} broadcast(l), dimensions={0,2}",
        );
    let (chip, hp) = bare_v5p();
    let c = cost_module_with(&HloModule::parse(&text).unwrap(), &chip, &hp).unwrap();
    assert_eq!(c.kernels.len(), 3, "{:?}", c.kernels);
}

/// The same attention with f32 scores (the dot's result f32): the compiler writes the scores and their row max
/// from the dot's kernel and computes the exp and sum in a loop kernel of its own (every f32 attention and
/// transformer block of the corpus), so the reduce kernel stays: three kernels.
#[test]
fn row_statistics_over_f32_scores_keep_their_kernel() {
    let text = ATTENTION.replace(
        "s = bf16[8,128,128]{2,1,0} dot(q, k)",
        "s = f32[8,128,128]{2,1,0} dot(q, k)",
    );
    let (chip, hp) = bare_v5p();
    let c = cost_module_with(&HloModule::parse(&text).unwrap(), &chip, &hp).unwrap();
    assert_eq!(c.kernels.len(), 3, "{:?}", c.kernels);
    assert_eq!(c.kernels[1].kind, KernelKind::Reduce);
}

/// `exp` of an f32[8,100] parameter read by a custom call (unmodelled, so the exp's kernel writes it out): one
/// temporary of 8 x 128 (the minor dimension padded to 128) x 4 B = 4,096 B, which the compiler's allocation
/// counts as one 16 KiB granule (every corpus record's temp is a multiple of 16,384 B).
#[test]
fn temporaries_are_allocated_in_16_kib_granules() {
    let text = "HloModule m\n\nENTRY main {\n  p = f32[8,100]{1,0} parameter(0)\n  \
                e = f32[8,100]{1,0} exponential(p)\n  \
                ROOT c = f32[8,100]{1,0} custom-call(e), custom_call_target=\"foo\"\n}\n";
    let (chip, hp) = bare_v5p();
    let c = cost_module_with(&HloModule::parse(text).unwrap(), &chip, &hp).unwrap();
    assert_eq!(c.kernels.len(), 2, "{:?}", c.kernels);
    assert_eq!(c.temp_bytes, 16_384);
}

/// [`ATTENTION`] with head dim 64 (q, k, v bf16[8,128,64]): the scores' dot contracts 64 elements, less than one
/// MXU pass deep, both its operands are entry parameters, and its rows (128) are whole in one window, so the
/// compiler computes the row max (its `reduce-window` over the whole row), `exp(s - m)` and the row sum in the
/// dot's own kernel, one pass (attention.000@v5e: `fusion.12`, 51,491 cycles). Two kernels: the scores with
/// their statistics, then `e v / l`.
fn one_pass_attention() -> String {
    ATTENTION
        .replace("q = bf16[8,128,128]{2,1,0}", "q = bf16[8,128,64]{2,1,0}")
        .replace("k = bf16[8,128,128]{2,1,0}", "k = bf16[8,128,64]{2,1,0}")
        .replace("v = bf16[8,128,128]{2,1,0}", "v = bf16[8,128,64]{2,1,0}")
        .replace("ROOT o = bf16[8,128,128]{2,1,0}", "ROOT o = bf16[8,128,64]{2,1,0}")
}

/// The one-pass kernel's cycles, with the fused-op rate raised so its vector work bounds it: the exp and sum
/// sweep the tiles the kernel writes once, not once per op. It writes `e` (f32[8,128,128]: 128 blocks of 1,024)
/// and `l` (f32[8,128]: one tile of 8 x 128, 1 block): 129 blocks x 1,000 cycles = 129,000, where one op per
/// block (scale, max, exp, sum) would be four times that. No on-chip temporaries, so both go to HBM after it:
/// 524,288 + 4,096 bytes at the HBM rate, plus the MXU launch scaled by `launch_factor`.
#[test]
fn row_statistics_of_shallow_batched_scores_are_one_pass() {
    let (chip, mut hp) = bare_v5p();
    hp.vmem_temp_bytes = 0;
    hp.mxu_fused_op_cycles = Some(1000.0);
    let c = cost_module_with(&HloModule::parse(&one_pass_attention()).unwrap(), &chip, &hp).unwrap();
    let kinds: Vec<KernelKind> = c.kernels.iter().map(|k| k.kind).collect();
    assert_eq!(kinds, [KernelKind::Mxu, KernelKind::Mxu], "{:?}", c.kernels);
    let has = |k: usize, name: &str| c.kernels[k].instructions.iter().any(|i| i == name);
    assert!(
        has(0, "s") && has(0, "rm") && has(0, "e") && has(0, "l"),
        "{:?}",
        c.kernels[0]
    );
    let launch = (chip.params.mxu_launch_cycles * hp.launch_factor.clamp(0.2, 1.0)).round() as u64;
    let epilogue = (524_288.0 + 4_096.0) / hp.hbm_bytes_per_cycle;
    let expected = launch + (129_000.0 + epilogue).round() as u64;
    assert_eq!(c.kernels[0].cycles, expected, "{:?}", c.kernels[0]);
}

/// The same one-pass softmax over scores whose operands another kernel writes (q is `exp` of a parameter, a
/// loop kernel of its own): as in every transformer block of the corpus, the scores' statistics make a pass of
/// their own after the dot's kernel. Three kernels after the exp's (dot with max, exp with sum, the second dot).
#[test]
fn scores_of_computed_operands_keep_their_passes() {
    let text = one_pass_attention()
        .replace("q = bf16[8,128,64]{2,1,0} parameter(0)", "q0 = bf16[8,128,64]{2,1,0} parameter(0)\n  q = bf16[8,128,64]{2,1,0} exponential(q0)\n  qq = bf16[8,128,64]{2,1,0} add(q, q)")
        .replace("dot(q, k)", "dot(qq, k)")
        .replace("ROOT o = bf16[8,128,64]{2,1,0} dot(pb, v)", "o = bf16[8,128,64]{2,1,0} dot(pb, v)\n  ROOT t = (bf16[8,128,64]{2,1,0}, bf16[8,128,64]{2,1,0}) tuple(o, q)");
    let (chip, hp) = bare_v5p();
    let c = cost_module_with(&HloModule::parse(&text).unwrap(), &chip, &hp).unwrap();
    let mxu: Vec<&str> = c
        .kernels
        .iter()
        .filter(|k| k.kind == KernelKind::Mxu)
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(mxu.len(), 2, "{:?}", c.kernels);
    assert!(
        c.kernels
            .iter()
            .any(|k| k.kind == KernelKind::Reduce && k.instructions.iter().any(|i| i == "l")),
        "{:?}",
        c.kernels
    );
}

/// A batched bf16 product `s` whose only reader in its kernel is a convert to f32 (the scores before their
/// scale) drains as the f32 accumulator: on v5e the op model's 16-bit drain costs 15.3 cycles per 1,024
/// results and the f32 drain none, and the compiler's attention.000@v5e kernel (51,491 cycles for 12,432
/// blocks) has no room for the 16-bit one. So the kernel costs what the same kernel with an f32 product costs;
/// writing the bf16 product out as well (a second output) keeps the 16-bit drain, and costs more.
#[test]
fn a_16_bit_product_widened_in_its_kernel_drains_as_f32() {
    let module = |dot: &str, extra: &str| {
        format!(
            "HloModule m\n\nENTRY main {{\n  a = bf16[16,256,128]{{2,1,0}} parameter(0)\n  b = bf16[16,128,256]{{2,1,0}} parameter(1)\n  \
             s = {dot}[16,256,256]{{2,1,0}} dot(a, b), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}\n  \
             f = f32[16,256,256]{{2,1,0}} convert(s)\n  y = f32[16,256,256]{{2,1,0}} maximum(f, f)\n  \
             ROOT t = ({extra}f32[16,256,256]{{2,1,0}}) tuple({}y)\n}}\n",
            if extra.is_empty() { "" } else { "s, " }
        )
    };
    let chip = ChipModel::preset("v5e").unwrap();
    let cost = |text: &str| cost_module(&HloModule::parse(text).unwrap(), &chip).unwrap();
    let widened = cost(&module("bf16", ""));
    let f32_product = cost(&module("f32", ""));
    assert_eq!(widened.kernels.len(), 1, "{:?}", widened.kernels);
    assert_eq!(widened.total_cycles, f32_product.total_cycles);
    let stored = cost(&module("bf16", "bf16[16,256,256]{2,1,0}, "));
    assert!(
        stored.total_cycles > widened.total_cycles,
        "{} {}",
        stored.total_cycles,
        widened.total_cycles
    );
}

/// [`one_pass_attention`] with the scores' product written as f32 from the bf16 q and k (`preferred_element_type`,
/// as in the reference sample's attention) instead of bf16 widened in the kernel: the MXU accumulates in f32
/// either way, and the compiler keeps the one-pass fusion (b4_s2048@tpu7x `fusion.11`, dot, `reduce-window` max,
/// exp and sum), so the kernel is the same: two kernels, the first computing `s`, `rm`, `e` and `l`, its vector
/// work one sweep over the 129 blocks it writes (`e` f32[8,128,128] 128 blocks, `l` one 8 x 128 tile) at 1,000
/// cycles a block = 129,000, plus `e` and `l` (524,288 + 4,096 B) at the HBM rate and the scaled MXU launch.
/// Keyed on the result's width, the f32 product's statistics were a pass of their own (three kernels).
#[test]
fn row_statistics_of_an_f32_product_of_16_bit_operands_are_one_pass() {
    let text = one_pass_attention().replace(
        "s = bf16[8,128,128]{2,1,0} dot(q, k)",
        "s = f32[8,128,128]{2,1,0} dot(q, k)",
    );
    assert!(text.contains("s = f32[8,128,128]{2,1,0} dot(q, k)"));
    let (chip, mut hp) = bare_v5p();
    hp.vmem_temp_bytes = 0;
    hp.mxu_fused_op_cycles = Some(1000.0);
    let c = cost_module_with(&HloModule::parse(&text).unwrap(), &chip, &hp).unwrap();
    let kinds: Vec<KernelKind> = c.kernels.iter().map(|k| k.kind).collect();
    assert_eq!(kinds, [KernelKind::Mxu, KernelKind::Mxu], "{:?}", c.kernels);
    let has = |name: &str| c.kernels[0].instructions.iter().any(|i| i == name);
    assert!(has("s") && has("rm") && has("e") && has("l"), "{:?}", c.kernels[0]);
    let launch = (chip.params.mxu_launch_cycles * hp.launch_factor.clamp(0.2, 1.0)).round() as u64;
    let epilogue = (524_288.0 + 4_096.0) / hp.hbm_bytes_per_cycle;
    let expected = launch + (129_000.0 + epilogue).round() as u64;
    assert_eq!(c.kernels[0].cycles, expected, "{:?}", c.kernels[0]);
}

/// Forward attention's second kernel: `o = convert(e / l) v`, the probabilities normalised and narrowed to bf16
/// in the matmul's kernel from the f32 `e` (f32[8,1024,1024]) and row sums `l` (f32[8,1024]) in HBM. The window
/// plan streams the bf16 operand (16 MiB); the kernel reads `e` and `l`: 8 x 1,024 x 1,024 x 4 = 33,554,432 B
/// and 8 x 1,024 x 4 = 32,768 B (one 8 x 128 tile per 1,024 sums, no padding). With the HBM rate set to 1 B a
/// cycle that stream, 33,587,200 cycles, bounds the body (the product and the divide take well under a million
/// on v5p), so the kernel costs it plus the scaled MXU launch. With `e` already bf16 (no wider input) the floor
/// does not apply and the kernel is far cheaper.
#[test]
fn a_matmul_operand_computed_from_wider_inputs_streams_them() {
    let module = |e_type: &str| {
        format!(
            "HloModule m\n\nENTRY main {{\n  e = {e_type}[8,1024,1024]{{2,1,0}} parameter(0)\n  l = {e_type}[8,1024]{{1,0}} parameter(1)\n  \
             v = bf16[8,1024,64]{{2,1,0}} parameter(2)\n  lb = {e_type}[8,1024,1024]{{2,1,0}} broadcast(l), dimensions={{0,1}}\n  \
             p = {e_type}[8,1024,1024]{{2,1,0}} divide(e, lb)\n  pb = bf16[8,1024,1024]{{2,1,0}} convert(p)\n  \
             ROOT o = bf16[8,1024,64]{{2,1,0}} dot(pb, v), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}\n}}\n"
        )
    };
    let (chip, mut hp) = bare_v5p();
    hp.hbm_bytes_per_cycle = 1.0;
    let cost = |text: &str| cost_module_with(&HloModule::parse(text).unwrap(), &chip, &hp).unwrap();
    let wide = cost(&module("f32"));
    assert_eq!(wide.kernels.len(), 1, "{:?}", wide.kernels);
    assert_eq!(wide.kernels[0].kind, KernelKind::Mxu);
    let launch = (chip.params.mxu_launch_cycles * hp.launch_factor.clamp(0.2, 1.0)).round() as u64;
    assert_eq!(
        wide.kernels[0].cycles,
        launch + 33_554_432 + 32_768,
        "{:?}",
        wide.kernels[0]
    );
    let narrow = cost(&module("bf16"));
    assert_eq!(narrow.kernels.len(), 1, "{:?}", narrow.kernels);
    assert!(narrow.kernels[0].cycles < 1_000_000, "{:?}", narrow.kernels[0]);
}

/// Causal scores masked by a call that returns the masked scores and the mask in one tuple (jax's `where` under
/// differentiation): `sel = select(mask, s, -1e30)` with `s = q k^T`, its row max `rm`, and the gradient
/// `gm = select(mask, g, 0)` reading only the tuple's mask. The kernel of the gradient's product `dq = gm k` computes `gm` from `g` and
/// the mask; it does not recompute `sel` (nor read the scores `s` it is made from): the compiler's gradient
/// kernels of attention.b8_s1024_h12_dh64_fwdbwd_bf16 read `exp`, `dP` and the mask, never the scores.
/// Its HBM bytes are `g`, `k` and the result (3 x 8 x 128 x 128 x 4 B = 1,572,864 B) and the mask
/// (8 x 128 x 128 x 1 B = 131,072 B): 1,703,936 B; recomputing `sel` would read `s` too (524,288 B more).
#[test]
fn a_tuple_element_is_read_only_by_the_users_of_that_element() {
    let text = "HloModule m\n\n\
max_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT x = f32[] maximum(a, b)\n}\n\n\
where_f {\n  m = pred[8,128,128]{2,1,0} parameter(0)\n  x = f32[8,128,128]{2,1,0} parameter(1)\n  \
c = f32[] constant(-1e+30)\n  cb = f32[8,128,128]{2,1,0} broadcast(c), dimensions={}\n  \
sel = f32[8,128,128]{2,1,0} select(m, x, cb)\n  ROOT t = (f32[8,128,128]{2,1,0}, pred[8,128,128]{2,1,0}) tuple(sel, m)\n}\n\n\
ENTRY main {\n  q = f32[8,128,128]{2,1,0} parameter(0)\n  k = f32[8,128,128]{2,1,0} parameter(1)\n  \
g = f32[8,128,128]{2,1,0} parameter(2)\n  mask = pred[8,128,128]{2,1,0} parameter(3)\n  \
s = f32[8,128,128]{2,1,0} dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}\n  \
w = (f32[8,128,128]{2,1,0}, pred[8,128,128]{2,1,0}) call(mask, s), to_apply=where_f\n  \
ws = f32[8,128,128]{2,1,0} get-tuple-element(w), index=0\n  wm = pred[8,128,128]{2,1,0} get-tuple-element(w), index=1\n  \
z = f32[] constant(0)\n  zb = f32[8,128,128]{2,1,0} broadcast(z), dimensions={}\n  \
gm = f32[8,128,128]{2,1,0} select(wm, g, zb)\n  \
dq = f32[8,128,128]{2,1,0} dot(gm, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n  \
ninf = f32[] constant(-inf)\n  rm = f32[8,128]{1,0} reduce(ws, ninf), dimensions={2}, to_apply=max_f\n  \
ROOT r = (f32[8,128]{1,0}, f32[8,128,128]{2,1,0}) tuple(rm, dq)\n}\n";
    let (chip, hp) = bare_v5p();
    let c = cost_module_with(&HloModule::parse(text).unwrap(), &chip, &hp).unwrap();
    let dq = c
        .kernels
        .iter()
        .find(|k| k.instructions.iter().any(|i| i == "dq"))
        .expect("a kernel computes dq");
    assert!(dq.instructions.iter().any(|i| i == "gm"), "{:?}", dq.instructions);
    assert!(!dq.instructions.iter().any(|i| i == "sel"), "{:?}", dq.instructions);
    assert_eq!(dq.hbm_bytes, 3 * 8 * 128 * 128 * 4 + 8 * 128 * 128, "{:?}", c.kernels);
}
