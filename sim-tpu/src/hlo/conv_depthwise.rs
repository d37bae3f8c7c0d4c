//! A depthwise convolution (one input channel per group: `feature_group_count` equal to the input's channels)
//! takes at least one multiply-add per output block and kernel tap: the compiler's kernel time grows with the
//! output's padded blocks times the taps, at the same rate on every chip whatever its MXU's width, where the op
//! model's plan of a one-channel contraction per group (`K` = 1) counts a fraction of it. The floor is
//! [`CYCLES_PER_BLOCK_TAP`] per 1,024-element block of the output (its padded elements under the compiler's
//! layout) per tap, shared by the TensorCores of a megacore device.
//!
//! Evidence (compiler corpus, optimized modules, the depthwise convolution fusions, cycles over output blocks x
//! taps): conv.017 (fit; bf16 x[44,33,33,64], 3x3, output `{3,0,2,1}` 6,534 blocks x 9 taps): 2.26 on v5e
//! (132,833 cycles), 2.19 on v6e, 2.25 on tpu7x, 1.20 on v5p (two TensorCores), 2.66 on v4, where tpusim's plan
//! took 46,127 on v6e (0.63x the program); conv.016 (fit; N 3, 28 wide, 192 channels, windowed `[28,24,4,192]`,
//! 672 blocks): 2.5-3.7 per block-tap after the launch on every chip. Held out: conv.024 (N 5, 317 channels): 2.1
//! (v5p) to 3.6 (v4); conv.019 (N 7, 768 channels, stride 2): 3.2-5.2; conv.012 (f32 N 45, stride 2): 3.0-4.0.

use super::bytes::Sizer;
use super::graph::{Graph, Node};
use super::ops::OpClass;
use super::HloError;
use crate::tensorcore::lower::{MxuWork, VREG_ELEMENTS};
use crate::tensorcore::ChipModel;

/// Cycles per 1,024-element output block per kernel tap of a depthwise convolution on one TensorCore, read off
/// the largest depthwise fit program, conv.017, on v5e, v6e and tpu7x (2.19-2.26), not fitted.
pub const CYCLES_PER_BLOCK_TAP: f64 = 2.25;

/// Cycles depthwise convolution `node` (of work `work`, whose taps it reads) takes at least: its output's padded
/// blocks times its kernel taps at [`CYCLES_PER_BLOCK_TAP`], over the device's TensorCores; 0 for any other node.
pub(super) fn depthwise_floor_cycles(
    g: &Graph<'_>,
    node: &Node<'_>,
    work: &MxuWork,
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<f64, HloError> {
    if node.class != OpClass::Convolution || !is_depthwise(g, node) {
        return Ok(0.0);
    }
    let blocks = sizer.shape(&node.ins.shape)?.padded_elements as f64 / VREG_ELEMENTS as f64;
    let taps = work.taps_h.saturating_mul(work.taps_w) as f64;
    Ok(blocks * taps * CYCLES_PER_BLOCK_TAP / f64::from(chip.device_tensorcores.max(1)))
}

/// Whether convolution `node` has more than one group and one input channel per group (its left operand's `f`
/// dimension equals `feature_group_count`).
fn is_depthwise(g: &Graph<'_>, node: &Node<'_>) -> bool {
    let groups = node
        .ins
        .attr("feature_group_count")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    let Some(lhs) = node.ins.attr("dim_labels").and_then(|l| l.split('_').next()) else {
        return false;
    };
    let Some(&x) = node.operands.first() else {
        return false;
    };
    let channels = lhs
        .find('f')
        .and_then(|i| super::bytes::dims_of(&g.nodes[x].ins.shape).get(i).copied());
    groups > 1 && channels == Some(groups)
}
