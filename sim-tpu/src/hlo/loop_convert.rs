//! f32 loop inputs the compiler converts to bf16 once, before the loop.
//!
//! A `while` loop state element whose initial value is a parameter of the enclosing graph, which the body
//! passes through unchanged and reads only as an operand of default-precision matmuls (through data movement
//! and converts), is f32 in the program but bf16 in the compiler's: the MXU rounds it to bf16 anyway, so the
//! compiler writes a bf16 copy in a `convert` kernel before the loop and the body reads the copy.
//!
//! Evidence (compiler corpus, optimized modules):
//! - fit records scan.002, scan.003 and scan.009 (all chips) have one entry `convert` per such input (weights,
//!   stacked inputs `xs`) before the `while`, whose state holds the bf16 copy; an f32 input the body adds
//!   (a bias) or returns rewritten keeps its f32 element;
//! - what they cost: scan.011 spends 356,513 of 1,373,403 cycles on them on v4, 410,370 of 1,180,301 on v5e,
//!   333,284 of 791,780 on v6e; scan.002@v5e 52,328 of 225,024; scan.015@v4 converts its two f32[302,302]
//!   weights at 3,435 cycles each and its f32[48,2,302] inputs at 2,764;
//! - where the copy lives: on chip (VMEM, `S(1)`) on chips that keep loop state there
//!   ([`super::loop_state`]); in CMEM (`S(3)`) on v4, where scan.015's body kernel then costs the compiler
//!   1,146 cycles against 3,555 when it read the f32 weights from HBM.

use std::collections::BTreeSet;

use sim_core::layout::{ArrayShape, PrimitiveType, Shape};

use super::bytes::Sizer;
use super::graph::Graph;
use super::ops::OpClass;
use super::{HloError, KernelCost};
use crate::tensorcore::lower::{Kernel, VpuClass, Work, VREG_ELEMENTS};
use crate::tensorcore::ChipModel;

/// A loop state element holding a parameter of the enclosing graph that the body passes through unchanged (an
/// f32 loop input the compiler may convert to bf16 before the loop).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct StateParameter {
    /// The state tuple element holding it.
    pub element: usize,
    /// Its initial value: a parameter node of the enclosing graph.
    pub value: usize,
}

/// The state elements of the loop whose initial tuple is node `init` of `outer` and whose body is `body` that
/// hold a parameter of `outer` the body passes through unchanged, in tuple order.
pub(super) fn passed_parameters(outer: &Graph<'_>, init: usize, body: &Graph<'_>) -> Vec<StateParameter> {
    let init_node = &outer.nodes[init];
    if init_node.ins.opcode != "tuple" {
        return Vec::new();
    }
    init_node
        .operands
        .iter()
        .enumerate()
        .filter(|&(i, &v)| outer.nodes[v].ins.opcode == "parameter" && passed_through(body, i))
        .map(|(element, &value)| StateParameter { element, value })
        .collect()
}

/// The inputs of the loop whose initial tuple is node `init` of `outer` and whose body is `body` that the
/// compiler converts to bf16 before the loop, in tuple order.
pub(super) fn converted_inputs(outer: &Graph<'_>, init: usize, body: &Graph<'_>) -> Vec<StateParameter> {
    let mut inputs = passed_parameters(outer, init, body);
    inputs.retain(|p| f32_only_into_matmuls(body, p.element));
    inputs
}

/// Whether the body returns element `i` as it read it.
pub(super) fn passed_through(body: &Graph<'_>, i: usize) -> bool {
    let root = &body.nodes[body.root];
    root.ins.opcode == "tuple" && root.operands.get(i).is_some_and(|&n| body.state_element(n) == Some(i))
}

/// Whether element `i` is f32 and every use of it in the body (but returning it) reaches a default-precision
/// matmul through data movement only (slices, reshapes, converts).
pub(super) fn f32_only_into_matmuls(body: &Graph<'_>, i: usize) -> bool {
    let reads: Vec<usize> = (0..body.nodes.len())
        .filter(|&n| body.state_element(n) == Some(i))
        .collect();
    let f32 = reads
        .first()
        .is_some_and(|&n| matches!(&body.nodes[n].ins.shape, Shape::Array(a) if a.element_type == PrimitiveType::F32));
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
                OpClass::Dot | OpClass::Convolution if default_precision(node.ins.attr("operand_precision")) => {
                    any = true
                }
                OpClass::Movement | OpClass::Free => stack.push(u),
                OpClass::Elementwise if node.ins.opcode == "convert" => stack.push(u),
                _ => return false,
            }
        }
    }
    any
}

/// Whether a matmul's `operand_precision` attribute (absent: default) asks for the default precision, the
/// one-pass bf16 product that reads its f32 operands rounded to bf16.
fn default_precision(attr: Option<&str>) -> bool {
    attr.is_none_or(|a| {
        a.trim()
            .trim_start_matches('{')
            .trim_end_matches('}')
            .split(',')
            .all(|p| p.trim().eq_ignore_ascii_case("default"))
    })
}

/// The bf16 copy of input `value` of `outer`.
pub(super) fn bf16_copy(outer: &Graph<'_>, value: usize) -> Option<ArrayShape> {
    match &outer.nodes[value].ins.shape {
        Shape::Array(a) => Some(ArrayShape {
            element_type: PrimitiveType::BF16,
            dims: a.dims.clone(),
            layout: None,
        }),
        _ => None,
    }
}

/// The entry `convert` kernels writing the bf16 copies of `inputs` (values of `outer`): each reads the f32
/// array from HBM and writes its bf16 copy, timed by the op model as an unfused convert (a unary VPU op).
pub(super) fn convert_kernels(
    outer: &Graph<'_>,
    inputs: &[StateParameter],
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<Vec<KernelCost>, HloError> {
    let mut kernels = Vec::with_capacity(inputs.len());
    for c in inputs {
        let node = &outer.nodes[c.value];
        let Some(copy) = bf16_copy(outer, c.value) else {
            continue;
        };
        let from = sizer.shape(&node.ins.shape)?;
        let to = sizer.array(&copy)?;
        let kernel = Kernel {
            name: "convert",
            work: Work::Vpu {
                class: VpuClass::Unary,
                blocks: to.padded_elements as f64 / VREG_ELEMENTS as f64,
                elem_bytes: 4,
            },
            in_bytes: from.padded_bytes,
            out_bytes: to.padded_bytes,
            unpadded_bytes: from.logical_bytes.saturating_add(to.logical_bytes),
        };
        kernels.push(super::relayout::added_copy(
            format!("{}.convert", node.ins.name),
            &kernel,
            chip,
        ));
    }
    Ok(kernels)
}

/// The elements of `inputs` whose bf16 copies the compiler places in CMEM (v4), in tuple order while they fit
/// the chip's CMEM: the body reads them on chip. None on a chip without CMEM.
pub(super) fn in_cmem(
    outer: &Graph<'_>,
    inputs: &[StateParameter],
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<BTreeSet<usize>, HloError> {
    let mut kept = BTreeSet::new();
    let mut used = 0u64;
    for c in inputs {
        let Some(copy) = bf16_copy(outer, c.value) else {
            continue;
        };
        let bytes = sizer.array(&copy)?.padded_bytes;
        if used.saturating_add(bytes) <= chip.cmem_bytes {
            used += bytes;
            kept.insert(c.element);
        }
    }
    Ok(kept)
}
