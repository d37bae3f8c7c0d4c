//! An entry MXU kernel that reads and writes only VMEM pays the chip's on-chip launch
//! (`onchip_kernel_cycles`), not the launch of a kernel streaming from HBM: on a chip without megacore the
//! compiler's memory-space assignment keeps intermediates in VMEM (`S(1)`) and copies the entry parameters a
//! later kernel reads into VMEM while the earlier kernels run (`copy-start`/`copy-done`, no estimate of their
//! own), so such a kernel starts with no HBM prologue. Its window plan is kept (only a loop body's on-chip kernels
//! drop the per-window DMA cycles, [`super::loop_state::onchip_window_body`]).
//!
//! Evidence (compiler corpus, fit records' optimized entry modules, MXU (kOutput) fusions of at most 256 KiB of
//! operands and result, `tools/corpus/onchip_kernels.py`): with every operand and a floating-point result in
//! `S(1)`, v6e median 1,042 cycles (9 kernels, mlp: mlp.019's seven of 1,038-1,056, where tpusim paid
//! 3,173-3,212 and the program was 1.48x over), v5e 2,137, tpu7x 3,330; the same kernels writing their result to
//! HBM cost v6e 3,335, v5e 2,403, tpu7x 3,431. The medians are the installed constants; on tpu7x the compiler's
//! on-chip kernel costs more than tpusim's HBM launch, so the rule leaves it unchanged. The operands still in HBM
//! are entry parameters the program's first kernels read, kernels reading parameters only (the input batch and
//! the first weights: mlp.019, mlp.020, mlp.025, moe_routing.004/.005/.007/.014/.016, conv.015,
//! resnet_block.008 on v6e); every parameter a later kernel reads, a bias of 54 bytes or a weight of 21 MB
//! (mlp.008), is copied on chip first. On a megacore chip the kernels' results stay in HBM (v5p; v4's CMEM), so
//! the rule does not apply there.

use std::collections::BTreeSet;

use super::bytes::Sizer;
use super::fusion::Group;
use super::graph::Graph;
use super::HloError;
use crate::tensorcore::ChipModel;

/// The entry parameters the compiler may copy into VMEM before a later reader: those of at most half the chip's
/// prefetch budget (as [`super::operand_prefetch`]'s copies). `None` on a megacore chip, where the rule does not
/// apply.
pub(super) fn copied_parameters(
    g: &Graph<'_>,
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<Option<BTreeSet<usize>>, HloError> {
    if chip.megacore {
        return Ok(None);
    }
    let mut out = BTreeSet::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if !is_parameter(g, i) {
            continue;
        }
        if sizer.shape(&n.ins.shape)?.padded_bytes.saturating_mul(2) <= chip.prefetch_budget_bytes {
            out.insert(i);
        }
    }
    Ok(Some(out))
}

/// Whether entry kernel `k` reads and writes only on-chip memory: each input (`free` ones, scalar constants,
/// aside) is a parameter in `copied` ([`copied_parameters`]; another parameter, even one tpusim's prefetch
/// rules read on chip, is in HBM at the program's start) or an intermediate placed `on_chip`, and each of its
/// results is placed on chip.
pub(super) fn reads_and_writes_on_chip(
    g: &Graph<'_>,
    k: &Group,
    on_chip: &BTreeSet<usize>,
    copied: &BTreeSet<usize>,
    free: &dyn Fn(usize) -> bool,
) -> bool {
    let input_on_chip = |i: usize| {
        if is_parameter(g, i) {
            copied.contains(&i)
        } else {
            on_chip.contains(&i)
        }
    };
    // A kernel reading parameters only can run first, with no kernel before it to hide their copies.
    let after_start = k.inputs.iter().any(|&i| !free(i) && !is_parameter(g, i));
    after_start
        && !k.outputs.is_empty()
        && k.inputs.iter().all(|&i| free(i) || input_on_chip(i))
        && k.outputs.iter().all(|o| on_chip.contains(o))
}

/// Whether node `i` is a parameter of the entry (a loop body's parameter is its state).
fn is_parameter(g: &Graph<'_>, i: usize) -> bool {
    g.nodes[i].ins.opcode == "parameter" && g.nodes[i].param.is_some()
}
