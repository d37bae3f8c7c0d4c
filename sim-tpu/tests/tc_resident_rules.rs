//! The op model's rules for 8-bit stationary transposes and for MXU kernels whose operands and result an op keeps
//! in VMEM (`tensorcore::stationary::packed_transpose_share`, `tensorcore::intermediates::Placement::residency`,
//! `tensorcore::cost::result_drain_cycles`). Expected cycles are worked from the shapes in each test; the
//! compiler's cycles come from the op corpus (tools/corpus/gen_ops.py seed 25).

mod support;
use sim_tpu::tensorcore::{cost, ChipModel};
use support::conv::{conv, error};
use support::ops::matmul;

/// `chip` with a transpose unit so slow that an int8 K-minor weight's transposes are all its MXU kernel costs,
/// and no other per-window cost beside them.
fn transpose_bound(name: &str, rate: f64) -> ChipModel {
    let mut chip = ChipModel::preset(name).unwrap();
    let p = &mut chip.params;
    p.mxu_weight_transpose_cycles = rate;
    p.mxu_iter_cycles = 0.0;
    p.mxu_weight_load_cycles = 0.0;
    p.mm_acc_32bit = 0.0;
    p.mm_out_32bit = 0.0;
    p.mm_8bit_widen = 0.0;
    p.mm_int8_retile = 0.0;
    p.mm_int8_ragged = 0.0;
    chip
}

#[test]
fn an_int8_weight_transposes_packed_on_a_chip_with_an_int8_mxu() {
    // C25.matmul8.016: int8 [8,5864] x [5864,3921], the weight stored {0,1} (K in the lanes). On v5e (128-wide
    // MXUs, 4 of them) it has ceil(5864/128) = 46 contracting blocks by ceil(3921/128) = 31 column passes:
    // 1,426 blocks, 356.5 per MXU. At 1,000 transpose cycles a bf16 block, the int8 MXU (2x) moves a packed
    // int8 block in 500: 178,250 cycles, against 356,500 at the full rate; the 8 rows' MXU pushes (2 per block
    // and MXU) and the activation's DMA are under 1 % of it.
    let op = matmul(8, 5864, 3921, "int8");
    let chip = transpose_bound("v5e", 1000.0);
    assert_eq!(chip.params.mxu_int8_speedup, 2.0);
    let body = cost(&op, &chip).unwrap().cycles - chip.params.mxu_launch_cycles.round() as u64;
    let packed = 46.0 * 31.0 / 4.0 * 1000.0 / 2.0;
    assert!((body as f64 / packed - 1.0).abs() < 0.02, "{body} against {packed}");
    // v4 has no int8 MXU path: the block costs the full rate (46 x 31 blocks over 4 MXUs of 128).
    let v4 = transpose_bound("v4", 1000.0);
    let body = cost(&op, &v4).unwrap().cycles - v4.params.mxu_launch_cycles.round() as u64;
    let full = 46.0 * 31.0 / 4.0 * 1000.0;
    assert!((body as f64 / full - 1.0).abs() < 0.02, "{body} against {full}");
    // Against the compiler with the installed constants: v5e 10,159 cycles (1.99x over at the full rate),
    // .000 ([8,4480] x [4480,2073]) 6,449 (1.66x).
    let v5e = ChipModel::preset("v5e").unwrap();
    for (op, compiler) in [
        (matmul(8, 5864, 3921, "int8"), 10_159),
        (matmul(8, 4480, 2073, "int8"), 6_449),
    ] {
        let pred = cost(&op, &v5e).unwrap().cycles;
        assert!(error(pred, compiler) < 0.25, "{pred} against {compiler}");
    }
}

#[test]
fn a_convolution_between_vmem_intermediates_streams_nothing_and_drains_no_f32_result() {
    // C25.conv2d_nhwc.001: f32[4,56,56,29] 1x1 -> 256. On v5e, v6e and tpu7x its input copies and its result
    // are VMEM intermediates (`intermediates::place`), so the convolution fusion (kernel 2) neither streams its
    // 12,845,056-byte f32 result (4 x 56 x 56 x 256 x 4) to HBM nor drains its 3,136 result vregs
    // (12,544 x 256 / 1,024) at the HBM-paced `mm_out_32bit`: its cycles do not move with the drain rate, and
    // a tenth of the HBM rate adds at most the f32 weight's window bytes (an entry parameter, its K of 29 in one
    // 128-deep block: 128 x 256 x 4 = 131,072) twice over, not the result's 12.8 MB.
    let op = conv([4, 56, 56, 29], [1, 1, 29, 256], 1, "SAME", "float32");
    for name in ["v5e", "v6e", "tpu7x"] {
        let base = ChipModel::preset(name).unwrap();
        let mut slow = base.clone();
        slow.params.mm_out_32bit = 100.0;
        let a = cost(&op, &base).unwrap().kernels[2].cycles;
        assert_eq!(a, cost(&op, &slow).unwrap().kernels[2].cycles, "{name}");
        slow.hbm.op_stream_bytes_per_cycle /= 10.0;
        let b = cost(&op, &slow).unwrap().kernels[2].cycles;
        let weight = 2.0 * 131_072.0 / slow.hbm.op_stream_bytes_per_cycle;
        assert!((b - a) as f64 <= weight, "{name}: {a} -> {b}, weight {weight}");
    }
    // v5p keeps them in HBM: the same change adds at least the 3,136 vregs' drain at 100 cycles each.
    let base = ChipModel::preset("v5p").unwrap();
    let mut slow = base.clone();
    slow.params.mm_out_32bit = 100.0;
    let a = cost(&op, &base).unwrap().kernels[2].cycles;
    let b = cost(&op, &slow).unwrap().kernels[2].cycles;
    assert!(b - a >= 3_136 * 90, "{a} -> {b}");
    // The compiler: 35,903 cycles on v6e (tpusim 46,536 before the rules), 62,908 on v5e (103,218).
    for (name, compiler, bound) in [("v6e", 35_903, 0.10), ("v5e", 62_908, 0.30)] {
        let pred = cost(&op, &ChipModel::preset(name).unwrap()).unwrap().cycles;
        assert!(error(pred, compiler) < bound, "{name}: {pred} against {compiler}");
    }
}
