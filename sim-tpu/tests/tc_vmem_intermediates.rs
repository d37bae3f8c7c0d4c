//! The op model's VMEM-resident intermediates (`tensorcore::intermediates`): on v5e, v6e and tpu7x the compiler
//! places the arrays between a convolution's kernels in VMEM while they fit the VMEM beside the scoped window,
//! and a copy between two such arrays is a local move, costed by its bytes, not a relayout streamed from HBM.
//! Placements and byte counts are worked by hand from the shapes; the per-chip flag and budgets come from the
//! calibration, the compiler's cycles from the corpus records (tools/corpus/gen_ops.py seed 25).

mod support;
use sim_tpu::tensorcore::{cost, kernels, ChipModel};
use support::conv::{conv, error};

/// Cycles of a VMEM-to-VMEM copy of `bytes` read and `bytes` written on `chip`, as the rule states it.
fn vmem_copy(chip: &ChipModel, bytes: u64) -> u64 {
    (2.0 * bytes as f64 / chip.params.vmem_copy_bytes_per_cycle).round() as u64
}

#[test]
fn copies_between_vmem_intermediates_cost_their_bytes_on_chips_that_place_them() {
    // C25.conv2d_nhwc.001: f32[4,56,56,29] 1x1 -> 256. Kernels: the input copy (rows in the lanes: 4 x 56 rows
    // of 32 channel sublanes x 128 lanes, bf16: 1,835,008 bytes), its copy channel-minor (the same bytes), the
    // fusion, the result's copy into (H, W, N, C) (f32[4,56,56,256]: 4 x 56 x 56 x 256 x 4 = 12,845,056 bytes,
    // no padding) and the entry copy. Every intermediate is far under the budgets (v5e 112 MiB, v6e 96, tpu7x
    // 32), so kernels 1 and 3 are copies between VMEM arrays there.
    let op = conv([4, 56, 56, 29], [1, 1, 29, 256], 1, "SAME", "float32");
    let input_copy = 4 * 56 * 32 * 128 * 2;
    let result = 4 * 56 * 56 * 256 * 4;
    for name in ["v5e", "v6e", "tpu7x"] {
        let chip = ChipModel::preset(name).unwrap();
        assert!(chip.vmem_intermediates, "{name}");
        let c = cost(&op, &chip).unwrap();
        assert_eq!(c.kernels[1].cycles, vmem_copy(&chip, input_copy), "{name}");
        assert_eq!(c.kernels[3].cycles, vmem_copy(&chip, result), "{name}");
        // The entry copy writes HBM: still a launch plus its relayout.
        assert!(c.kernels[4].cycles > chip.params.launch_cycles as u64, "{name}");
    }
    // The compiler's second copy on v5e and v6e: 400 cycles (16,112 on v5p, whose intermediates are in HBM);
    // the result copy 1,584 on v6e and tpu7x.
    let v6e = ChipModel::preset("v6e").unwrap();
    let c = cost(&op, &v6e).unwrap();
    assert!(error(c.kernels[1].cycles, 400) < 1.0, "{}", c.kernels[1].cycles);
    assert!(error(c.kernels[3].cycles, 1584) < 1.0, "{}", c.kernels[3].cycles);
    // v4 and v5p keep them in HBM: every copy pays a launch and its relayout.
    for name in ["v4", "v5p"] {
        let chip = ChipModel::preset(name).unwrap();
        assert!(!chip.vmem_intermediates, "{name}");
        let c = cost(&op, &chip).unwrap();
        for i in [1, 3] {
            assert!(
                c.kernels[i].cycles > chip.params.launch_cycles as u64,
                "{name} kernel {i}"
            );
        }
    }
}

#[test]
fn an_intermediate_that_does_not_fit_beside_its_input_goes_to_hbm() {
    // C25.conv2d_nhwc.011: bf16[4,224,224,54] 1x1 stride 2 -> 23. The input copy puts the rows in the lanes:
    // 4 x 224 rows of 56 channel sublanes (54 padded to 8s) x 256 lanes (224 padded to 128s), bf16:
    // 25,690,112 bytes; the second copy writes as many. On tpu7x the budget is 32 MiB (33,554,432 bytes): the
    // first copy's result fits alone, but the second's does not fit beside it (51,380,224 bytes), so it is
    // written to HBM, as the compiler does (its `copy.1` is not `S(1)`: 146,988 cycles, where v6e's costs 5,600);
    // the fusion's small result fits again, and its copy is a VMEM one (900 cycles on tpu7x, v5e and v6e).
    let op = conv([4, 224, 224, 54], [1, 1, 54, 23], 2, "SAME", "bfloat16");
    let copy = 4 * 224 * 56 * 256 * 2;
    let tpu7x = ChipModel::preset("tpu7x").unwrap();
    let ks = kernels(&op, &tpu7x).unwrap();
    assert_eq!((ks[0].out_bytes, ks[1].in_bytes, ks[1].out_bytes), (copy, copy, copy));
    assert!(copy <= tpu7x.prefetch_budget_bytes && 2 * copy > tpu7x.prefetch_budget_bytes);
    let c = cost(&op, &tpu7x).unwrap();
    assert!(c.kernels[1].cycles > tpu7x.params.launch_cycles as u64);
    let fusion_result = ks[2].out_bytes;
    assert_eq!(c.kernels[3].cycles, vmem_copy(&tpu7x, fusion_result));
    // v6e's 96 MiB hold both copies' results: the second copy is a VMEM one.
    let v6e = ChipModel::preset("v6e").unwrap();
    let c = cost(&op, &v6e).unwrap();
    assert_eq!(c.kernels[1].cycles, vmem_copy(&v6e, copy));
    assert!(error(c.kernels[1].cycles, 5600) < 0.5, "{}", c.kernels[1].cycles);
}

#[test]
fn a_column_blocked_convolution_keeps_its_copies() {
    // C25.conv2d_nhwc.008: bf16[1,28,28,303] 3x3, a single image, column-blocked. Its blocking copies lie
    // between `S(1)` arrays on v6e but cost 3,838 and 3,264 cycles, VPU moves of the blocks: each keeps a launch
    // and its row relayout.
    let op = conv([1, 28, 28, 303], [3, 3, 303, 64], 1, "SAME", "bfloat16");
    let v6e = ChipModel::preset("v6e").unwrap();
    let c = cost(&op, &v6e).unwrap();
    let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names[1], "copy");
    assert!(c.kernels[1].cycles > v6e.params.launch_cycles as u64);
}
