//! A matrix-vector product (a dot with M = 1 or N = 1 and no batch) is not MXU work below tpu7x: the compiler
//! emits a multiply-reduce loop fusion over the matrix on the VPU, which the op model times as its `Matvec`
//! class (`ChipModel::matvec_on_mxu` says where the MXU takes it instead).
//!
//! Evidence (compiler corpus): decode_matmul.003 (bf16 [1,1536] x [1536,768]) and decode_matmul.019 ([1,5888] x
//! [5888,1066]) are on v6e a kLoop fusion of broadcast, multiply and reduce (12,365 and 58,400 cycles), not a
//! convolution fusion; the MXU window plan gave 4,228 and 12,542. The op model's rule is read off the corpus op
//! records the same way (`tensorcore::lower`).

use sim_core::layout::{ArrayShape, Dim, Shape};

use super::bytes::{dims_of, Sizer};
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;
use crate::tensorcore::cost::{time_kernel, Residency};
use crate::tensorcore::lower::{Kernel, MxuWork, VpuClass, Work, VREG_ELEMENTS};
use crate::tensorcore::ChipModel;

/// The op model's matrix-vector kernel for MXU kernel `k` when its only dot `work` (node `dot`) is a matrix
/// times a vector on a chip that runs those on the VPU, with the cycles of its relayout kernels
/// ([`relayout_cycles`]); `None` otherwise.
#[allow(clippy::too_many_arguments)]
pub(super) fn matvec_kernel(
    g: &Graph<'_>,
    k: &Group,
    dot: usize,
    work: &MxuWork,
    bytes: (u64, u64, u64),
    sizer: &Sizer,
    chip: &ChipModel,
    loop_block_cycles: f64,
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
    // The vector: the other operand.
    let vector = if work.m == 1 {
        node.operands.first()
    } else {
        node.operands.get(1)
    };
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
    let mut kc = time_kernel(&kernel, chip);
    kc.cycles = kc
        .cycles
        .saturating_add(relayout_cycles(g, k, vector.copied(), sizer, chip, loop_block_cycles)?);
    Ok(Some(kc))
}

/// Cycles of the relayout kernels around a matrix-vector product on the VPU. The multiply-reduce fusion reads
/// its vector and writes its result as 1-D arrays; a vector that is an entry parameter of shape [K,1] or [1,K],
/// and a result the entry returns as [M,1] or [1,N], is moved between the two layouts by a kernel of its own (a
/// `reduce` over the unit dimension for the vector, a `reshape` for the result), unless the move is a bitcast:
/// 32-bit elements whose 2-D (T(1,128)) and 1-D (T(256..1024)) layouts take the same padded bytes. Each such
/// kernel costs the chip's loop launch plus, per 128 elements (one vreg of the degenerate array: one useful
/// row of 8 sublanes), the loop pipeline's per-block cycles (`loop_block_cycles`, fitted on loop fusions).
///
/// Evidence (compiler corpus, optimized modules of the matvec and decode_matmul families with N = 1 or M = 1,
/// v4, v5e, v5p, v6e): every bf16 record has both kernels; matvec.016 on v6e (bf16 [384,512] x [512,1]):
/// `reduce` bf16[512] 2,136 cycles, the multiply-reduce fusion 3,572, `reshape` bf16[384,1] 2,133, where
/// launch 2,116 plus 4 and 3 blocks of 5.97 give 2,140 and 2,134; matvec.018 (K 12,252, M 1,792): 2,612 and
/// 2,204 (rule: 2,687 and 2,200); matvec.001 (M 18,560): `reshape` 3,046 (rule: 2,982). f32 moves that are
/// bitcasts have no kernel: matvec.012 (K 3,072: [3072] is T(1024), 3,072 either way) has no `reduce`,
/// matvec.013 (M 432: [432] is T(512), 512 either way) and matvec.015 (M 256) no `reshape`.
pub(super) fn relayout_cycles(
    g: &Graph<'_>,
    k: &Group,
    vector: Option<usize>,
    sizer: &Sizer,
    chip: &ChipModel,
    loop_block_cycles: f64,
) -> Result<u64, HloError> {
    let outputs = g.outputs();
    let mut moved: Vec<usize> = Vec::new();
    if let Some(v) = vector.filter(|&v| g.nodes[v].param.is_some()) {
        moved.push(v);
    }
    moved.extend(k.outputs.iter().copied().filter(|o| outputs.contains(o)));
    let mut cycles = 0u64;
    for n in moved {
        let Some(len) = degenerate_length(&g.nodes[n].ins.shape) else {
            continue;
        };
        if relayout_is_bitcast(&g.nodes[n].ins.shape, len, sizer)? {
            continue;
        }
        let blocks = len.div_ceil(128) as f64 * loop_block_cycles.max(0.0);
        cycles = cycles.saturating_add(chip.loop_launch_cycles().saturating_add(blocks.round() as u64));
    }
    Ok(cycles)
}

/// The length of a rank-2 array with one unit dimension ([n,1] or [1,n]); `None` for any other shape.
fn degenerate_length(s: &Shape) -> Option<u64> {
    match dims_of(s).as_slice() {
        [1, n] | [n, 1] if matches!(s, Shape::Array(_)) => Some(*n),
        _ => None,
    }
}

/// Whether the 2-D degenerate array `s` of `len` elements and its 1-D form are one buffer: 32-bit elements
/// and the same padded bytes (sub-32-bit elements pack pairs of rows, so their 2-D tiles never match).
fn relayout_is_bitcast(s: &Shape, len: u64, sizer: &Sizer) -> Result<bool, HloError> {
    let Shape::Array(a) = s else { return Ok(false) };
    if a.element_type.bit_width() != 32 {
        return Ok(false);
    }
    let flat = ArrayShape {
        element_type: a.element_type,
        dims: vec![Dim::Static(len as i64)],
        layout: None,
    };
    Ok(sizer.array(&flat)?.padded_bytes == sizer.shape(s)?.padded_bytes)
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
