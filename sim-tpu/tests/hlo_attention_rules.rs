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
/// kernel: the two rules' evidence disagrees on short 16-bit rows, and the corpus decides. Three kernels: `s`
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
