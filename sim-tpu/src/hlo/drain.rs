//! How an MXU kernel drains its matmul result: a 16-bit result only widened back to f32 inside the kernel is
//! drained as the f32 accumulator.
//!
//! The op model's drain rates (`mm_out_16bit`, `mm_out_32bit`) were fitted on standalone matmuls storing their
//! result; a 16-bit store packs two f32 accumulator tiles into one (v5e: 15.3 cycles per 1,024 results against
//! none for f32). When every reader of the 16-bit result in its kernel converts it straight back to f32 (attention
//! scores `convert(q k^T)` before the scale and softmax), no 16-bit tile is stored: the rounding is one more fused
//! op on the f32 tiles.
//!
//! Evidence (compiler corpus, optimized modules): attention.000@v5e (bf16 scores [2,8,885,885], 12,432
//! f32 blocks): the compiler's kOutput fusion computing the scores, their convert, scale, mask, row max, exp and
//! row sum costs 51,491 cycles, 4.1 per block, where the 16-bit drain alone took tpusim's window plan 108,144
//! (8.3 per block); attention.017@v5e 43,792 for 10,368 blocks (4.2).

use sim_core::layout::Shape;

use super::fusion::Group;
use super::graph::Graph;

/// The result width (bits) dot `m` of kernel `k` drains at: 32 when its result is 16-bit and every reader is a
/// convert to a 32-bit type inside `k` (and the result is not written out), else its own.
pub(super) fn drained_bits(g: &Graph<'_>, k: &Group, m: usize, own_bits: u64) -> u64 {
    if own_bits > 16 || k.outputs.contains(&m) || g.users[m].is_empty() {
        return own_bits;
    }
    let widened = g.users[m].iter().all(|&u| {
        let n = &g.nodes[u];
        k.members.contains(&u) && n.ins.opcode == "convert" && bits(&n.ins.shape) == 32
    });
    if widened {
        32
    } else {
        own_bits
    }
}

fn bits(s: &Shape) -> u64 {
    match s {
        Shape::Array(a) => a.element_type.bit_width() as u64,
        _ => 0,
    }
}
