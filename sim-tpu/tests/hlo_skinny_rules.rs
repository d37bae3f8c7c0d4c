//! `tpusim hlo` rules for skinny and small matmul programs (matrix-vector products, decode-style matmuls), read
//! off the compiler corpus's optimized modules (testdata/hlo/corpus/, tools/corpus/). Each module is written by
//! hand here, with its expected kernels and cycles worked out in the test.

use sim_tpu::hlo::{hlo_params, HloParams};
use sim_tpu::tensorcore::ChipModel;

mod support;
use support::hlo::{cost_on, dot_module as dot};

fn params(chip: &str) -> HloParams {
    hlo_params().into_iter().find(|p| p.name == chip).unwrap()
}

/// One kernel of a loop launch plus `blocks` 128-element rows of the loop pipeline, as the test works it out.
fn relayout(chip: &str, blocks: u64) -> u64 {
    let launch = ChipModel::preset(chip).unwrap().params.launch_cycles.round() as u64;
    launch + (blocks as f64 * params(chip).loop_block_cycles).round() as u64
}

/// bf16 [384,512] x [512,1] (corpus program matvec.016) on a chip that runs matrix-vector products on the VPU:
/// besides the multiply-reduce fusion the compiler moves the [512,1] vector to a 1-D [512] (a `reduce` kernel)
/// and the 1-D result back to [384,1] (a `reshape` kernel); on v6e 2,136 and 2,133 cycles beside the fusion's
/// 3,572. Each move is a loop launch plus one pipeline block per 128 elements: 4 blocks for the vector, 3 for the
/// result. The same product written on 1-D arrays has neither kernel, so the two modules differ by exactly the
/// two moves. On tpu7x the MXU takes the product (one fusion, no moves): the two modules cost the same.
#[test]
fn a_vpu_matvec_on_degenerate_arrays_pays_two_relayout_kernels() {
    let two_d = dot("bf16[384,512]{1,0}", "bf16[512,1]{1,0}", "bf16[384,1]{1,0}");
    let one_d = dot("bf16[384,512]{1,0}", "bf16[512]{0}", "bf16[384]{0}");
    for chip in ["v4", "v5e", "v5p", "v6e"] {
        let (a, b) = (cost_on(&two_d, chip), cost_on(&one_d, chip));
        let expected = relayout(chip, 4) + relayout(chip, 3);
        assert_eq!(
            a.total_cycles,
            b.total_cycles + expected,
            "{chip}: {:#?} against {:#?}",
            a.kernels,
            b.kernels
        );
    }
    // v6e by hand: launch 2,116; the fitted loop block is 5 to 7 cycles, so each move is 2,130 to 2,150 cycles,
    // and the program within 10% of the compiler's 7,841.
    let v6e = cost_on(&two_d, "v6e").total_cycles as f64;
    assert!((v6e / 7841.0 - 1.0).abs() < 0.10, "v6e: {v6e}");
    assert_eq!(
        cost_on(&two_d, "tpu7x").total_cycles,
        cost_on(&one_d, "tpu7x").total_cycles
    );
}

/// f32 moves that keep the padded bytes are bitcasts, with no kernel. f32 [256,896] x [896,1]: the vector's
/// 2-D layout T(1,128) pads 896 to 896, its 1-D layout T(1024) to 1,024, so it is moved (7 blocks); the result's
/// [256,1] pads to 256 either way (1-D T(256)), a bitcast (matvec.015: one `reduce` of 2,151 cycles on v6e, no
/// `reshape`). f32 [896,3072] x [3072,1] is the other way round: the vector (3,072 both ways) is a bitcast, the
/// result ([896] T(1024): 1,024 against 896) is moved (7 blocks; matvec.012: one `reshape` of 2,158 cycles).
#[test]
fn an_f32_move_that_keeps_the_padded_bytes_is_a_bitcast() {
    for (m, k) in [(256u64, 896u64), (896, 3072)] {
        let two_d = dot(
            &format!("f32[{m},{k}]{{1,0}}"),
            &format!("f32[{k},1]{{1,0}}"),
            &format!("f32[{m},1]{{1,0}}"),
        );
        let one_d = dot(
            &format!("f32[{m},{k}]{{1,0}}"),
            &format!("f32[{k}]{{0}}"),
            &format!("f32[{m}]{{0}}"),
        );
        for chip in ["v5e", "v6e"] {
            let (a, b) = (cost_on(&two_d, chip), cost_on(&one_d, chip));
            assert_eq!(
                a.total_cycles,
                b.total_cycles + relayout(chip, 7),
                "{chip} [{m},{k}]: {:#?} against {:#?}",
                a.kernels,
                b.kernels
            );
        }
    }
}

/// A decode-style matmul whose weight the compiler lays out contracting-dim minor: bf16 [8,5499] x [5499,3157]
/// (corpus program decode_matmul.007). Row-major the weight pads to 5,504 x 3,200 elements (rows to 16, lanes to
/// 128), column-major to 3,168 x 5,504, fewer, so its entry layout is `{0,1}`: K in the lanes. Every 128 x 128
/// block then passes the transpose unit before it enters an MXU: 43 x 25 = 1,075 blocks, spread over the chip's
/// MXUs at the op model's `mxu_weight_transpose_cycles` each, a floor under the kernel (v4: 4 MXUs). The
/// compiler's estimate on v4 is 38,378 cycles; the default layout's window plan gave 19,444. The same product
/// with the weight row-major ([3157,5499] contracted on its lanes is K-minor too, so the control is K-major:
/// bf16 [8,3157] x [3157,5499], row-major 3,168 x 5,504 against column-major 5,504 x 3,200) has no such floor.
#[test]
fn a_contracting_minor_weight_is_paced_by_the_transpose_unit() {
    let chip = ChipModel::preset("v4").unwrap();
    let (width, count) = (chip.mxu.width, chip.mxu.count as f64);
    assert_eq!(width, 128, "the blocks below are 128 x 128");
    let blocks = (5499u64.div_ceil(128) * 3157u64.div_ceil(128)) as f64;
    let floor = blocks * chip.params.mxu_weight_transpose_cycles / count;
    let k_minor = cost_on(
        &dot("bf16[8,5499]{1,0}", "bf16[5499,3157]{1,0}", "bf16[8,3157]{1,0}"),
        "v4",
    );
    let total = k_minor.total_cycles as f64;
    assert!(
        total >= floor && total <= 38_378.0 * 1.1,
        "v4: {total} cycles, expected at least the transpose unit's {floor} and near the compiler's 38,378"
    );
    let k_major = cost_on(
        &dot("bf16[8,3157]{1,0}", "bf16[3157,5499]{1,0}", "bf16[8,5499]{1,0}"),
        "v4",
    );
    assert!(
        (k_major.total_cycles as f64) < floor,
        "v4: the K-major twin costs {}, the transpose floor is {floor}",
        k_major.total_cycles
    );
}

/// A residual added in a matmul's epilogue is read from HBM by the epilogue: f32 [4096,256] x [256,1024] plus a
/// [4096,1024] parameter `z` is one MXU kernel, and costs the same kernel with the result added to itself plus
/// `z`'s 4096 x 1024 x 4 = 16,777,216 bytes at the chip's fitted HBM rate (`hbm_bytes_per_cycle`): `z` is read
/// by no dot, so neither prefetch puts it on chip. (dcn_cross.013 on v6e: the compiler's one kernel reads its x0
/// once for the dot and once for the epilogue, 227,980 cycles, 1.26 times the HBM time of the three transfers.)
#[test]
fn an_epilogue_reads_its_residual_from_hbm() {
    let module = |root: &str, extra: &str| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = f32[4096,256]{{1,0}} parameter(0)\n  \
             w = f32[256,1024]{{1,0}} parameter(1)\n{extra}  \
             d = f32[4096,1024]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
             ROOT r = f32[4096,1024]{{1,0}} add({root})\n}}\n"
        )
    };
    let with = module("d, z", "  z = f32[4096,1024]{1,0} parameter(2)\n");
    let without = module("d, d", "");
    for chip in ["v5e", "v6e"] {
        let (a, b) = (cost_on(&with, chip), cost_on(&without, chip));
        assert_eq!((a.kernels.len(), b.kernels.len()), (1, 1), "{chip}: {:#?}", a.kernels);
        let expected = 16_777_216.0 / params(chip).hbm_bytes_per_cycle;
        let added = a.total_cycles as f64 - b.total_cycles as f64;
        assert!(
            (added - expected).abs() <= 1.0,
            "{chip}: the residual adds {added} cycles, expected {expected}"
        );
    }
}

/// `y = x W` summed over its rows, x f32[29824,169] (the larger operand, prefetched on chip) and W [169,N]: the
/// sum joins the matmul's kernel, so the kernel writes only f32[N] and its cost is the MXU's and the epilogue's.
fn row_sum_module(n: u64) -> String {
    format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         ENTRY main {{\n  x = f32[29824,169]{{1,0}} parameter(0)\n  w = f32[169,{n}]{{1,0}} parameter(1)\n  \
         y = f32[29824,{n}]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         zero = f32[] constant(0)\n  ROOT s = f32[{n}]{{0}} reduce(y, zero), dimensions={{0}}, to_apply=add\n}}\n"
    )
}

/// A result 84 columns wide over 29,824 rows is computed transposed (mlp.013's first layer, whose compiler fusion
/// costs 6,064 cycles on v6e). Untransposed, N = 84 and N = 128 both take one MXU pass per row (29,824 rows over
/// v6e's four 256-wide MXUs, one contracting block of 169 <= 256: 7,456 cycles) and fill the same 128-lane result
/// tiles, so they would cost the same; transposed, 84 rows (88 padded) make ceil(29,824 / 256) = 117 column
/// passes, 88 x 117 / 4 = 2,574 cycles: N = 84 costs less. N = 130 fills more than a lane tile's 128 columns and
/// is not transposed: it costs at least N = 128's.
#[test]
fn a_result_narrower_than_the_lanes_is_computed_transposed() {
    let cost = |n: u64| {
        let c = cost_on(&row_sum_module(n), "v6e");
        assert_eq!(c.kernels.len(), 1, "N = {n}: {:#?}", c.kernels);
        c.total_cycles
    };
    let (narrow, full, wide) = (cost(84), cost(128), cost(130));
    assert!(narrow < full, "N = 84 {narrow} cycles, N = 128 {full}");
    assert!(wide >= full, "N = 130 {wide} cycles, N = 128 {full}");
}
