//! A product of the same kernel is on chip: a dot operand computed in its kernel from another dot's result there
//! (a narrow first layer recomputed in the next layer's kernel, its bias and activation applied) is read from
//! VMEM, not streamed; the producing dot's own pass streams that dot's inputs.
//!
//! Evidence (reference sample and compiler corpus, optimized modules): dlrm_bottom_mlp.b1024_fwd_f32's first
//! kOutput fusion computes the 13 -> 512 layer, its bias, relu and bf16 convert inside the 512 -> 256 product
//! (`fused_computation.1` in `fused_computation`), result in VMEM: 5,639 cycles on v6e, 10,221 on v5e, where
//! tpusim streamed the 1024 x 512 f32 `h` through the window plan as if from HBM (10,773 and 12,058 cycles for the
//! kernel; 8,430 and 8,463 after). Fit record mlp.018 (44 -> 5504 -> 1024, bf16, batch 468), one kOutput fusion
//! of 30,429 cycles on v6e: program 1.26/1.13/1.08/1.23x -> 1.14/1.04/1.00/1.18x on v5e/v6e/v5p/tpu7x (v4
//! 0.89 -> 0.85x); no other corpus record has such a chain.

use super::fusion::Group;
use super::graph::Graph;
use super::ops::OpClass;

/// Whether node `n` is a dot or convolution computed in kernel `k`: its result never leaves the chip.
pub(super) fn produced_on_chip(g: &Graph<'_>, k: &Group, n: usize) -> bool {
    k.members.contains(&n) && matches!(g.nodes[n].class, OpClass::Dot | OpClass::Convolution)
}
