//! Reductions a matmul kernel computes over its own result share one sweep of the result tiles.
//!
//! An MXU kernel that took reductions of its matmul's result as more outputs ([`super::epilogue_reduce`]: a
//! bias gradient summing `dY` over the batch rows, a loss `sum(y * y)`) reduces each result tile while it is in
//! registers; several such reductions of the same tiles add their partial sums in the same pass, so the kernel's
//! vector work is one sweep over the result for all of them, not one per reduction.
//!
//! Evidence (compiler corpus, fit records, optimized modules): mlp.024@v6e (f32, batch 1,124, fwd+bwd): the
//! compiler's kOutput fusion writing `(f32[4736], f32[], f32[1124,4736])` (the last layer's matmul, the loss's sum
//! of squares, the bias gradient's column sum) costs 13,707 cycles; tpusim charged two reductions over the
//! 5,217 f32 blocks of the result (32,190 cycles), where one sweep is 14,900. The layer before it, whose kernel
//! has one reduction (the bias gradient, `(f32[5120], bf16[1124,5120])`), costs 13,272 where tpusim's one sweep
//! is 16,130: a second reduction adds nothing the compiler charges. mlp.013@v6e: `(f32[58], f32[], f32[29824,58])`
//! 6,530 cycles, tpusim 12,990 with two sweeps.
//!
//! Only reductions over an array of the dot's result size count (a reduction of a smaller vector is its own
//! sweep), and only in kernels of matmuls without batch dimensions: batched scores with row statistics have
//! their own one-pass rule ([`super::rowstats::one_pass`]; the attention family's p90 went from 68% to 72%
//! with this rule applied to them), and convolutions' statistics are separate passes ([`super::batchnorm`]).

use super::bytes::{elements, Sizer};
use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;
use crate::tensorcore::lower::VREG_ELEMENTS;

/// 1,024-element vector blocks a reduction over the result of MXU kernel `k` saves when it shares the result
/// sweep: the blocks of every `reduce` of `k` over an array with as many elements as one of `k`'s dot results,
/// less one sweep (the largest of them). Zero when `k` is not a matmul kernel or has fewer than two such
/// reductions.
pub(super) fn shared_blocks(g: &Graph<'_>, k: &Group, sizer: &Sizer) -> Result<f64, HloError> {
    if k.kind != KernelKind::Mxu {
        return Ok(0.0);
    }
    let mut results = Vec::new();
    for &m in &k.members {
        match g.nodes[m].class {
            OpClass::Dot if !batched(g, m) => results.push(elements(&g.nodes[m].ins.shape)),
            OpClass::Dot | OpClass::Convolution => return Ok(0.0),
            _ => {}
        }
    }
    let mut swept = Vec::new();
    for &m in &k.members {
        let n = &g.nodes[m];
        if n.class != OpClass::Reduce || n.ins.opcode != "reduce" {
            continue;
        }
        let Some(&input) = n.operands.first() else { continue };
        let shape = &g.nodes[input].ins.shape;
        if results.contains(&elements(shape)) {
            swept.push(sizer.shape(shape)?.padded_elements as f64 / VREG_ELEMENTS as f64);
        }
    }
    if swept.len() < 2 {
        return Ok(0.0);
    }
    let largest = swept.iter().copied().fold(0.0, f64::max);
    Ok(swept.iter().sum::<f64>() - largest)
}

/// Whether dot `m` has batch dimensions.
fn batched(g: &Graph<'_>, m: usize) -> bool {
    g.nodes[m].ins.int_list("lhs_batch_dims").is_some_and(|b| !b.is_empty())
}
