//! A matrix-vector product (a dot with M = 1 or N = 1 and no batch) is not MXU work below tpu7x: the compiler
//! emits a multiply-reduce loop fusion over the matrix on the VPU, which the op model times as its `Matvec`
//! class (`ChipModel::matvec_on_mxu` says where the MXU takes it instead).
//!
//! Evidence (compiler corpus): decode_matmul.003 (bf16 [1,1536] x [1536,768]) and decode_matmul.019 ([1,5888] x
//! [5888,1066]) are on v6e a kLoop fusion of broadcast, multiply and reduce (12,365 and 58,400 cycles), not a
//! convolution fusion; the MXU window plan gave 4,228 and 12,542. The op model's rule is read off the corpus op
//! records the same way (`tensorcore::lower`).

use super::bytes::Sizer;
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;
use crate::tensorcore::cost::{time_kernel, Residency};
use crate::tensorcore::lower::{Kernel, MxuWork, VpuClass, Work, VREG_ELEMENTS};
use crate::tensorcore::ChipModel;

/// The op model's matrix-vector kernel for MXU kernel `k` when its only dot `work` (node `dot`) is a matrix
/// times a vector on a chip that runs those on the VPU; `None` otherwise.
pub(super) fn matvec_kernel(
    g: &Graph<'_>,
    k: &Group,
    dot: usize,
    work: &MxuWork,
    bytes: (u64, u64, u64),
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<Option<crate::tensorcore::KernelCost>, HloError> {
    let dots = k
        .members
        .iter()
        .filter(|&&m| matches!(g.nodes[m].class, OpClass::Dot | OpClass::Convolution))
        .count();
    let node = &g.nodes[dot];
    let vector = (work.m == 1 || work.n == 1) && work.batch == 1;
    if k.kind != KernelKind::Mxu || dots != 1 || node.class != OpClass::Dot || !vector || chip.matvec_on_mxu {
        return Ok(None);
    }
    // The matrix: the right operand when the vector is on the left (M = 1), else the left.
    let matrix = if work.m == 1 {
        node.operands.get(1)
    } else {
        node.operands.first()
    };
    let Some(&matrix) = matrix else { return Ok(None) };
    let s = sizer.shape(&g.nodes[matrix].ins.shape)?;
    let (in_bytes, out_bytes, unpadded) = bytes;
    let kernel = Kernel {
        name: "loop fusion",
        work: Work::Vpu {
            class: VpuClass::Matvec,
            blocks: s.padded_elements as f64 / VREG_ELEMENTS as f64,
            elem_bytes: work.dtype.bytes(),
        },
        in_bytes,
        out_bytes,
        unpadded_bytes: unpadded,
    };
    Ok(Some(time_kernel(&kernel, chip)))
}

/// Fewer result columns than this (N = 2..7, a matrix times a few vectors) make the compiler transpose the
/// product.
const SKINNY_N: u64 = 8;

/// A product with a few result columns and many rows (N < 8 <= 128 <= M, no batch) computed transposed, as the
/// compiler does: the result is laid out with its rows on the lanes (`{0,1}`), so the MXU sees M' = N and
/// N' = M and the result is not padded to 128 lanes per row. Evidence (compiler corpus, matvec family, N = 2-4):
/// every record's result is `[M,N]{0,1}` (matvec.009 on v4: bf16[28416,2]{0,1:T(2,128)(2,1)}, 13,319 cycles,
/// where the untransposed window plan, writing 28,416 rows of 128 padded lanes, gave 62,675).
pub(super) fn skinny_transposed(w: MxuWork, residency: Residency) -> (MxuWork, Residency) {
    if w.batch != 1 || w.conv || w.n >= SKINNY_N || w.n < 2 || w.m < 128 {
        return (w, residency);
    }
    let t = MxuWork { m: w.n, n: w.m, ..w };
    (
        t,
        Residency {
            lhs: residency.rhs,
            rhs: residency.lhs,
            out: residency.out,
        },
    )
}
