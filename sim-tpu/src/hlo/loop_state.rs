//! Which elements of a `while` loop's state the compiler keeps on chip (VMEM, or CMEM on v4) for the whole
//! loop, so the body's kernels read and write them there and move no HBM bytes for them.
//!
//! The rule, read off the `while` result shapes of the compiler corpus's optimized modules
//! (`tools/corpus/loop_state.py` prints them for every record):
//! - on a megacore chip without CMEM (v5p) the state stays in HBM (its two cores would both write it):
//!   scan.003, scan.009, scan.011 on v5p put none of their stacked arrays on chip;
//! - elsewhere the elements go on chip in tuple order while they fit half of the chip's larger on-chip memory
//!   (a larger one is left in HBM and the next ones still tried): scan.014 (two bf16[121,1024,119] of 31.8 MB)
//!   has both on chip on v4 (CMEM 128 MiB), v5e and v6e (VMEM 128 MiB), one on tpu7x (VMEM 64 MiB); scan.008's
//!   two 950 MB arrays stay in HBM on every chip while its carry and weights go on chip;
//! - an element whose initial value is an entry parameter and which the body passes through unchanged stays
//!   where the parameter is, in HBM (scan.011's and scan.015's f32 inputs `xs`, scan.000's bf16 inputs and
//!   weights on v5e), unless it is f32 and reaches only matmuls: the compiler then writes a bf16 copy before the
//!   loop, an intermediate it places on chip (scan.003's and scan.001's inputs and weights, `S(1)`).
//!
//! What that saves (scan.003 on v5e, a fit record): the body's two 128x203x203 dots on on-chip operands cost
//! 360 cycles each in the compiler's estimate, where an MXU kernel streaming from HBM pays the op model's
//! launch (about 3,150 cycles): see [`onchip_mxu_launch`].

use std::collections::BTreeSet;

use sim_core::layout::Shape;

use super::bytes::Sizer;
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;
use crate::chips::Chip;
use crate::tensorcore::ChipModel;

/// Bytes of loop state the compiler keeps on chip: half of the chip's larger on-chip memory (VMEM or CMEM);
/// none on a megacore chip without CMEM, or a chip without a preset (no evidence).
pub(super) fn state_budget(chip: &ChipModel) -> u64 {
    if chip.megacore {
        return 0;
    }
    match Chip::preset(&chip.name) {
        Ok(c) => c.spec.vmem_bytes_per_tc / 2,
        Err(_) => 0,
    }
}

/// The state elements (tuple indices) of the loop whose initial tuple is node `init` of `outer` and whose body
/// is `body`, that the compiler keeps on chip within `budget` bytes.
pub(super) fn on_chip_elements(
    outer: &Graph<'_>,
    init: usize,
    body: &Graph<'_>,
    sizer: &Sizer,
    budget: u64,
) -> Result<BTreeSet<usize>, HloError> {
    let mut kept = BTreeSet::new();
    let init_node = &outer.nodes[init];
    if budget == 0 || init_node.ins.opcode != "tuple" {
        return Ok(kept);
    }
    let mut used = 0u64;
    for (i, &value) in init_node.operands.iter().enumerate() {
        let Shape::Array(_) = &outer.nodes[value].ins.shape else {
            continue;
        };
        let parameter = outer.nodes[value].ins.opcode == "parameter";
        if parameter && passed_through(body, i) && !f32_only_into_matmuls(body, i) {
            continue;
        }
        let bytes = sizer.shape(&outer.nodes[value].ins.shape)?.padded_bytes;
        if used.saturating_add(bytes) <= budget {
            used += bytes;
            kept.insert(i);
        }
    }
    Ok(kept)
}

/// The body's nodes holding on-chip state: its reads of those elements and the values it writes back to them.
pub(super) fn state_nodes(body: &Graph<'_>, elements: &BTreeSet<usize>) -> BTreeSet<usize> {
    let mut nodes: BTreeSet<usize> = (0..body.nodes.len())
        .filter(|&n| body.state_element(n).is_some_and(|e| elements.contains(&e)))
        .collect();
    let root = &body.nodes[body.root];
    if root.ins.opcode == "tuple" {
        nodes.extend(
            root.operands
                .iter()
                .enumerate()
                .filter(|(i, _)| elements.contains(i))
                .map(|(_, &n)| n),
        );
    }
    nodes
}

/// Whether the body returns element `i` as it read it.
fn passed_through(body: &Graph<'_>, i: usize) -> bool {
    let root = &body.nodes[body.root];
    root.ins.opcode == "tuple" && root.operands.get(i).is_some_and(|&n| body.state_element(n) == Some(i))
}

/// Whether element `i` is f32 and every use of it in the body (but returning it) reaches a matmul through
/// data movement only (slices, reshapes, converts).
fn f32_only_into_matmuls(body: &Graph<'_>, i: usize) -> bool {
    let reads: Vec<usize> = (0..body.nodes.len())
        .filter(|&n| body.state_element(n) == Some(i))
        .collect();
    let f32 = reads
        .first()
        .is_some_and(|&n| matches!(&body.nodes[n].ins.shape, Shape::Array(a) if a.element_type.name() == "f32"));
    if !f32 {
        return false;
    }
    let mut stack = reads;
    let mut seen = BTreeSet::new();
    let mut any = false;
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        for &u in &body.users[n] {
            let node = &body.nodes[u];
            match node.class {
                _ if u == body.root => {}
                OpClass::Dot | OpClass::Convolution => any = true,
                OpClass::Movement | OpClass::Free => stack.push(u),
                OpClass::Elementwise if node.ins.opcode == "convert" => stack.push(u),
                _ => return false,
            }
        }
    }
    any
}

/// Fixed cycles of an MXU kernel whose operands and results are all on chip: the chip's
/// `onchip_mxu_launch_cycles` (the compiler's smallest MXU fusion estimate, read off the corpus), never more
/// than `hbm_launch`, the launch of one streaming from HBM. A product with fewer than a sublane tile (8) of
/// rows or columns (`rows`) the compiler emits as a vector loop fusion, which pays the loop launch.
///
/// Evidence (compiler corpus, fit records): the smallest kOutput fusion estimates are v4 873, v5e 261, v5p
/// 2,370, v6e 1,038, tpu7x 1,040 cycles (moe_routing and scan bodies on `S(1)`/`S(3)` operands), where the op
/// model's MXU launch, fitted on kernels streaming from HBM, is 1,557, 3,153, 4,092, 1,999 and 2,049 in a
/// program; scan.003's body dots (128x203x203) on v5e cost 360 each. scan.015's body dots (2x302x302, on
/// `S(1)` operands) are one kLoop fusion of 2,152 cycles on v5e, at the loop launch (1,813).
pub(super) fn onchip_mxu_launch(onchip_launch: Option<f64>, hbm_launch: u64, rows: u64, chip: &ChipModel) -> u64 {
    if rows < 8 {
        return super::cost::loop_launch_cycles(chip).min(hbm_launch);
    }
    match onchip_launch {
        Some(c) if c >= 0.0 => (c.round() as u64).min(hbm_launch),
        _ => hbm_launch,
    }
}
