//! A loop or reduce kernel that streams 16-bit arrays from HBM and computes on them widened to f32, writing no
//! full-size 16-bit array back, moves half the bytes per block of its f32 work: each 16-bit stream costs its share
//! of the loop pipeline's per-stream cycles (`stream_block_cycles`), and the row-wise cross-lane work
//! ([`super::cross_lane`], fitted on kernels streaming the array they reduce at its own width) hides under the
//! vector work, the streamed rows arriving at half the rate the vector unit consumes them.
//!
//! Evidence (per 1,024-element block of the f32 array; compiler's estimate against tpusim's before this rule):
//! the softmax sum `sum(exp(convert(x) - max))` over bf16 logits, one bf16 input and no full-size output: the
//! reference sample's softmax_xent.n1024_v32768_fwd_bf16 `exponential_reduce_fusion` costs v4 13.8, v5e 14.3, v5p
//! 5.7, v6e 6.6, tpu7x 5.5 (tpusim 17.5, 16.4, 6.9, 8.3, 6.9), the corpus's fit records softmax_xent.006 (bf16
//! [6926,36736]) 13.9 (v4) and 14.6 (v5e) and .008 (bf16 [4480,129280]) 13.8 and 14.4; the same pass over f32
//! logits costs 18.3-18.8 on v4 and v5e (softmax_xent.003, .009), more by about the HBM time of the extra bytes,
//! and keeps its figures. The row max of bf16 logits also writing them widened to f32 (the sample's `fusion.1`)
//! costs v4 14.1, v5e 14.7, v5p 5.9, v6e 8.7, tpu7x 5.4 (tpusim 20.3, 18.3, 7.6, 9.1, 6.3). A kernel narrowing a
//! full-size result back to 16 bits (an RMS norm writing its bf16 residual sum, a softmax gradient in bf16)
//! packs every vreg on the vector unit and keeps the whole stream and cross-lane cost. So does a kernel reducing
//! rows of at most 4,096 elements (32 lane tiles), where the cross-lane reduction of each row is shared by fewer
//! vregs: the corpus's bf16 layer and RMS norms (rows of 346 to 3,578) cost the compiler at least tpusim's
//! figures with the whole cost (norm.009 bf16 [19840,3578] 0.86 of the compiler on v4, 0.71 on v6e).

use sim_core::layout::Shape;

use super::bytes::dims_of;
use super::fusion::Group;
use super::graph::Graph;

/// How kernel `k`'s full-size streams count in its loop pipeline: the sum of their weights (one for an array at
/// the kernel's widest float width, half for a 16-bit one when the rule holds) and whether the cross-lane row
/// work still adds to the body.
pub(super) struct StreamCount {
    /// Streams, each weighted by its width over the kernel's widest float width.
    pub weight: f64,
    /// Whether the kernel's row-wise cross-lane work adds to its body.
    pub rows: bool,
}

/// Bits of an element of array `s` when it is a floating-point type.
fn float_bits(s: &Shape) -> Option<u32> {
    super::narrow_reduce::float_type(s).map(|t| t.bit_width())
}

/// The streams of kernel `k` (`inputs` and `outputs`, its full-size arrays moved from and to HBM) as its loop
/// pipeline counts them. Without a narrower float input widened inside the kernel, or with a full-size output
/// narrower than the kernel's widest float, every stream counts one and the row work adds.
pub(super) fn stream_count(g: &Graph<'_>, k: &Group, inputs: &[usize], outputs: &[usize]) -> StreamCount {
    let plain = StreamCount {
        weight: (inputs.len() + outputs.len()) as f64,
        rows: true,
    };
    let Some(widest) = k
        .members
        .iter()
        .filter_map(|&m| float_bits(&g.nodes[m].ins.shape))
        .max()
    else {
        return plain;
    };
    if !reduces_long_rows(g, k) {
        return plain;
    }
    let bits = |n: usize| float_bits(&g.nodes[n].ins.shape);
    let narrow = |n: &usize| bits(*n).is_some_and(|b| b < widest);
    if !inputs.iter().any(narrow) || outputs.iter().any(narrow) {
        return plain;
    }
    let weight = inputs
        .iter()
        .chain(outputs)
        .map(|&n| bits(n).map_or(1.0, |b| f64::from(b) / f64::from(widest)))
        .sum();
    StreamCount {
        weight,
        rows: inputs.iter().any(|n| !narrow(n)),
    }
}

/// Rows longer than this many elements (32 lane tiles) amortise their cross-lane reduction over enough vregs.
const LONG_ROW: u64 = 4096;

/// Whether a member of kernel `k` reduces rows longer than [`LONG_ROW`] over their minor dimension.
fn reduces_long_rows(g: &Graph<'_>, k: &Group) -> bool {
    k.members.iter().any(|&m| {
        let n = &g.nodes[m];
        let Some(&input) = n.operands.first() else {
            return false;
        };
        let d = dims_of(&g.nodes[input].ins.shape);
        let reduced = n.ins.int_list("dimensions").unwrap_or_default();
        n.ins.opcode == "reduce" && d.len() >= 2 && d[d.len() - 1] > LONG_ROW && reduced.contains(&(d.len() as i64 - 1))
    })
}
