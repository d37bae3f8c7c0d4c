//! The compiler's cross-program prefetch: before the program starts it copies one entry parameter that a
//! matmul or convolution reads into on-chip memory (`copy-start(param), cross_program_prefetch_index=0`), the
//! largest such parameter that fits the chip's prefetch budget (`ChipModel::prefetch_budget_bytes`, the op
//! model's rule for a standalone matmul); kernels then read it from VMEM, and the overlapped copy carries no
//! estimate.
//!
//! Evidence (compiler corpus, optimized modules): 241 of the first 400 program x chip modules carry a
//! cross-program prefetch; in matvec.009 on v5e (bf16 [28416,256] x [256,2]) it is the 14.5 MB matrix, and the
//! program's one kernel costs 9,490 cycles where streaming the matrix from HBM alone takes 29,600.
//!
//! Only a parameter that matmuls alone read (directly or through one transpose, reshape or bitcast) is a
//! candidate. Evidence (the corpus's fit records without loops, 464 with a prefetch): every prefetched parameter
//! is read only by matmuls, including the 78 records (all of dcn_cross, some mlp) where a larger parameter also
//! feeds elementwise ops: dcn_cross.001 on v5e prefetches its 94 x 94 weight, not the f32[63104,94] input `x`
//! the cross layer multiplies and adds, and its first kernel, streaming `x`, costs the compiler 141,018 cycles
//! (tpusim read `x` on chip: 55,154). Such a parameter is copied on chip for its later readers
//! ([`super::operand_prefetch::streamed_once`]).

use super::bytes::Sizer;
use super::graph::Graph;
use super::HloError;
use crate::tensorcore::ChipModel;

/// The entry parameter the compiler prefetches on chip, if any: of the parameters only dots and convolutions
/// read, the largest whose padded bytes fit the prefetch budget.
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
        if !super::operand_prefetch::read_by_matmuls_only(g, i) {
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
