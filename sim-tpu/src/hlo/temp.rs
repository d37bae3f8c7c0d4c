//! Temp rules read off the compiler's buffer assignment (`memory_analysis()` temp bytes and the `S(1)` VMEM
//! placements of the corpus's optimized modules), one function each with its evidence:
//! - values the compiler writes to HBM for one kernel only, in a small kernel of its own just before, which
//!   tpusim's kernels do not write as outputs: a scalar reduction before its epilogue, a matrix-vector
//!   product's vector relaid out ([`kernel_scratch`], added to the HBM live at that kernel);
//! - results no core can keep in its VMEM on a megacore chip without CMEM ([`written_by_both_cores`]);
//! - a narrow gather table's row-major copy there ([`gather_table_copy_bytes`]);
//! - a loop's f32 inputs' bf16 copies on a megacore chip without CMEM ([`loop_copy_bytes`]);
//! - a loop's state, which takes over its initial values' buffers ([`loop_result_bytes`]);
//! - a convolution result copied out to the entry's layout that the on-chip budget cannot hold
//!   ([`copied_out_result_bytes`]).
//!
//! Kernel scratch carries none of the fitted allocation overhead: each record where it is the only temporary
//! reports exactly one 16 KiB granule (reduction.001, .011, .017, .023 on all five chips; decode_matmul.003 on
//! v5p).

use super::bytes::{dims_of, Sizer};
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;

/// HBM bytes each kernel of `kernels` needs only while it runs (one entry per kernel): its scalar reductions'
/// results ([`scalar_reduction_bytes`]) and, where `vectors_in_hbm` (a megacore chip without CMEM), its
/// matrix-vector product's relaid-out vector ([`matvec_vector_bytes`]).
pub(super) fn kernel_scratch(
    g: &Graph<'_>,
    kernels: &[Group],
    sizer: &Sizer,
    vectors_in_hbm: bool,
) -> Result<Vec<u64>, HloError> {
    kernels
        .iter()
        .map(|k| {
            let vector = if vectors_in_hbm { matvec_vector_bytes(g, k) } else { 0 };
            Ok(scalar_reduction_bytes(g, k, sizer)?.saturating_add(vector))
        })
        .collect()
}

/// Bytes of the scalar reductions of kernel `k` that another member of `k` reads (a mean's `/ N`, a loss's
/// negation): the compiler ends a fusion at a reduction to a scalar and writes the scalar to HBM, where the
/// epilogue reads it back (tpusim's kernel holds both, [`super::fusion`]).
///
/// Evidence (compiler corpus, optimized modules): reduction.001 (`mean(x * x)` over f32[128,14814]) is on every
/// chip `multiply_reduce_fusion = f32[]{:T(128)}` in HBM then `multiply` reading it; temp 16,384 B, one granule
/// holding the 512-byte scalar (so are reduction.011, .017 and .023, the other means to a scalar). Reductions
/// keeping a dimension end their kernel themselves (reduction.008 `mean` over one axis: temp 0), and a convert
/// after the scalar is folded into the reduction (reduction.005, a bf16 sum accumulated in f32, is one `reduce`
/// to `bf16[]`: temp 0).
fn scalar_reduction_bytes(g: &Graph<'_>, k: &Group, sizer: &Sizer) -> Result<u64, HloError> {
    let mut bytes = 0u64;
    for &m in &k.members {
        let n = &g.nodes[m];
        if n.class != OpClass::Reduce || n.ins.opcode != "reduce" || k.outputs.contains(&m) {
            continue;
        }
        let scalar = matches!(&n.ins.shape, sim_core::layout::Shape::Array(a) if a.dims.is_empty());
        // A convert is folded into the reduction (it reduces in the converted type): no epilogue.
        let read_here = g.users[m]
            .iter()
            .any(|u| k.members.contains(u) && g.nodes[*u].ins.opcode != "convert");
        if scalar && read_here {
            bytes = bytes.saturating_add(sizer.shape(&n.ins.shape)?.padded_bytes);
        }
    }
    Ok(bytes)
}

/// Elements of the compiler's one-dimensional vector tile: a vector laid out `{0:T(1024)}`.
const VECTOR_TILE: u64 = 1024;

/// Bytes of the vector operand of kernel `k`'s matrix-vector product (M = 1 or N = 1, no batch, its only dot)
/// when that vector is an entry parameter the compiler must relay out: it reduces the `[K,1]` or `[1,K]`
/// parameter over its unit dimension into a `[K]` vector (K padded to 1,024 elements), written to HBM on a
/// megacore chip without CMEM, where both cores read it; an f32 vector whose K is a multiple of 1,024 is the
/// same bytes and is only bitcast.
///
/// Evidence (compiler corpus, v5p, optimized modules): matvec.001 (bf16 [18560,1218] x [1218,1]) has `reduce.2 =
/// bf16[1218]{0:T(1024)}` in HBM before `multiply_reduce_fusion`: temp 16,384 B; matvec.018 (K = 12,252 bf16,
/// 24,576 padded bytes): 32,768; matvec.013 (f32 K = 8,211, 36,864): 49,152; decode_matmul.003, .005, .010,
/// .019, .021, .023, .027 (M = 1) one granule each. matvec.012 (f32 K = 3,072) bitcasts `v` to
/// `f32[3072]{0:T(1024)}`: temp 0. On v4, v5e, v6e and tpu7x the same `reduce` is in VMEM (`S(1)`): temp 0.
fn matvec_vector_bytes(g: &Graph<'_>, k: &Group) -> u64 {
    if k.kind != KernelKind::Mxu {
        return 0;
    }
    let mut dots = k
        .members
        .iter()
        .filter(|&&m| matches!(g.nodes[m].class, OpClass::Dot | OpClass::Convolution));
    let (Some(&dot), None) = (dots.next(), dots.next()) else {
        return 0;
    };
    let node = &g.nodes[dot];
    if node.class != OpClass::Dot
        || !node.ins.int_list("lhs_batch_dims").unwrap_or_default().is_empty()
        || node.operands.len() != 2
    {
        return 0;
    }
    let contracting = |side: &str| {
        node.ins
            .int_list(&format!("{side}_contracting_dims"))
            .unwrap_or_default()
    };
    // Elements of an operand outside its contracting dimensions (M for the left, N for the right).
    let free = |o: usize, side: &str| -> u64 {
        let c = contracting(side);
        dims_of(&g.nodes[o].ins.shape)
            .iter()
            .enumerate()
            .filter(|(i, _)| !c.contains(&(*i as i64)))
            .map(|(_, d)| *d)
            .product()
    };
    let (lhs, rhs) = (node.operands[0], node.operands[1]);
    let vector = if free(lhs, "lhs") == 1 {
        lhs
    } else if free(rhs, "rhs") == 1 {
        rhs
    } else {
        return 0;
    };
    let v = &g.nodes[vector];
    let sim_core::layout::Shape::Array(a) = &v.ins.shape else {
        return 0;
    };
    if v.ins.opcode != "parameter" {
        return 0;
    }
    let elements: u64 = dims_of(&v.ins.shape).iter().product();
    let elem_bytes = a.element_type.byte_width().max(1);
    if elem_bytes == 4 && elements.is_multiple_of(VECTOR_TILE) {
        return 0;
    }
    elements.div_ceil(VECTOR_TILE) * VECTOR_TILE * elem_bytes
}

/// Whether kernel `k`'s results are written (or read) by both cores of a megacore chip, so that on one without
/// CMEM they cannot stay in one core's VMEM: an MXU kernel's (the temp model's rule since the first corpus), a
/// gather's rows, and a loop's initial state, which both cores' loop bodies read.
///
/// Evidence for gathers (compiler corpus, optimized modules): embedding.000 (257 rows of a bf16[88182,256]
/// table, then a scalar loss and the table's gradient) writes `gather_fusion = bf16[257,256]` to HBM on v5p
/// (temp 180,224 B: the rows' 135,168 padded bytes and the loss's scalar) and to `S(1)` on v6e (temp 49,152);
/// embedding.001, .005, .011 likewise (`gather_fusion` without `S(1)` on v5p only).
///
/// Evidence for a loop's initial state (compiler corpus, temp bytes on v5p, fwd+bwd scans whose loops start
/// from kernels' results): with it tpusim moves from 16 to 160 KiB on scan.013 (compiler 6,832), 16 to 272 on
/// scan.012 (4,256), 192 to 2,432 on scan.004 (6,816), 1,328 to 6,864 on scan.002 (17,280), and closer on
/// scan.001, .003, .009 and .010, no v5p record further; on v6e the same records' temp is one granule or a few
/// (144-192 KiB): their state stays in VMEM.
pub(super) fn written_by_both_cores(g: &Graph<'_>, k: &Group) -> bool {
    k.kind == KernelKind::Mxu || g.nodes[k.anchor].ins.opcode == "gather" || feeds_loop(g, k)
}

/// Whether an output of kernel `k` is part of a `while` loop's initial state (directly or through its tuple).
fn feeds_loop(g: &Graph<'_>, k: &Group) -> bool {
    let is_while = |u: usize| g.nodes[u].ins.opcode == "while";
    k.outputs.iter().any(|&o| {
        g.users[o]
            .iter()
            .any(|&u| is_while(u) || g.nodes[u].ins.opcode == "tuple" && g.users[u].iter().any(|&w| is_while(w)))
    })
}

/// HBM bytes around a gather kernel `k` of the entry whose table the compiler copies before gathering
/// ([`super::relayout::gather_copies`]) on a megacore chip without CMEM, when the copy is a relayout: a table
/// narrower than one 128-lane row is an entry parameter in column-major layout (`{0,1}`), copied to row-major
/// (`{1,0:T(8,128)}`) in HBM, and read by the gather writing the rows, so both are live at once. A wider table
/// is already row-major and is prefetched into VMEM instead. On other chips the copy is in VMEM (or CMEM).
///
/// Evidence (compiler corpus, v5p): embedding.001 (table bf16[5754,100]{0,1}, 256 ids): `copy =
/// bf16[5754,100]{1,0:T(8,128)(2,1)}` and `gather_fusion = bf16[256,100]` in HBM, 5,760 x 128 x 2 = 1,474,560
/// and 256 x 128 x 2 = 65,536 B, 1,540,096 B together against the compiler's 1,556,480 (one granule more);
/// embedding.007 (f32[1440,16], 128 ids): 737,280 + 65,536 = 802,816 B against 835,584; embedding.000 (table
/// bf16[88182,256]{1,0}) is prefetched (`copy-start` into `S(1)`): no copy in HBM. The same records' temp is 0
/// on v4, v5e, v6e and tpu7x (embedding.001, .005) or the rows alone (.000, .007).
pub(super) fn gather_table_copy_bytes(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &crate::tensorcore::ChipModel,
) -> Result<u64, HloError> {
    let anchor = &g.nodes[k.anchor];
    let Some(&table) = anchor.operands.first() else {
        return Ok(0);
    };
    let dims = dims_of(&g.nodes[table].ins.shape);
    if anchor.ins.opcode != "gather" || dims.len() != 2 || dims[1] >= LANES {
        return Ok(0);
    }
    if super::relayout::gather_copies(g, k, sizer, chip)?.0.is_none() {
        return Ok(0);
    }
    Ok(row_major_bytes(g, table).saturating_add(row_major_bytes(g, k.anchor)))
}

/// Lanes of a vector register row (the minor tile dimension).
const LANES: u64 = 128;

/// Bytes of node `n`'s array as a row-major matrix in (8, 128) tiles: the last dimension padded to 128 lanes,
/// the others collapsed into rows padded to 8 (the compiler's table copies and gathered rows: a gather's
/// `[256,1,100]` result is its `gather_fusion = bf16[256,100]`).
fn row_major_bytes(g: &Graph<'_>, n: usize) -> u64 {
    let sim_core::layout::Shape::Array(a) = &g.nodes[n].ins.shape else {
        return 0;
    };
    let dims = dims_of(&g.nodes[n].ins.shape);
    let elem_bytes = a.element_type.byte_width().max(1);
    let Some((&minor, rest)) = dims.split_last() else {
        return elem_bytes;
    };
    let rows: u64 = rest.iter().product();
    (rows.div_ceil(8) * 8)
        .saturating_mul(minor.div_ceil(LANES) * LANES)
        .saturating_mul(elem_bytes)
}

/// HBM bytes of the result of kernel `k`'s convolution before its copy to the entry's layout
/// ([`super::relayout::copied_out_conv`]) on a chip where MXU results may stay on chip, when the result (padded)
/// exceeds `budget`, the on-chip bytes for temporaries: the compiler writes it in the convolution's layout, a
/// temporary until the copy, and VMEM (or CMEM) cannot hold it. (On v5p it is in HBM at any size,
/// [`super::relayout::copy_temporaries`].)
///
/// Evidence (compiler corpus, optimized modules): resnet_block.005 (f32 N 27, 28 x 28, 2,048 channels) writes
/// `fusion.5 = f32[27,28,28,2048]{3,0,2,1}` (no `S(1)`) before the loop fusion writing the entry's
/// `{3,2,1,0}` result: temp 205,668,352 B on v4, v5e and v6e, the result's 205,520,896 padded bytes (27 rows
/// padded to 32) and 147,456 B of allocation; a result within the budget stays on chip (conv.011, f32
/// [9,17,17,145], 3.8 MB: temp 0 on v6e).
pub(super) fn copied_out_result_bytes(g: &Graph<'_>, k: &Group, sizer: &Sizer, budget: u64) -> Result<u64, HloError> {
    let Some(conv) = super::relayout::copied_out_conv(g, k, sizer)? else {
        return Ok(0);
    };
    let bytes = sizer.shape(&g.nodes[conv].ins.shape)?.padded_bytes;
    Ok(if bytes > budget { bytes } else { 0 })
}

/// Bytes of the result of `while` node `w` that are new buffers: a loop runs in place, its state in the buffers
/// of its initial values (whose producers' buffers live until the loop ends), so only the state elements read
/// after the loop by a kernel, not returned by the entry, count, as their buffers then outlive the loop; an
/// element the entry returns is an output, one nothing reads is dead. `None` when `w` is not a `while`.
///
/// Evidence (compiler corpus, optimized modules): scan.011 (an RNN over f32[199,128,512], `ys` returned) has
/// `%while` over a state of the `AllocateBuffer` that becomes the entry's output, `xs` converted to bf16 before
/// the loop (in CMEM on v4, `S(3)`) and the weights: temp 0 on v4, v5e, v6e and tpu7x, where counting the
/// 106,758,144-byte state tuple as a temporary gave 101.8 MiB on v4 and tpu7x (over their on-chip budgets).
pub(super) fn loop_result_bytes(
    g: &Graph<'_>,
    w: usize,
    outputs: &std::collections::BTreeSet<usize>,
    sizer: &Sizer,
) -> Result<Option<u64>, HloError> {
    let node = &g.nodes[w];
    let sim_core::layout::Shape::Tuple(elems) = &node.ins.shape else {
        return Ok(None);
    };
    if node.ins.opcode != "while" {
        return Ok(None);
    }
    let mut read_after = std::collections::BTreeSet::new();
    for &u in &g.users[w] {
        let user = &g.nodes[u];
        match user.ins.tuple_index() {
            Some(i) if user.ins.opcode == "get-tuple-element" => {
                if !outputs.contains(&u) && !g.users[u].is_empty() {
                    read_after.insert(i);
                }
            }
            // The whole state read by another op: every element outlives the loop.
            _ => read_after.extend(0..elems.len()),
        }
    }
    let mut bytes = 0u64;
    for i in read_after {
        if let Some(e) = elems.get(i) {
            bytes = bytes.saturating_add(sizer.shape(e)?.padded_bytes);
        }
    }
    Ok(Some(bytes))
}

/// HBM bytes of the bf16 copies of a loop's f32 inputs ([`super::loop_convert`]) on a megacore chip without
/// CMEM, live while the loop runs: both cores' loop bodies read them, so they cannot stay in one core's VMEM
/// (elsewhere they are in VMEM, or CMEM on v4).
///
/// Evidence (compiler corpus, temp bytes): scan.011 (an RNN, f32 `xs` [199,128,512] and two f32[512,512]
/// weights converted before the loop) has temp 27,623,424 B on v5p, the copies' 26,083,328 + 2 x 524,288 B and
/// the loop's own; 0 on v4, v5e, v6e and tpu7x. scan.003 (f32[13,128,203] `xs`, weights [203,203]) 4,751,360 B
/// on v5p, 196,608 on v6e.
pub(super) fn loop_copy_bytes(
    outer: &Graph<'_>,
    inputs: &[super::loop_convert::StateParameter],
    sizer: &Sizer,
) -> Result<u64, HloError> {
    let mut bytes = 0u64;
    for c in inputs {
        if let Some(copy) = super::loop_convert::bf16_copy(outer, c.value) {
            bytes = bytes.saturating_add(sizer.array(&copy)?.padded_bytes);
        }
    }
    Ok(bytes)
}
