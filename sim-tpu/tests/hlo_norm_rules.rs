//! `tpusim hlo` rules for normalisations and other row-wise kernels, read off the compiler corpus's optimized
//! modules (testdata/hlo/corpus/, /work/scratch-corpus/opt). Each module is written by hand here, with its
//! expected kernels, bytes and cycles worked out in the test.

use sim_tpu::hlo::{cost_module, cost_module_with, hlo_params, HloModule, HloParams, KernelKind};
use sim_tpu::tensorcore::ChipModel;

const ADD: &str = "add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT x = f32[] add(a, b)\n}\n\n";

/// A bias gradient as jax writes it: `dy` f32[256,1024] summed over its rows, reshaped to `[1, 1024]` and summed
/// again over that unit dimension, which the compiler's algebraic simplifier turns into a bitcast.
fn bias_gradient(with_unit_reduce: bool) -> String {
    let tail = if with_unit_reduce {
        "  r = f32[1,1024]{1,0} reshape(s)\n  ROOT u = f32[1024]{0} reduce(r, zero), dimensions={0}, to_apply=add_f\n"
    } else {
        "  ROOT t = (f32[1024]{0}) tuple(s)\n"
    };
    format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  dy = f32[256,1024]{{1,0}} parameter(0)\n  zero = f32[] constant(0)\n  \
         s = f32[1024]{{0}} reduce(dy, zero), dimensions={{0}}, to_apply=add_f\n{tail}}}\n"
    )
}

/// The unit reduction and its reshape are free: one reduce kernel, reading `dy` (256 x 1024 x 4 B = 1 MiB) and
/// writing the f32[1024] sum (4 KiB), as when the module returns the sum itself. Before the rule the unit
/// reduction was a kernel of its own (a loop kernel reading and writing 4 KiB, a whole launch: norm.014@v5p
/// 2,131 cycles, which the compiler's module does not have).
#[test]
fn a_reduction_over_unit_dimensions_is_free() {
    let chip = ChipModel::preset("v5p").unwrap();
    let with = cost_module(&HloModule::parse(&bias_gradient(true)).unwrap(), &chip).unwrap();
    let without = cost_module(&HloModule::parse(&bias_gradient(false)).unwrap(), &chip).unwrap();
    assert_eq!(with.kernels.len(), 1, "{:?}", with.kernels);
    assert_eq!(with.kernels[0].kind, KernelKind::Reduce);
    assert_eq!(
        with.kernels[0].hbm_bytes, without.kernels[0].hbm_bytes,
        "{:?} {:?}",
        with.kernels, without.kernels
    );
    assert_eq!(with.kernels[0].hbm_bytes, 256 * 1024 * 4 + 1024 * 4);
    assert_eq!(with.total_cycles, without.total_cycles);
}

/// A reduction over a dimension of size 1 that a reshape does not feed (`[1, 1024]` parameter summed over its
/// first dimension) forwards the parameter: the module has no kernel at all.
#[test]
fn a_unit_reduction_of_a_parameter_makes_no_kernel() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[1,1024]{{1,0}} parameter(0)\n  zero = f32[] constant(0)\n  \
         ROOT u = f32[1024]{{0}} reduce(x, zero), dimensions={{0}}, to_apply=add_f\n}}\n"
    );
    let c = cost_module(&HloModule::parse(&text).unwrap(), &ChipModel::preset("v6e").unwrap()).unwrap();
    assert!(c.kernels.is_empty(), "{:?}", c.kernels);
}

/// v6e's constants with the cross-lane cost set to `row` cycles per block.
fn v6e_with_row(row: f64) -> (ChipModel, HloParams) {
    let chip = ChipModel::preset("v6e").unwrap();
    let mut hp = hlo_params().into_iter().find(|h| h.name == "v6e").unwrap();
    hp.row_block_cycles = row;
    (chip, hp)
}

/// `x * x` of f32[4096,4096] reduced over `dims`: one reduce kernel of two ops streaming x (64 MiB).
fn square_sum(dims: &str, out: &str) -> String {
    format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[4096,4096]{{1,0}} parameter(0)\n  \
         sq = f32[4096,4096]{{1,0}} multiply(x, x)\n  zero = f32[] constant(0)\n  \
         ROOT s = {out} reduce(sq, zero), dimensions={{{dims}}}, to_apply=add_f\n}}\n"
    )
}

/// `x * broadcast(v)` of f32[4096,4096] with a f32[4096] vector mapped to dimension `dim` of the result.
fn scale(dim: u32) -> String {
    "HloModule m\n\nENTRY main {\n  x = f32[4096,4096]{1,0} parameter(0)\n  v = f32[4096]{0} parameter(1)\n  \
     vb = f32[4096,4096]{1,0} broadcast(v), dimensions={DIM}\n  ROOT y = f32[4096,4096]{1,0} multiply(x, vb)\n}\n"
        .replace("DIM", &dim.to_string())
}

/// Total cycles of `text` on v6e with cross-lane costs 0 and 3 cycles per block.
fn row_cost(text: &str) -> (u64, u64) {
    let m = HloModule::parse(text).unwrap();
    let cost = |row: f64| {
        let (chip, hp) = v6e_with_row(row);
        let c = cost_module_with(&m, &chip, &hp).unwrap();
        assert_eq!(c.kernels.len(), 1, "{:?}", c.kernels);
        c.total_cycles
    };
    (cost(0.0), cost(3.0))
}

/// A kernel reducing rows over their minor dimension (norm.016@v6e's variance kernel: 11.2 cycles per block
/// where its stream takes 8.8) pays `row_block_cycles` per block of its largest array: f32[4096,4096] is 16,384
/// blocks of 1,024 elements, so 3 cycles a block add 49,152 cycles. The same sum over the other dimension (a
/// bias gradient, the rows added lane by lane) adds nothing.
#[test]
fn a_row_reduction_pays_the_cross_lane_cost() {
    let blocks = 4096 * 4096 / 1024;
    let (base, with) = row_cost(&square_sum("1", "f32[4096]{0}"));
    assert_eq!(with - base, 3 * blocks);
    let (base, with) = row_cost(&square_sum("0", "f32[4096]{0}"));
    assert_eq!(with, base);
}

/// Broadcasting one value per row along the rows (a norm's `rsqrt` of its variance: norm.016@v6e's normalisation
/// kernel, 10.9 cycles per block against 8.8 for its stream) costs the same 3 x 16,384 cycles; a bias broadcast
/// along the columns (each lane its own value) costs nothing more.
#[test]
fn a_row_broadcast_pays_the_cross_lane_cost() {
    let blocks = 4096 * 4096 / 1024;
    let (base, with) = row_cost(&scale(0));
    assert_eq!(with - base, 3 * blocks);
    let (base, with) = row_cost(&scale(1));
    assert_eq!(with, base);
}

/// A layer norm over 12 rows of f32[12,1664] (norm.015's shape): the row sum, the mean `sum / 1664` (a vector of
/// 12), the variance's row sum over `(x - mean)^2`, `rsqrt(var / 1664 + eps)` (a vector of 12), and the
/// normalisation `(x - mean) * rsqrt`. The compiler's module has five kernels: two reductions, the
/// normalisation, and the mean and the `rsqrt` each in a small kernel of its own however short the vector
/// (norm.015@v5p: 2,122 and 2,123 cycles, one launch each). Before the rule, vectors under 128 elements were
/// recomputed in their consumers: three kernels.
#[test]
fn a_short_row_statistic_gets_its_own_kernel() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[12,1664]{{1,0}} parameter(0)\n  zero = f32[] constant(0)\n  \
         s = f32[12]{{0}} reduce(x, zero), dimensions={{1}}, to_apply=add_f\n  \
         n = f32[] constant(1664)\n  nb = f32[12]{{0}} broadcast(n), dimensions={{}}\n  \
         mean = f32[12]{{0}} divide(s, nb)\n  mb = f32[12,1664]{{1,0}} broadcast(mean), dimensions={{0}}\n  \
         d = f32[12,1664]{{1,0}} subtract(x, mb)\n  d2 = f32[12,1664]{{1,0}} multiply(d, d)\n  \
         v = f32[12]{{0}} reduce(d2, zero), dimensions={{1}}, to_apply=add_f\n  \
         vn = f32[12]{{0}} divide(v, nb)\n  eps = f32[] constant(1e-05)\n  epsb = f32[12]{{0}} broadcast(eps), dimensions={{}}\n  \
         ve = f32[12]{{0}} add(vn, epsb)\n  r = f32[12]{{0}} rsqrt(ve)\n  \
         rb = f32[12,1664]{{1,0}} broadcast(r), dimensions={{0}}\n  ROOT y = f32[12,1664]{{1,0}} multiply(d, rb)\n}}\n"
    );
    let c = cost_module(&HloModule::parse(&text).unwrap(), &ChipModel::preset("v5p").unwrap()).unwrap();
    let mut kinds: Vec<KernelKind> = c.kernels.iter().map(|k| k.kind).collect();
    kinds.sort_by_key(|k| format!("{k:?}"));
    assert_eq!(
        kinds,
        [
            KernelKind::Loop,
            KernelKind::Loop,
            KernelKind::Loop,
            KernelKind::Reduce,
            KernelKind::Reduce
        ],
        "{:?}",
        c.kernels
    );
    // The small kernels read and write only their vectors (12 f32 padded to a 128-lane tile: 512 B each way).
    let own = |name: &str| {
        c.kernels
            .iter()
            .find(|k| k.instructions.iter().any(|i| i == name) && k.instructions.len() <= 6)
    };
    for name in ["mean", "r"] {
        let k = own(name).unwrap_or_else(|| panic!("no kernel of its own for {name}: {:?}", c.kernels));
        assert!(k.hbm_bytes <= 1024, "{k:?}");
    }
}

/// `sum(exp(x))` over the rows of `x` ([rows, cols] of `dtype`, widened to f32 first when bf16): one reduce kernel.
fn exp_sum(dtype: &str, rows: u64, cols: u64) -> String {
    let widen = if dtype == "f32" {
        "  c = f32[R,C]{1,0} add(x, x)\n".to_string()
    } else {
        "  c = f32[R,C]{1,0} convert(x)\n".to_string()
    };
    format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = {dtype}[R,C]{{1,0}} parameter(0)\n{widen}  \
         e = f32[R,C]{{1,0}} exponential(c)\n  zero = f32[] constant(0)\n  \
         ROOT s = f32[R]{{0}} reduce(e, zero), dimensions={{1}}, to_apply=add_f\n}}\n"
    )
    .replace("R,", &format!("{rows},"))
    .replace("[R]", &format!("[{rows}]"))
    .replace(",C]", &format!(",{cols}]"))
}

/// Total cycles of `text` on v6e with round constants: ops 0.5 cycles a block, the loop pipeline 10 a block and 4
/// more per full-size stream, the cross-lane work 3 a block, and HBM fast enough (10^6 B a cycle) that no kernel
/// here waits on it.
fn exp_sum_cost(text: &str) -> u64 {
    let chip = ChipModel::preset("v6e").unwrap();
    let mut hp = hlo_params().into_iter().find(|h| h.name == "v6e").unwrap();
    hp.fused_op_cycles = 0.5;
    hp.loop_block_cycles = 10.0;
    hp.stream_block_cycles = 4.0;
    hp.row_block_cycles = 3.0;
    hp.hbm_bytes_per_cycle = 1e6;
    let c = cost_module_with(&HloModule::parse(text).unwrap(), &chip, &hp).unwrap();
    assert_eq!(c.kernels.len(), 1, "{:?}", c.kernels);
    c.total_cycles
}

/// A softmax sum over bf16 logits widened to f32 (the reference sample's softmax_xent.n1024_v32768_fwd_bf16,
/// `exponential_reduce_fusion`): 1024 x 32768 elements are 32,768 blocks. Over f32 logits the kernel pays the
/// pipeline with one whole stream, 32,768 x (10 + 4) = 458,752 cycles, and the cross-lane work, 3 x 32,768 =
/// 98,304 (the ops, 2 x 0.5 a block, stay below). Over bf16 logits the stream counts half (10 + 4 / 2 = 12 a
/// block: 393,216) and the cross-lane work hides: 163,840 cycles less, the same launch. Rows of 4,096 (bf16
/// [8192,4096], as many blocks) keep the whole cost, as the f32 kernel does.
#[test]
fn a_long_row_sum_of_widened_16_bit_logits_streams_half_and_hides_its_cross_lane_work() {
    let f32_long = exp_sum_cost(&exp_sum("f32", 1024, 32768));
    let bf16_long = exp_sum_cost(&exp_sum("bf16", 1024, 32768));
    let bf16_short = exp_sum_cost(&exp_sum("bf16", 8192, 4096));
    assert_eq!(f32_long - bf16_long, 458_752 + 98_304 - 393_216);
    assert_eq!(bf16_short, f32_long);
}
