//! The compiler's cross-program prefetch: before the program starts it copies one entry parameter that a
//! matmul or convolution reads into on-chip memory (`copy-start(param), cross_program_prefetch_index=0`), the
//! largest such parameter that fits the chip's prefetch budget (`ChipModel::prefetch_budget_bytes`, the op
//! model's rule for a standalone matmul); kernels then read it from VMEM, and the overlapped copy carries no
//! estimate.
//!
//! Evidence (compiler corpus, optimized modules): 241 of the first 400 program x chip modules carry a
//! cross-program prefetch; in matvec.009 on v5e (bf16 [28416,256] x [256,2]) it is the 14.5 MB matrix, and the
//! program's one kernel costs 9,490 cycles where streaming the matrix from HBM alone takes 29,600.

use super::bytes::Sizer;
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;
use crate::tensorcore::ChipModel;

/// The entry parameter the compiler prefetches on chip, if any: of the parameters a dot or convolution reads
/// directly, the largest whose padded bytes fit the prefetch budget.
pub(super) fn cross_program_prefetch(
    g: &Graph<'_>,
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<Option<usize>, HloError> {
    let mut best: Option<(u64, usize)> = None;
    for (i, n) in g.nodes.iter().enumerate() {
        if n.ins.opcode != "parameter" {
            continue;
        }
        let feeds_mxu = g.users[i]
            .iter()
            .any(|&u| matches!(g.nodes[u].class, OpClass::Dot | OpClass::Convolution));
        if !feeds_mxu {
            continue;
        }
        let bytes = sizer.shape(&n.ins.shape)?.padded_bytes;
        // A large convolution activation is streamed ([`super::conv_prefetch`]).
        if super::conv_prefetch::activation_too_large(g, i, bytes) {
            continue;
        }
        if bytes <= chip.prefetch_budget_bytes && best.is_none_or(|(b, _)| bytes > b) {
            best = Some((bytes, i));
        }
    }
    Ok(best.map(|(_, i)| i))
}
