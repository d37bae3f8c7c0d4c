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
        let name = node.ins.attr(key).unwrap_or("");
        module.computation_index(name).ok_or_else(|| {
            HloError::Unsupported(format!(
                "`{}`: no {key} computation `{}`",
                node.ins.name,
                name.trim().trim_start_matches('%')
            ))
        })
    };
    Ok((find("condition")?, find("body")?))
}

/// The branch computations of a `conditional` instruction's node (`branch_computations={...}`, or
/// `true_computation=` and `false_computation=`).
pub fn branches(module: &HloModule, node: &Node<'_>) -> Result<Vec<usize>, HloError> {
    let names: Vec<&str> = match node.ins.attr("branch_computations") {
        Some(list) => list
            .trim()
            .trim_start_matches('{')
            .trim_end_matches('}')
            .split(',')
            .filter(|n| !n.trim().is_empty())
            .collect(),
        None => ["true_computation", "false_computation"]
            .iter()
            .filter_map(|k| node.ins.attr(k))
            .collect(),
    };
    names
        .iter()
        .map(|name| {
            module.computation_index(name).ok_or_else(|| {
                HloError::Unsupported(format!(
                    "`{}`: no branch computation `{}`",
                    node.ins.name,
                    name.trim().trim_start_matches('%')
                ))
            })
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

/// A counted loop's counter: state element `index`, compared `direction` with `limit` by the condition,
/// advanced by `step` in the body (read once per condition and body, whatever the loop's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The state tuple element holding the counter.
    pub index: usize,
    /// The condition's constant.
    pub limit: i64,
    /// The body's constant increment.
    pub step: i64,
    /// `LT`, `LE`, `GT`, `GE` or `NE`, with the counter on the left.
    direction: &'static str,
}

/// The counter of a loop with condition graph `cond` and body graph `body`; None when the loop is not
/// counted in the form above.
pub fn counter(cond: &Graph<'_>, body: &Graph<'_>) -> Option<Counter> {
    // The condition: element k compared with a constant limit.
    let root = &cond.nodes[cond.root];
    if root.ins.opcode != "compare" || root.operands.len() != 2 {
        return None;
    }
    let written = root.ins.attr("direction")?.trim();
    let (a, b) = (root.operands[0], root.operands[1]);
    // Normalised to "k DIR limit".
    let (index, limit, direction) = match (cond.state_element(a), int_constant(&cond.nodes[b])) {
        (Some(k), Some(limit)) => (k, limit, written),
        _ => {
            let index = cond.state_element(b)?;
            let limit = int_constant(&cond.nodes[a])?;
            let flipped = match written {
                "LT" => "GT",
                "LE" => "GE",
                "GT" => "LT",
                "GE" => "LE",
                other => other,
            };
            (index, limit, flipped)
        }
    };
    let direction = ["LT", "LE", "GT", "GE", "NE"].into_iter().find(|d| *d == direction)?;
    // The step: the body's next state has element k + constant.
    let next = &body.nodes[body.root];
    if next.ins.opcode != "tuple" {
        return None;
    }
    let inc = &body.nodes[*next.operands.get(index)?];
    if inc.ins.opcode != "add" || inc.operands.len() != 2 {
        return None;
    }
    let (x, y) = (inc.operands[0], inc.operands[1]);
    let step = match (body.state_element(x), body.state_element(y)) {
        (Some(e), _) if e == index => int_constant(&body.nodes[y])?,
        (_, Some(e)) if e == index => int_constant(&body.nodes[x])?,
        _ => return None,
    };
    Some(Counter {
        index,
        limit,
        step,
        direction,
    })
}

impl Counter {
    /// Trips of the loop whose initial state is node `init` of the flat graph `outer` (element `index` of the
    /// tuple must be a constant); None when it is not, or the counter never reaches the limit.
    pub fn trips(&self, outer: &Graph<'_>, init: usize) -> Option<u64> {
        let init_node = &outer.nodes[init];
        if init_node.ins.opcode != "tuple" {
            return None;
        }
        let start = int_constant(&outer.nodes[*init_node.operands.get(self.index)?])?;
        let (limit, step) = (self.limit, self.step);
        let trips = match self.direction {
            "LT" | "NE" if step > 0 => div_ceil(limit.checked_sub(start)?, step),
            "LE" if step > 0 => div_ceil(limit.checked_sub(start)?.checked_add(1)?, step),
            "GT" | "NE" if step < 0 => div_ceil(start.checked_sub(limit)?, step.checked_neg()?),
            "GE" if step < 0 => div_ceil(start.checked_sub(limit)?.checked_add(1)?, step.checked_neg()?),
            _ => return None,
        };
        // "NE" counts only when the counter lands on the limit.
        if self.direction == "NE" && limit.checked_sub(start)?.checked_rem(step)? != 0 {
            return None;
        }
        (0..=MAX_TRIPS).contains(&trips).then_some(trips as u64)
    }
}

/// Ceiling of `a / b` for `b > 0`, 0 for `a <= 0`.
fn div_ceil(a: i64, b: i64) -> i64 {
    if a <= 0 {
        0
    } else {
        (a - 1) / b + 1
    }
}
