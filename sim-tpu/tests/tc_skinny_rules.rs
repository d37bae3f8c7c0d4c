//! The op model's rules for skinny matmuls, read off the corpus op records (testdata/ops/corpus_records.jsonl.gz):
//! cross-program prefetch of the larger operand, and N = 1 as a VPU matrix-vector product. Expected values are
//! worked by hand here or taken from the compiler's records, never from the model.

mod support;
use sim_tpu::tensorcore::cost::{prefetched, Residency};
use sim_tpu::tensorcore::lower::Work;
use sim_tpu::tensorcore::{cost, kernels, ChipModel, OpSpec};
use support::ops::matmul;

fn mxu_of(op: &OpSpec, chip: &ChipModel) -> (sim_tpu::tensorcore::lower::MxuWork, u64) {
    let ks = kernels(op, chip).unwrap();
    match &ks[0].work {
        Work::Mxu(w) => (w.clone(), ks[0].in_bytes),
        other => panic!("expected an MXU kernel, got {other:?}"),
    }
}

#[test]
fn the_larger_operand_is_prefetched_when_it_fits_else_the_smaller() {
    let v5e = ChipModel::preset("v5e").unwrap();
    // bf16 [8, 4096] x [4096, 4096]: weight 4096 x 4096 x 2 B = 32 MiB <= 112 MiB (VMEM 128 less the 16 MiB
    // scoped window): the weight is prefetched.
    let (w, inb) = mxu_of(&matmul(8, 4096, 4096, "bfloat16"), &v5e);
    assert_eq!(
        prefetched(&w, inb, &v5e),
        Residency {
            lhs: false,
            rhs: true,
            out: false
        }
    );
    // [8, 8192] x [8192, 16384]: weight 256 MiB does not fit; the activation (8 x 8192 x 2 B = 128 KiB) does.
    let (w, inb) = mxu_of(&matmul(8, 8192, 16384, "bfloat16"), &v5e);
    assert_eq!(
        prefetched(&w, inb, &v5e),
        Residency {
            lhs: true,
            rhs: false,
            out: false
        }
    );
    // tpu7x's budget is 32 MiB (64 MiB VMEM less a 32 MiB window): a 48 MiB weight [4096 x 6144] is not
    // prefetched, the 64 KiB activation is.
    let t7 = ChipModel::preset("tpu7x").unwrap();
    let (w, inb) = mxu_of(&matmul(8, 4096, 6144, "bfloat16"), &t7);
    assert_eq!(
        prefetched(&w, inb, &t7),
        Residency {
            lhs: true,
            rhs: false,
            out: false
        }
    );
}

#[test]
fn decode_matmul_with_a_prefetched_weight_is_not_charged_the_weight_stream() {
    // Compiler record C25.matmul.023 (v5e): bf16 [2, 986] x [986, 11801], total_estimated_cycles 10,576, with the
    // 22.5 MiB weight prefetched by `copy-start ... cross_program_prefetch_index=0`. Streaming the weight from HBM
    // alone would take 986 x 11,904 (N padded to 128) x 2 B / 491 B per cycle (738 GB/s at 1.503 GHz) = 47,809
    // cycles, 4.5x the compiler's figure: the model must stay under that and within 50% of the record.
    let v5e = ChipModel::preset("v5e").unwrap();
    let c = cost(&matmul(2, 986, 11801, "bfloat16"), &v5e).unwrap();
    assert!(c.cycles < 47_809, "{}", c.cycles);
    let err = (c.cycles as f64 / 10_576.0).max(10_576.0 / c.cycles as f64) - 1.0;
    assert!(err < 0.5, "pred {} vs compiler 10,576", c.cycles);
}

#[test]
fn matrix_times_vector_is_a_vpu_kernel_except_where_the_mxu_takes_it() {
    // bf16 [512, 14151] x [14151, 1]: the compiler emits a multiply-reduce loop fusion on v4-v6e (record
    // C25.matmul.008: v4 104,231 cycles) and one convolution fusion on tpu7x.
    let op = matmul(512, 14151, 1, "bfloat16");
    for chip in ["v4", "v5e", "v5p", "v6e"] {
        let ks = kernels(&op, &ChipModel::preset(chip).unwrap()).unwrap();
        assert!(matches!(ks[0].work, Work::Vpu { .. }), "{chip}: {:?}", ks[0].work);
    }
    let ks = kernels(&op, &ChipModel::preset("tpu7x").unwrap()).unwrap();
    assert!(matches!(ks[0].work, Work::Mxu(_)));
}
