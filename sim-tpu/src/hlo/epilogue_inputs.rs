//! An MXU kernel's epilogue reads its own inputs from HBM: an array the epilogue combines with the dot's result
//! (a residual `x0 * (x W + b) + x0`) is streamed in output windows beside the result, even when the dot reads
//! the same array as its operand (the dot streams it in its own input windows): the compiler reads it twice.
//! The window plan streams only the dot's operands, so those reads are a term of their own, like the epilogue's
//! results written to HBM.
//!
//! Evidence (compiler corpus, dcn_cross fit records, f32, output fusions reading entry parameters):
//! dcn_cross.013 on v6e (batch 46,331, D 302, one kernel `x0 * (x0 W + b) + x0`): 227,980 cycles, 1.26 times
//! the HBM time of reading x0 twice and writing the result (3 x 56.3 MB at 935 B per cycle: 180,700), 1.9
//! times that of one read and the write. dcn_cross.007 (fwd, batch 51,321, D 717), whose second kernel reads
//! x0 and the previous layer's output for both its prologue and epilogue: 997,057 cycles, 1.26 times five
//! 147.8 MB transfers, against its first kernel's 405,912 for two (1.28 times); with the rule tpusim's program
//! total on v6e goes from 705,662 to 1,179,730 (compiler 1,402,969). (tpusim still prefetches dcn_cross.013's
//! x0 on chip, [`super::prefetch`], where the compiler prefetches the weight.)

use std::collections::BTreeSet;

use super::bytes::Sizer;
use super::fusion::Group;
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;

/// Padded bytes of the inputs of MXU kernel `k` that members after its dot (depending on a dot's result) read
/// from HBM: not placed on chip (`in_vmem`), not constants, not the buffer a dynamic-update-slice writes into.
pub(super) fn epilogue_input_bytes(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    in_vmem: &BTreeSet<usize>,
) -> Result<u64, HloError> {
    let mut after: BTreeSet<usize> = BTreeSet::new();
    let mut read: BTreeSet<usize> = BTreeSet::new();
    for &m in &k.members {
        let node = &g.nodes[m];
        let is_dot = matches!(node.class, OpClass::Dot | OpClass::Convolution);
        if !is_dot && !node.operands.iter().any(|o| after.contains(o)) {
            continue;
        }
        after.insert(m);
        if is_dot {
            continue;
        }
        // A dynamic-update-slice writes its update into its first operand in place ([`super::inplace`]): that
        // buffer is not read.
        let in_place = usize::from(node.ins.opcode == "dynamic-update-slice");
        for &o in node.operands.iter().skip(in_place) {
            if k.inputs.contains(&o) && !in_vmem.contains(&o) && g.nodes[o].ins.opcode != "constant" {
                read.insert(o);
            }
        }
    }
    let mut bytes = 0u64;
    for o in read {
        bytes = bytes.saturating_add(sizer.shape(&g.nodes[o].ins.shape)?.padded_bytes);
    }
    Ok(bytes)
}
