//! A matmul operand its kernel computes (a prologue: a softmax's probabilities `exp / sum` narrowed to bf16
//! before the product with `v`) is made from arrays the kernel streams from HBM, not the operand itself: the
//! window plan sees only the operand (16-bit, half the bytes of the f32 `exp` it is computed from), so the
//! kernel takes at least those inputs' bytes at the compiler's HBM rate.
//!
//! Evidence (compiler corpus, fit split, optimized modules): forward attention's second kernel (`fusion.5`,
//! the divide, convert and dot, reading the f32 `exp` the scores kernel wrote) costs at least its f32 read at
//! `hbm_bytes_per_cycle` on every chip whenever that `exp` is in HBM: attention.003 (f32 `exp`
//! [5,16,2081,2081], 1.45 GB) 3,867,085 cycles on v5e (the read alone 2.96M, tpusim 1.96M before this rule),
//! 3,572,872 on v4 (3.09M; 2.21M), 2,047,609 on v6e (1.55M; 1.07M); attention.004 4,488,891 on v5e (3.48M;
//! 2.19M), attention.015 4,078,272 (3.28M; 2.06M), attention.002 1,273,762 (0.94M; 0.63M); on v4 the ratio of
//! the compiler's kernel to that read is 1.09-1.53 over the nine such programs (S 538-7,044). The reference
//! sample's b4_s2048 attention, held out, reads its 1.07 GB `exp` the same way (v5e 2,777,386 cycles, tpusim
//! 1.38M before the rule).

use std::collections::BTreeSet;

use super::bytes::{elements, Sizer};
use super::fusion::Group;
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;

/// Cycles dot `dot` of kernel `k` spends at least streaming the HBM inputs its computed operands are made from
/// (inputs not placed on chip, `in_vmem`; not scalars; reached only through elementwise ops, broadcasts
/// and relayouts, and no larger than the operand) at `hbm_bytes_per_cycle`; 0 when no operand is computed in the kernel.
pub(super) fn prologue_input_cycles(
    g: &Graph<'_>,
    k: &Group,
    dot: usize,
    sizer: &Sizer,
    in_vmem: &BTreeSet<usize>,
    hbm_bytes_per_cycle: f64,
) -> Result<f64, HloError> {
    let mut seen: BTreeSet<usize> = BTreeSet::new();
    let mut inputs: BTreeSet<usize> = BTreeSet::new();
    let mut narrowest = u64::MAX;
    for &operand in g.nodes[dot].operands.iter().take(2) {
        if !k.members.contains(&operand) || !elementwise(g, operand) {
            continue;
        }
        let size = elements(&g.nodes[operand].ins.shape);
        narrowest = narrowest.min(sizer.shape(&g.nodes[operand].ins.shape)?.padded_bytes);
        let mut stack = vec![operand];
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            if k.members.contains(&n) {
                if elementwise(g, n) {
                    stack.extend(g.nodes[n].operands.iter().copied());
                }
            } else if k.inputs.contains(&n) {
                // An input larger than the operand is read through a slice or reduction, only in part.
                if !in_vmem.contains(&n) && !is_scalar(g, n) && elements(&g.nodes[n].ins.shape) <= size {
                    inputs.insert(n);
                }
            } else if g.nodes[n].class == OpClass::Free {
                // A bitcast or tuple element stands for the value it forwards.
                stack.extend(g.nodes[n].operands.iter().copied());
            }
        }
    }
    let (mut bytes, mut widest) = (0u64, 0u64);
    for i in inputs {
        let b = sizer.shape(&g.nodes[i].ins.shape)?.padded_bytes;
        bytes = bytes.saturating_add(b);
        widest = widest.max(b);
    }
    // Only an operand narrower than an input it is made from is streamed short by the window plan.
    if widest <= narrowest {
        return Ok(0.0);
    }
    Ok(bytes as f64 / hbm_bytes_per_cycle.max(1e-9))
}

/// Whether node `n` maps its inputs' elements onto its own one to one or by broadcasting (an elementwise op, a
/// broadcast, reshape, transpose or convert): the path along which an operand's inputs are streamed whole.
/// Slices, gathers, reductions and products read their inputs otherwise and end the walk.
fn elementwise(g: &Graph<'_>, n: usize) -> bool {
    let node = &g.nodes[n];
    match node.class {
        OpClass::Elementwise | OpClass::Transcendental | OpClass::Relayout | OpClass::Free => true,
        OpClass::Movement => matches!(node.ins.opcode.as_str(), "broadcast" | "reshape"),
        _ => false,
    }
}

/// Whether node `n` is a single value (a constant or scalar parameter), broadcast in place.
fn is_scalar(g: &Graph<'_>, n: usize) -> bool {
    matches!(&g.nodes[n].ins.shape, sim_core::layout::Shape::Array(a) if a.dims.is_empty())
}
