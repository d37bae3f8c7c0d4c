//! Row statistics over a matmul's result in the matmul's own kernel: a reduce kernel reducing the rows (the
//! minor dimension, at most 8,192 long) of a value an MXU kernel with 16-bit dot results writes out, and read by
//! nothing else, joins that MXU kernel, which then keeps the value on chip and writes only the reduce kernel's
//! results.
//!
//! Evidence (compiler corpus, optimized HLO): attention's softmax over its scores. tpusim's grouping computes the
//! scores' dot and their row max in one kernel and the `exp(s - max)` and its row sum in a second one, reading
//! the f32 scores back from HBM. The compiler makes one kOutput fusion of the dot, the row max (a `reduce-window`
//! spanning the whole row, so each row is whole in the kernel's window), the subtraction, the exp and the row sum,
//! writing only the exp and the sum: attention.002@v5e (f32 scores [7,16,1007,1007]) `fusion.12` 1,378,882
//! cycles, where tpusim's two kernels cost 2,039,919 and 1,993,353 (the scores written and read back, 0.9 GB);
//! attention.000@v5e (scores [2,8,885,885]) 51,491 cycles against 123,262 + 122,244.

use std::collections::BTreeSet;

use sim_core::layout::Shape;

use super::bytes::{dims_of, elements};
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;

/// `kernels` (in execution order) with every reduce kernel over the rows of an MXU kernel's result merged into
/// that MXU kernel, at the MXU kernel's place.
pub(super) fn merge_row_statistics(g: &Graph<'_>, mut kernels: Vec<Group>) -> Vec<Group> {
    let entry_outputs: BTreeSet<usize> = g.outputs().into_iter().collect();
    let mut b = 0;
    while b < kernels.len() {
        match host(g, &kernels, b, &entry_outputs) {
            Some((a, internal)) => {
                let reduce = kernels.remove(b);
                join(&mut kernels[a], reduce, &internal);
            }
            None => b += 1,
        }
    }
    kernels
}

/// The MXU kernel (index) reduce kernel `b` joins, and the values that then stay inside it; `None` when `b` is
/// not a row reduction over an MXU kernel's result or cannot move to that kernel's place.
fn host(g: &Graph<'_>, kernels: &[Group], b: usize, entry_outputs: &BTreeSet<usize>) -> Option<(usize, Vec<usize>)> {
    let r = &kernels[b];
    if r.kind != KernelKind::Reduce {
        return None;
    }
    // The kernel writing each of `r`'s inputs, if a kernel does.
    let producer = |i: usize| kernels[..b].iter().rposition(|k| k.outputs.contains(&i));
    // The MXU kernel writing the largest array `r` reads.
    let largest = *r.inputs.iter().max_by_key(|&&i| elements(&g.nodes[i].ins.shape))?;
    let a = producer(largest)?;
    if kernels[a].kind != KernelKind::Mxu || !reduces_rows_of(g, r, largest) || !narrow_rows(g, &kernels[a], largest) {
        return None;
    }
    // Every other input must be ready where the MXU kernel runs.
    if r.inputs.iter().any(|&i| producer(i).is_some_and(|p| p > a)) {
        return None;
    }
    // Values of the MXU kernel only `r` reads stay on chip.
    let read_elsewhere = |x: usize| {
        entry_outputs.contains(&x) || kernels.iter().enumerate().any(|(t, k)| t != b && k.inputs.contains(&x))
    };
    let internal: Vec<usize> = kernels[a]
        .outputs
        .iter()
        .copied()
        .filter(|&x| r.inputs.contains(&x) && !read_elsewhere(x))
        .collect();
    internal.contains(&largest).then_some((a, internal))
}

/// Rows longer than this many elements are not reduced in the matmul's kernel: the compiler fuses the softmax of
/// bf16 scores with rows of up to 7,044 elements (attention.020, S 7,044; transformer_block.009, S 6,551) and
/// keeps it a loop kernel of its own at 14,256 and 15,104 (attention.025, attention.019), on all five chips; the
/// boundary lies between, and 8,192 (64 lane tiles) is taken.
const MAX_ROW_ELEMENTS: u64 = 8192;

/// Whether MXU kernel `k`'s dots all multiply 16-bit operands (bf16 q and k; the scores bf16 widened in the
/// epilogue, or the f32 accumulator itself as in the reference sample's attention, one fusion at S 256 on all
/// five chips) and `value`'s rows are at most [`MAX_ROW_ELEMENTS`] long. With f32 operands the compiler writes the
/// scores and their row max from the dot's kernel and computes the exp and sum in a loop kernel of its own, as
/// tpusim's grouping does (every f32 attention and transformer block of the corpus, S 128-6,555, on all five
/// chips).
fn narrow_rows(g: &Graph<'_>, k: &Group, value: usize) -> bool {
    let dots = k
        .members
        .iter()
        .filter(|&&m| matches!(g.nodes[m].class, OpClass::Dot | OpClass::Convolution));
    let mut any = false;
    for &d in dots {
        let operands = &g.nodes[d].operands;
        if operands.len() < 2 || !operands.iter().take(2).all(|&o| sixteen_bit(g, o)) {
            return false;
        }
        any = true;
    }
    any && dims_of(&g.nodes[value].ins.shape)
        .last()
        .is_some_and(|&n| n <= MAX_ROW_ELEMENTS)
}

/// Whether dot `d`'s rows are at most [`MAX_ROW_ELEMENTS`] long: each row is whole in one window of the dot's
/// kernel, which can compute row statistics over it in the same pass (used by [`super::passes`]).
pub(super) fn rows_in_one_window(g: &Graph<'_>, d: usize) -> bool {
    dims_of(&g.nodes[d].ins.shape)
        .last()
        .is_some_and(|&n| n <= MAX_ROW_ELEMENTS)
}

/// Whether every reduction of kernel `r` reduces only the minor (last) dimension of an array of `value`'s size:
/// row statistics, each row whole in one window.
fn reduces_rows_of(g: &Graph<'_>, r: &Group, value: usize) -> bool {
    let n = elements(&g.nodes[value].ins.shape);
    let mut reductions = r
        .members
        .iter()
        .map(|&m| &g.nodes[m])
        .filter(|m| m.class == OpClass::Reduce)
        .peekable();
    reductions.peek().is_some() && reductions.all(|m| row_reduction_of(g, m, n))
}

/// Whether `node` is a `reduce` of only the minor (last) dimension of an array of rank 2 or more with `n`
/// elements.
fn row_reduction_of(g: &Graph<'_>, node: &super::graph::Node<'_>, n: u64) -> bool {
    let Some(&input) = node.operands.first() else {
        return false;
    };
    let rank = dims_of(&g.nodes[input].ins.shape).len() as i64;
    let dims = node.ins.int_list("dimensions").unwrap_or_default();
    node.ins.opcode == "reduce" && rank >= 2 && dims == [rank - 1] && elements(&g.nodes[input].ins.shape) == n
}

/// Whether MXU kernel `k` computes its row statistics in the same pass as its batched matmul (no later kernel
/// re-reads the result for them): every dot of `k` has batch dimensions and 16-bit operands (its result bf16 or
/// the f32 accumulator itself: the MXU accumulates in f32 either way), and every reduction
/// of `k` reduces only the minor dimension of rows at most [`MAX_ONE_PASS_ROW`] long; the dots contract fewer
/// than [`FULL_DEPTH`] elements and their results are not written out (a backward pass reading the scores makes
/// them a kernel of their own, attention.001, .014, .031 on every chip). The compiler rewrites
/// the row max of such scores as a `reduce-window` spanning the whole row (the grid runs over batch elements and
/// blocks of rows, each row whole in the output window), so `exp(s - max)` and its sum need no second pass.
///
/// Evidence (compiler corpus, optimized modules): every attention and transformer block with 16-bit scores
/// and rows up to 7,044 (112 attention and 98 transformer_block records, all five chips) has one kOutput
/// fusion computing the dot, the `reduce-window` max, the exp and the row sum, writing the exp and the sum:
/// attention.000@v5e (scores [2,8,885,885]) `fusion.12`, 51,491 cycles, where tpusim's two passes cost 111,696
/// and 163,911; attention.017@v5e 43,792 against 94,163 + 137,144. No non-batched matmul of the corpus does so
/// (softmax_xent.018, bf16 logits [151,4480]: the row max with the dot, `exp` and sum a loop kernel of their
/// own, [`super::passes`]). The operands' width decides, not the result's: the reference sample's attention
/// (bf16 q and k, an f32 product, `preferred_element_type`; no corpus program has one) has the same one-pass
/// kOutput fusion at S 256, 1,024 and 2,048 on all five chips (b4_s2048@tpu7x `fusion.11` 1,163,273 cycles, where
/// tpusim's one op per block took 2,628,236), while f32 q and k write their scores and max (attention.009, .027).
pub(super) fn one_pass(g: &Graph<'_>, k: &Group) -> bool {
    if k.kind != KernelKind::Mxu {
        return false;
    }
    let mut dots = 0;
    let mut reductions = 0;
    for &m in &k.members {
        let n = &g.nodes[m];
        match n.class {
            OpClass::Dot => {
                let batched = n.ins.int_list("lhs_batch_dims").is_some_and(|b| !b.is_empty());
                let narrow = n.operands.len() >= 2 && n.operands.iter().take(2).all(|&o| sixteen_bit(g, o));
                let deep = contracted(g, n) >= FULL_DEPTH;
                if !batched || !narrow || deep || k.outputs.contains(&m) || !from_parameters(g, k, n) {
                    return false;
                }
                dots += 1;
            }
            OpClass::Convolution => return false,
            OpClass::Reduce if n.ins.opcode == "reduce" => {
                let Some(&input) = n.operands.first() else { return false };
                let rows = dims_of(&g.nodes[input].ins.shape).last().copied().unwrap_or(0);
                if !row_reduction_of(g, n, elements(&g.nodes[input].ins.shape)) || rows > MAX_ONE_PASS_ROW {
                    return false;
                }
                reductions += 1;
            }
            _ => {}
        }
    }
    dots > 0 && reductions > 0
}

/// Whether node `n` is an array of at most 16-bit elements.
fn sixteen_bit(g: &Graph<'_>, n: usize) -> bool {
    matches!(&g.nodes[n].ins.shape, Shape::Array(a) if a.element_type.bit_width() <= 16)
}

/// Rows longer than this are not reduced in the matmul's own pass: the compiler's longest one-pass rows are
/// 2,081 (attention.003, all five chips), and rows of 7,044 (attention.020) have a scores kernel of their own
/// on every chip; 4,096 (32 lane tiles) is taken between.
const MAX_ONE_PASS_ROW: u64 = 4096;

/// A scores' dot contracting this many elements or more (one full MXU pass deep) is a kernel of its own: with
/// head dim 128 (attention.015, .016) the compiler writes the scores from the dot's kernel on v4, v5e, v5p
/// and v6e, and the softmax's pass reads them back; with 64 or 96 (attention.000, .002, .003, .010, .017,
/// .026, .032) it keeps them in the dot's kernel on every chip.
const FULL_DEPTH: u64 = 128;

/// Whether both operands of dot `n` are the program's inputs, read through data movement only. Evidence: the
/// corpus's attention programs (q, k entry parameters) have the one-pass fusion; in all 98 transformer_block
/// records with one-pass rows (q and k sliced out of the qkv projection another kernel writes) the scores are a
/// kernel of their own and the softmax's pass reads them back.
fn from_parameters(g: &Graph<'_>, k: &Group, n: &super::graph::Node<'_>) -> bool {
    n.operands.iter().take(2).all(|&o| {
        let mut x = o;
        for _ in 0..64 {
            let node = &g.nodes[x];
            if node.param.is_some() {
                return true;
            }
            let moves = matches!(node.class, OpClass::Movement | OpClass::Relayout | OpClass::Free);
            match node.operands.first() {
                Some(&next) if moves && k.members.contains(&x) || node.class == OpClass::Free => x = next,
                _ => return false,
            }
        }
        false
    })
}

/// Elements dot `n` contracts (the product of its left operand's contracting dims).
fn contracted(g: &Graph<'_>, n: &super::graph::Node<'_>) -> u64 {
    let Some(&lhs) = n.operands.first() else { return 0 };
    let d = dims_of(&g.nodes[lhs].ins.shape);
    n.ins
        .int_list("lhs_contracting_dims")
        .unwrap_or_default()
        .iter()
        .map(|&c| usize::try_from(c).ok().and_then(|c| d.get(c).copied()).unwrap_or(1))
        .product()
}

/// Vector cycles of a [`one_pass`] kernel's fused ops: the convert, scale, mask, max, exp and sum run on each
/// result tile as the MXU drains it, one sweep over the largest array's `blocks` (1,024 elements) at
/// `mxu_fused_op_cycles`, not one per op. Evidence (compiler corpus, the scores kernels of [`one_pass`]):
/// attention.000 (12,432 f32 blocks) costs 3.7 cycles per block on v6e (45,515), 4.1 on v5e (51,491), and on v5p
/// and tpu7x, less the exp written to HBM, 3.7 and 3.4, against `mxu_fused_op_cycles` 2.2-4.4 per op and four
/// such ops.
pub(super) fn one_pass_vector_cycles(blocks: f64, mxu_fused_op_cycles: f64) -> f64 {
    blocks * mxu_fused_op_cycles
}

/// Merges reduce kernel `r` into MXU kernel `k`; `internal` are `k`'s outputs only `r` read.
fn join(k: &mut Group, r: Group, internal: &[usize]) {
    let produced: BTreeSet<usize> = k.outputs.iter().copied().collect();
    for m in r.members {
        if !k.members.contains(&m) {
            k.members.push(m);
        }
    }
    for i in r.inputs {
        if !produced.contains(&i) && !k.inputs.contains(&i) {
            k.inputs.push(i);
        }
    }
    k.outputs.retain(|o| !internal.contains(o));
    for o in r.outputs {
        if !k.outputs.contains(&o) {
            k.outputs.push(o);
        }
    }
}
