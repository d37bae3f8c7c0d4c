//! Control flow: a `conditional`'s branches, and for `while` loops the trip count of a counted loop (JAX's `fori_loop` and `scan` lower to one), read from
//! the loop itself as the compiler's trip-count analysis would: an integer element of the loop state starts
//! at a constant, the body adds a constant to it, and the condition compares it with a constant.

use super::graph::{Graph, Node};
use super::ir::{HloModule, Operands};
use super::HloError;

/// Longest trip count accepted (a larger one is taken as unknown).
const MAX_TRIPS: i64 = 1 << 40;

/// The condition and body computations of a `while` instruction's node.
pub fn parts(module: &HloModule, node: &Node<'_>) -> Result<(usize, usize), HloError> {
    let find = |key: &str| -> Result<usize, HloError> {
        let name = node
            .ins
            .attr(key)
            .map(|v| v.trim().trim_start_matches('%'))
            .unwrap_or("");
        module
            .computations
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| HloError::Unsupported(format!("`{}`: no {key} computation `{name}`", node.ins.name)))
    };
    Ok((find("condition")?, find("body")?))
}

/// The branch computations of a `conditional` instruction's node (`branch_computations={...}`, or
/// `true_computation=` and `false_computation=`).
pub fn branches(module: &HloModule, node: &Node<'_>) -> Result<Vec<usize>, HloError> {
    let names: Vec<String> = match node.ins.attr("branch_computations") {
        Some(list) => list
            .trim()
            .trim_start_matches('{')
            .trim_end_matches('}')
            .split(',')
            .map(|n| n.trim().trim_start_matches('%').to_string())
            .filter(|n| !n.is_empty())
            .collect(),
        None => ["true_computation", "false_computation"]
            .iter()
            .filter_map(|k| node.ins.attr(k))
            .map(|n| n.trim().trim_start_matches('%').to_string())
            .collect(),
    };
    names
        .iter()
        .map(|name| {
            module
                .computations
                .iter()
                .position(|c| &c.name == name)
                .ok_or_else(|| HloError::Unsupported(format!("`{}`: no branch computation `{name}`", node.ins.name)))
        })
        .collect()
}

/// The integer value of a scalar integer constant node.
fn int_constant(n: &Node<'_>) -> Option<i64> {
    if n.ins.opcode != "constant" {
        return None;
    }
    let sim_core::layout::Shape::Array(a) = &n.ins.shape else {
        return None;
    };
    if !a.dims.is_empty()
        || !matches!(
            a.element_type.name(),
            "s8" | "s16" | "s32" | "s64" | "u8" | "u16" | "u32" | "u64"
        )
    {
        return None;
    }
    match &n.ins.operands {
        Operands::Literal(l) => l.trim().parse().ok(),
        _ => None,
    }
}

/// The tuple index `n` reads from the computation's parameter, if it is `get-tuple-element(parameter(0))`.
fn state_element(g: &Graph<'_>, n: usize) -> Option<i64> {
    let node = &g.nodes[n];
    if node.ins.opcode != "get-tuple-element" {
        return None;
    }
    let src = &g.nodes[*node.operands.first()?];
    if src.param != Some(0) {
        return None;
    }
    node.ins.attr("index")?.trim().parse().ok()
}

/// Trip count of a loop whose state starts as `init` (the flat graph `outer` and the node of the `while`'s
/// operand), with condition graph `cond` and body graph `body`; None when the loop is not counted in the
/// form above.
pub fn trip_count(outer: &Graph<'_>, init: usize, cond: &Graph<'_>, body: &Graph<'_>) -> Option<u64> {
    // The condition: element k compared with a constant limit.
    let root = &cond.nodes[cond.root];
    if root.ins.opcode != "compare" || root.operands.len() != 2 {
        return None;
    }
    let direction = root.ins.attr("direction")?.trim();
    let (a, b) = (root.operands[0], root.operands[1]);
    // Normalised to "k DIR limit".
    let (k, limit, direction) = match (state_element(cond, a), int_constant(&cond.nodes[b])) {
        (Some(k), Some(limit)) => (k, limit, direction),
        _ => {
            let k = state_element(cond, b)?;
            let limit = int_constant(&cond.nodes[a])?;
            let flipped = match direction {
                "LT" => "GT",
                "LE" => "GE",
                "GT" => "LT",
                "GE" => "LE",
                other => other,
            };
            (k, limit, flipped)
        }
    };
    let k_index = usize::try_from(k).ok()?;
    // The start: element k of the initial state tuple is a constant.
    let init_node = &outer.nodes[init];
    if init_node.ins.opcode != "tuple" {
        return None;
    }
    let start = int_constant(&outer.nodes[*init_node.operands.get(k_index)?])?;
    // The step: the body's next state has element k + constant.
    let next = &body.nodes[body.root];
    if next.ins.opcode != "tuple" {
        return None;
    }
    let inc = &body.nodes[*next.operands.get(k_index)?];
    if inc.ins.opcode != "add" || inc.operands.len() != 2 {
        return None;
    }
    let (x, y) = (inc.operands[0], inc.operands[1]);
    let step = match (state_element(body, x), state_element(body, y)) {
        (Some(e), _) if e == k => int_constant(&body.nodes[y])?,
        (_, Some(e)) if e == k => int_constant(&body.nodes[x])?,
        _ => return None,
    };
    let trips = match direction {
        "LT" | "NE" if step > 0 => div_ceil(limit.checked_sub(start)?, step),
        "LE" if step > 0 => div_ceil(limit.checked_sub(start)?.checked_add(1)?, step),
        "GT" | "NE" if step < 0 => div_ceil(start.checked_sub(limit)?, -step),
        "GE" if step < 0 => div_ceil(start.checked_sub(limit)?.checked_add(1)?, -step),
        _ => return None,
    };
    // "NE" counts only when the counter lands on the limit.
    if direction == "NE" && (limit - start) % step != 0 {
        return None;
    }
    (0..=MAX_TRIPS).contains(&trips).then_some(trips as u64)
}

/// Ceiling of `a / b` for `b > 0`, 0 for `a <= 0`.
fn div_ceil(a: i64, b: i64) -> i64 {
    if a <= 0 {
        0
    } else {
        (a - 1) / b + 1
    }
}
