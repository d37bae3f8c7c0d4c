//! A strided convolution reads its whole input: the compiler's windows over the input are contiguous row blocks
//! (`input_window_bounds` covering `stride * (rows - 1) + 1` rows and columns), not the subsampled positions the
//! window plan counts, so the kernel takes at least the input's padded bytes over HBM at the compiler's rate.
//!
//! Evidence (compiler corpus, optimized modules): on the fit records conv.010 on v5e (bf16 x[25,112,112,64], 1x1
//! stride 2) the convolution fusion's `input_window_bounds` are 3 x 111 for an output window of 2 x 56, and
//! conv.023 (N 1, 56 wide, 1x1 stride 2) 55 x 7 for 28 x 4: every row and column of the input. Confirmed on the
//! held-out conv.035 on v5e (bf16 x[14,56,56,265], 1x1 stride 2): 13 x 55 for 7 x 28, 107,736 cycles, 339 B per
//! cycle over the 33.7 MB input and 2.8 MB result, where tpusim's plan, reading the subsampled quarter, took
//! 31,144 (v6e: 52,763 against 20,525).

use super::bytes::Sizer;
use super::graph::{Graph, Node};
use super::ops::OpClass;
use super::HloError;

/// Cycles convolution `node` takes at least reading its whole input (unless `resident`, already on chip) when its
/// window has a stride above 1, at `hbm_bytes_per_cycle`; 0 otherwise.
pub(super) fn strided_input_cycles(
    g: &Graph<'_>,
    node: &Node<'_>,
    resident: bool,
    sizer: &Sizer,
    hbm_bytes_per_cycle: f64,
) -> Result<f64, HloError> {
    if node.class != OpClass::Convolution || resident {
        return Ok(0.0);
    }
    let strided = node.ins.window_field("stride").iter().any(|&v| v > 1);
    let Some(&x) = node.operands.first() else {
        return Ok(0.0);
    };
    if !strided {
        return Ok(0.0);
    }
    let bytes = sizer.shape(&g.nodes[x].ins.shape)?.padded_bytes;
    Ok(bytes as f64 / hbm_bytes_per_cycle.max(1e-9))
}
