//! The entry computation as one flat dataflow graph: `call`s (and the fusions of an optimized module) are inlined,
//! so kernels are formed over the whole program as the compiler's inliner sees it.

use super::ir::{HloModule, Instruction, Operands};
use super::ops::{class_of_instruction, OpClass};
use super::HloError;

/// Deepest call nesting inlined.
const MAX_CALL_DEPTH: usize = 64;
/// Largest flattened graph accepted (guards against call trees that multiply).
const MAX_NODES: usize = 20_000_000;

/// One node of the flat graph: an instruction of some computation, with operands renumbered.
#[derive(Clone, Debug)]
pub struct Node<'m> {
    /// The instruction.
    pub ins: &'m Instruction,
    /// Its class.
    pub class: OpClass,
    /// Operand node ids (all smaller than this node's id).
    pub operands: Vec<usize>,
    /// Entry parameter number, for the entry's parameters.
    pub param: Option<u64>,
}

/// The flattened entry computation.
#[derive(Clone, Debug)]
pub struct Graph<'m> {
    /// Nodes in a topological order.
    pub nodes: Vec<Node<'m>>,
    /// The node whose value the entry returns.
    pub root: usize,
    /// Users of each node.
    pub users: Vec<Vec<usize>>,
}

impl<'m> Graph<'m> {
    /// Flattens `module`'s entry computation.
    pub fn build(module: &'m HloModule) -> Result<Graph<'m>, HloError> {
        Graph::build_computation(module, module.entry)
    }

    /// Flattens computation `comp` of `module` (a loop's condition or body: its parameters are the graph's).
    pub fn build_computation(module: &'m HloModule, comp: usize) -> Result<Graph<'m>, HloError> {
        let mut nodes = Vec::new();
        let mut cx = Inliner {
            active: Vec::new(),
            visited: 0,
        };
        let root = inline(module, comp, None, &mut cx, &mut nodes)?;
        let ins: Vec<&Instruction> = nodes.iter().map(|n| n.ins).collect();
        let mut operands: Vec<Vec<usize>> = nodes.iter_mut().map(|n| std::mem::take(&mut n.operands)).collect();
        let same = super::cse::merge_repeated_reductions(module, &ins, &mut operands);
        for (i, (n, ops)) in nodes.iter_mut().zip(operands).enumerate() {
            n.operands = ops;
            if same[i] != i {
                n.class = OpClass::Free;
            }
        }
        let root = same[root];
        for i in 0..nodes.len() {
            if is_one_hot_scatter(&nodes, i) {
                nodes[i].class = OpClass::Elementwise;
            }
        }
        mark_free(&mut nodes);
        let mut users = vec![Vec::new(); nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            for &o in &n.operands {
                if !users[o].contains(&i) {
                    users[o].push(i);
                }
            }
        }
        Ok(Graph { nodes, root, users })
    }

    /// The element of the computation's tuple parameter that node `n` reads, when it is
    /// `get-tuple-element(parameter(0))` (a loop's state, in its condition and body).
    pub fn state_element(&self, n: usize) -> Option<usize> {
        let node = &self.nodes[n];
        if node.ins.opcode != "get-tuple-element" || self.nodes[*node.operands.first()?].param != Some(0) {
            return None;
        }
        node.ins.tuple_index()
    }

    /// The nodes the entry returns: the root, or the operands of a root tuple (the value a free unit reduction
    /// forwards, for one of those).
    pub fn outputs(&self) -> Vec<usize> {
        let r = &self.nodes[self.root];
        let outs = if r.ins.opcode == "tuple" {
            r.operands.clone()
        } else {
            vec![self.root]
        };
        outs.into_iter().map(|o| forwarded(&self.nodes, o)).collect()
    }
}

fn elements(s: &sim_core::layout::Shape) -> Option<u64> {
    match s {
        sim_core::layout::Shape::Array(a) => a.dims.iter().try_fold(1u64, |acc, d| {
            acc.checked_mul(u64::try_from(d.upper_bound().unwrap_or(0)).ok()?)
        }),
        _ => None,
    }
}

/// A scatter of one scalar per batch row into an array generated from a constant (the gradient of
/// `take_along_axis`): each row receives exactly one update, so the result is `select(iota == index, update,
/// init)`, an elementwise op the compiler fuses into the consumer (the optimized modules show a compare and
/// select in place of the scatter) rather than a scatter kernel of its own.
fn is_one_hot_scatter(nodes: &[Node<'_>], i: usize) -> bool {
    let n = &nodes[i];
    if n.ins.opcode != "scatter" || n.operands.len() != 3 {
        return false;
    }
    let init = &nodes[n.operands[0]];
    let generated = init.ins.opcode == "broadcast"
        && init
            .operands
            .iter()
            .all(|&o| nodes[o].ins.opcode == "constant" && elements(&nodes[o].ins.shape) == Some(1));
    let batching = n.ins.int_list("input_batching_dims").unwrap_or_default();
    let window = n.ins.int_list("update_window_dims").unwrap_or_default();
    if !generated || batching.is_empty() || !window.is_empty() {
        return false;
    }
    let sim_core::layout::Shape::Array(a) = &init.ins.shape else {
        return false;
    };
    // One update per batch row: the updates are exactly the batch rows.
    let rows = batching.iter().try_fold(1u64, |acc, &d| {
        let dim = a.dims.get(usize::try_from(d).ok()?)?.upper_bound()?;
        acc.checked_mul(u64::try_from(dim).ok()?)
    });
    rows.is_some() && rows == elements(&nodes[n.operands[2]].ins.shape)
}

/// Inlining state: the computations being inlined (to refuse recursion) and the instructions visited.
struct Inliner {
    active: Vec<usize>,
    visited: usize,
}

fn inline<'m>(
    m: &'m HloModule,
    comp: usize,
    args: Option<&[usize]>,
    cx: &mut Inliner,
    nodes: &mut Vec<Node<'m>>,
) -> Result<usize, HloError> {
    let c = &m.computations[comp];
    if cx.active.len() > MAX_CALL_DEPTH {
        return Err(HloError::Unsupported(format!(
            "calls nested deeper than {MAX_CALL_DEPTH} (at `{}`)",
            c.name
        )));
    }
    if cx.active.contains(&comp) {
        return Err(HloError::Unsupported(format!("computation `{}` calls itself", c.name)));
    }
    cx.active.push(comp);
    let mut ids = Vec::with_capacity(c.instructions.len());
    for ins in &c.instructions {
        cx.visited += 1;
        if cx.visited > MAX_NODES {
            return Err(HloError::Unsupported(format!(
                "more than {MAX_NODES} instructions after inlining calls"
            )));
        }
        let ops: Vec<usize> = ins.operand_ids().iter().map(|&o| ids[o]).collect();
        let id = match (&ins.operands, args) {
            (Operands::Parameter(n), Some(a)) => *a.get(*n as usize).ok_or_else(|| {
                HloError::Unsupported(format!(
                    "`{}` reads parameter {n} of `{}`, which is called with {} operands",
                    ins.name,
                    c.name,
                    a.len()
                ))
            })?,
            _ if matches!(ins.opcode.as_str(), "call" | "fusion") => {
                let key = if ins.opcode == "call" { "to_apply" } else { "calls" };
                let callee = ins.attr(key).unwrap_or("");
                let idx = m.computation_index(callee).ok_or_else(|| {
                    HloError::Unsupported(format!(
                        "`{}`: no computation `{}`",
                        ins.name,
                        callee.trim().trim_start_matches('%')
                    ))
                })?;
                inline(m, idx, Some(&ops), cx, nodes)?
            }
            _ => {
                if nodes.len() >= MAX_NODES {
                    return Err(HloError::Unsupported(format!(
                        "more than {MAX_NODES} instructions after inlining calls"
                    )));
                }
                let param = match ins.operands {
                    Operands::Parameter(n) => Some(n),
                    _ => None,
                };
                nodes.push(Node {
                    ins,
                    class: class_of_instruction(ins),
                    operands: ops,
                    param,
                });
                nodes.len() - 1
            }
        };
        ids.push(id);
    }
    cx.active.pop();
    Ok(ids[c.root])
}

// A reduction over dimensions of size 1 only is no reduction: the compiler's algebraic simplifier rewrites it as a
// reshape of its input (the initial value of a sum is zero), a bitcast in the optimized module: the node is free
// and forwards its input ([`super::fusion`]'s pass-through ops), with no kernel of its own.  Evidence (compiler
// corpus, optimized modules): jax's gradient of a broadcast from `[1, D]` sums the `[1, D]` cotangent over its
// unit dimension. norm.014 (rmsnorm fwd+bwd, f32 [74,1792]) reduces `reshape.1 = f32[1,1792]` over
// `dimensions={0}`: tpusim gave it a reduce kernel of its own (2,131 cycles on v5p), the compiler's module has
// none (its four kernels: the scale gradient with the loss, the row sums, the `rsqrt`, the zero broadcast);
// mlp.032 (a bias gradient `[4864]` summed to `[1, 4864]` and again over the unit dimension) has the bias gradient
// in its matmul's kernel and no kernel for the unit sum. The same unit reductions are in 133 of the corpus's 420
// programs (mlp, embedding, softmax_xent, dcn_cross, attention, norm, ...): the rule took the random held-out
// median from 18.3 / 11.0 / 10.9 / 19.8 / 13.3 % to 16.4 / 11.0 / 8.8 / 16.3 / 9.5 % (v4, v5e, v5p, v6e, tpu7x;
// before any refit).

/// Marks every unit reduction free, and the reshape feeding it when nothing else reads that reshape (jax's
/// `[D] -> [1, D]` before the sum: together they forward the vector unchanged, a bitcast in the compiler's
/// module).
fn mark_free(nodes: &mut [Node<'_>]) {
    let mut readers = vec![0u32; nodes.len()];
    for n in nodes.iter() {
        for &o in &n.operands {
            readers[o] = readers[o].saturating_add(1);
        }
    }
    for i in 0..nodes.len() {
        if !is_unit_reduce(nodes, i) {
            continue;
        }
        nodes[i].class = OpClass::Free;
        let input = nodes[i].operands[0];
        if nodes[input].ins.opcode == "reshape" && readers[input] == 1 {
            nodes[input].class = OpClass::Free;
        }
    }
}

/// The node whose value `o` holds: `o` itself, or for a unit reduction made free (and its reshape), the value it
/// forwards.
fn forwarded(nodes: &[Node<'_>], mut o: usize) -> usize {
    while nodes[o].class == OpClass::Free && matches!(nodes[o].ins.opcode.as_str(), "reduce" | "reshape") {
        match nodes[o].operands.first() {
            Some(&x) => o = x,
            None => break,
        }
    }
    o
}

/// Whether node `i` is a single-input `reduce` whose result has as many elements as its input (every reduced
/// dimension has size 1).
fn is_unit_reduce(nodes: &[Node<'_>], i: usize) -> bool {
    let n = &nodes[i];
    if n.ins.opcode != "reduce" || n.operands.len() != 2 {
        return false;
    }
    let input = elements_of(&nodes[n.operands[0]].ins.shape);
    input.is_some() && input == elements_of(&n.ins.shape)
}

/// Elements of an array shape; `None` for a tuple or a dynamic dimension without a bound.
fn elements_of(s: &sim_core::layout::Shape) -> Option<u64> {
    match s {
        sim_core::layout::Shape::Array(a) => a
            .dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(u64::try_from(d.upper_bound()?).ok()?)),
        _ => None,
    }
}
