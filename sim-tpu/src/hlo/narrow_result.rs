//! A matmul whose result is narrower than the vector lanes (8 <= N < 128 columns) over many rows (M >= 128) is
//! computed transposed: the compiler lays the result out with its rows on the lanes (`[M,N]{0,1}`), so the MXU
//! sees M' = N rows and N' = M columns, and the N columns are not padded to 128 lanes per row.
//!
//! Evidence (compiler corpus, fit records, optimized modules): of the 241 two-dimensional f32 or bf16 results of
//! MXU (kOutput) fusions with 8 <= N < 128 <= M, 228 are laid out `{0,1}` (every dcn_cross and moe_routing one,
//! 83 of 96 in mlp); the 13 others are weight gradients the entry returns in `{1,0}`, computed `{0,1}` and then
//! copied (mlp.013 on v6e: `convolution_bitcast_fusion` f32[169,84]{0,1} then a `copy`). What it saves: mlp.013 on
//! v6e (a fit record, f32 x[29824,169] W[169,84]): the compiler's first-layer fusion costs 6,064 cycles, where the
//! untransposed window plan's MXU passes alone (29,824 rows, one 256-wide pass each over four MXUs) take 7,456;
//! transposed, 84 rows over 117 column passes take 2,457.
//! Products of fewer than 8 columns are [`super::matvec::skinny_transposed`]'s.

use crate::tensorcore::cost::Residency;
use crate::tensorcore::lower::MxuWork;

/// Vector lanes of a tile: a result at least this wide fills its rows' lanes.
const LANES: u64 = 128;

/// Fewest result columns this rule covers (fewer: [`super::matvec::skinny_transposed`]).
const MIN_COLUMNS: u64 = 8;

/// `w` computed transposed when its result is narrow (8 <= N < 128 <= M, no batch, not a convolution): M and N
/// swap, and so do the operands' residencies.
pub(super) fn narrow_transposed(w: MxuWork, residency: Residency) -> (MxuWork, Residency) {
    if w.batch != 1 || w.conv || w.n < MIN_COLUMNS || w.n >= LANES || w.m < LANES {
        return (w, residency);
    }
    let t = MxuWork { m: w.n, n: w.m, ..w };
    let r = Residency {
        lhs: residency.rhs,
        rhs: residency.lhs,
        out: residency.out,
    };
    (t, r)
}
