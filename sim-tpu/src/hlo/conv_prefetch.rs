//! The compiler prefetches a convolution's activation (an entry parameter read as a convolution's left operand)
//! on chip only up to 32 MiB, whatever the chip's prefetch budget; a larger one is streamed window by window and
//! the weight is prefetched instead.
//!
//! Evidence (compiler corpus, optimized modules, `copy-start(param), cross_program_prefetch_index=0`; padded
//! bytes of the parameter in its entry layout): on all five chips the activation is prefetched for
//! resnet_block.011 (bf16[52,28,28,192], 21,952 KiB), conv.021 (15,246 KiB), conv.033 (19,208 KiB),
//! resnet_block.015 (15,680 KiB) and the smaller conv.006, .007, .012, .017; it is not for conv.035
//! (bf16[14,56,56,265], 32,928 KiB: the weight `w.1` is prefetched; tpusim read the input on chip and its
//! convolution kernel cost 23,601 cycles on v5e against the compiler's 107,736), conv.010 (44,800 KiB) and
//! conv.028 (67,424 KiB), though v5e's budget is 112 MiB and v4's and v6e's at least 64 MiB.

use super::graph::Graph;
use super::ops::OpClass;

/// Largest activation of a convolution the compiler prefetches on chip, in padded bytes.
pub(super) const MAX_PREFETCHED_ACTIVATION_BYTES: u64 = 32 << 20;

/// Whether entry parameter `param` of `padded_bytes` is a convolution's activation (the left operand of a
/// convolution with spatial dimensions) too large to be prefetched on chip.
pub(super) fn activation_too_large(g: &Graph<'_>, param: usize, padded_bytes: u64) -> bool {
    padded_bytes > MAX_PREFETCHED_ACTIVATION_BYTES
        && g.users[param].iter().any(|&u| {
            let n = &g.nodes[u];
            n.class == OpClass::Convolution
                && n.operands.first() == Some(&param)
                && n.ins
                    .attr("dim_labels")
                    .is_some_and(|l| l.chars().any(|c| c.is_ascii_digit()))
        })
}
