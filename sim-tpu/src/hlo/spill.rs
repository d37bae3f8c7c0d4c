//! A matmul operand too large for on-chip memory streams from HBM at the compiler's HBM rate.
//!
//! The op model's window plan streams operands at the rate it was fitted at on standalone matmuls, whose large
//! operand the compiler mostly prefetches on chip (v4 reads such weights from CMEM at up to 1,700 B per cycle,
//! above its HBM). An operand larger than the chip's on-chip memory (VMEM, or v4's CMEM) less one kernel's scoped
//! window can never be there: the kernel takes at least its bytes over HBM at the compiler's rate
//! (`hbm_bytes_per_cycle`).
//!
//! Evidence (compiler corpus, decode_matmul and matvec families): on v4 the f32 [11520,15616] weight of
//! decode_matmul.011 (720 MB) costs 1,634,354 cycles, 440 B per cycle, as do decode_matmul.000 (282 MB, 419),
//! .004 (bf16, 443 MB, 439) and .016 (190 MB, 437), where the op model's plan took 345,000 cycles for .011; on
//! v6e the same four read at 774-848 B per cycle (HBM rate 935). Weights that fit stay above the HBM rate
//! (decode_matmul.006 on v4, f32 55 MB: 1,680 B per cycle; on v6e 4,129).

use super::bytes::Sizer;
use super::graph::{Graph, Node};
use super::HloError;
use crate::tensorcore::cost::Residency;
use crate::tensorcore::ChipModel;

/// Cycles dot or convolution `node` spends at least streaming its operands that cannot be on chip (not
/// `resident`, larger than on-chip memory less the scoped window) at `hbm_bytes_per_cycle`; 0 when none.
pub(super) fn spilled_operand_cycles(
    g: &Graph<'_>,
    node: &Node<'_>,
    residency: Residency,
    sizer: &Sizer,
    chip: &ChipModel,
    hbm_bytes_per_cycle: f64,
) -> Result<f64, HloError> {
    let mut limit: Option<u64> = None;
    let mut bytes = 0u64;
    for (i, resident) in [(0usize, residency.lhs), (1, residency.rhs)] {
        let Some(&o) = node.operands.get(i) else { continue };
        if resident {
            continue;
        }
        let b = sizer.shape(&g.nodes[o].ins.shape)?.padded_bytes;
        // Cheap test first: nothing within the scoped window spills.
        if b <= chip.scoped_vmem_bytes {
            continue;
        }
        let limit = match limit {
            Some(l) => l,
            None => *limit.insert(on_chip_limit(chip)),
        };
        if b > limit {
            bytes = bytes.saturating_add(b);
        }
    }
    Ok(bytes as f64 / hbm_bytes_per_cycle.max(1e-9))
}

/// On-chip memory an operand could be prefetched into: the larger of VMEM and CMEM, less one kernel's scoped
/// window.
fn on_chip_limit(chip: &ChipModel) -> u64 {
    chip.vmem_bytes
        .max(chip.cmem_bytes)
        .saturating_sub(chip.scoped_vmem_bytes)
}
