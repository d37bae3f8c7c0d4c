//! Grouping instructions into the kernels the XLA TPU compiler emits.
//!
//! The rule, read off the compiler's optimized modules (`programs/opt/`), applied consumers first:
//! - cheap elementwise and data-movement ops (add, select, convert, broadcast, reshape, slice, transpose, ...) are
//!   fused into every kernel that consumes them, recomputed where there are several (the compiler duplicates a
//!   convert or a broadcast into each consumer fusion rather than write it out);
//! - a transcendental (exp, divide, rsqrt, ...) with one consuming kernel is fused into it; with several, it is
//!   recomputed in each when it is elementwise over an array in memory (not only over reductions' results, and
//!   no dot among its inputs unless it is an activation of non-batched matmul results, a GELU's `tanh`) and
//!   re-reading its inputs costs at most writing it out and reading it back (a softmax's `exp(logits - max)`);
//!   otherwise it is computed once, by
//!   a sibling loop or reduce kernel that also writes it out (a multi-output fusion), or by its own loop fusion;
//! - a scatter of one scalar per batch row into a constant array (the gradient of `take_along_axis`) is a
//!   compare and select, fused like any elementwise op;
//! - a vector only ever broadcast into arrays at least 8 times its size (a normalisation's mean and `rsqrt`,
//!   the f32 convert of a bf16 scale, a causal mask from iotas; not a scalar, not statistics of a matmul's
//!   result) is computed once by a small kernel of its own: the compiler does not duplicate it into consumers
//!   that reuse each element many times;
//! - a reduction roots a reduce fusion; its producers fuse in as above; the row max of a softmax over scores
//!   that are recomputed (below) joins the kernel consuming it, which computes max, exp and sum in one pass;
//! - a dot whose result is much larger than its operands (attention scores, a narrow first layer) is recomputed
//!   by every kernel that consumes it, unless two or more of those are matmul kernels (the next layer and its
//!   weight gradient): then it is computed once and written out;
//! - a dot or convolution roots an MXU (convolution) fusion with its producers fused in as operand prologues; when
//!   all its users are in one non-MXU kernel, it joins that kernel (the bias add, activation and convert of an
//!   output fusion); with several, it merges them when that closes no dependency cycle, else it joins only the
//!   earliest and writes its result out for the rest (attention scores and their row max in one kernel, the
//!   exp and sum that need the max in another);
//! - a dot's operand that several instructions use is computed in each dot's prologue only when that reads at
//!   most twice the operand's bytes (a bias and activation on a matmul result, a dtype conversion); otherwise (the gradient of a softmax, recomputed from several
//!   full-size tensors for two dots) it is written out once and the dots read it;
//! - a value in a tuple built in the graph (an inlined call's result) is consumed by the users of its own
//!   element only, not by those of the tuple's other elements (`reads_element`);
//! - an entry output, or a value an unmodelled op reads, is written out by the kernel that computes it;
//! - everything else (gather, scatter, sort, custom-call, while, ...) is a kernel of its own;
//! - then sibling loop and reduce kernels, neither depending on the other, that read the same large buffer over
//!   the same iteration space become one multi-output kernel reading it once (the row and column reductions of a
//!   normalisation's gradient, a residual add written out beside the reduction over it).
//!
//! Kernels run in a topological order of their dataflow chosen as a memory-minimising list scheduler would:
//! of the ready kernels, the one freeing the most buffer bytes net of its allocations (ties: program order).

use std::collections::{BTreeSet, HashMap};

use sim_core::layout::Shape;

use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;

/// What a kernel is, for costing and display.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    /// Elementwise loop fusion (and surviving copies/transposes).
    Loop,
    /// Reduce fusion.
    Reduce,
    /// Dot/convolution fusion on the MXU.
    Mxu,
    /// An op tpusim does not model, costed conservatively.
    Unmodelled,
    /// A `while` loop: its body's kernels times the trip count (set by the costing, never by grouping).
    While,
    /// A `conditional`: its most expensive branch (set by the costing, never by grouping).
    Conditional,
}

/// One kernel: the nodes it computes and the buffers it reads and writes.
#[derive(Clone, Debug)]
pub struct Group {
    /// Kind.
    pub kind: KernelKind,
    /// The node that names it (its dot, reduce, or last op).
    pub anchor: usize,
    /// Nodes computed (in topological order); a node fused into several kernels appears in each.
    pub members: Vec<usize>,
    /// Nodes whose values it reads from memory (parameters, constants, other kernels' outputs).
    pub inputs: Vec<usize>,
    /// Members whose values it writes to memory.
    pub outputs: Vec<usize>,
}

impl Group {
    /// This kernel takes over `other`'s members, the values `other` read that this one does not compute, and
    /// `other`'s outputs (a reduction or a store merged into a matmul kernel).
    pub(super) fn absorb(&mut self, other: Group) {
        let mut members: BTreeSet<usize> = self.members.iter().copied().collect();
        members.extend(other.members.iter().copied());
        for i in other.inputs {
            if !members.contains(&i) && !self.inputs.contains(&i) {
                self.inputs.push(i);
            }
        }
        for o in other.outputs {
            if !self.outputs.contains(&o) {
                self.outputs.push(o);
            }
        }
        // Node ids are a topological order.
        self.members = members.into_iter().collect();
    }
}

/// Which kernel (by index) writes each value, kept current as kernels merge.
pub(super) type Producers = HashMap<usize, usize>;

/// `groups` (in execution order) with every kernel `r` for which `target` names a kernel `m` absorbed into `m`
/// ([`Group::absorb`]), at `m`'s place in the order; `target` sees the kernel, its index, who writes each value
/// and the kernels as merged so far. Also returns the anchors of the kernels that grew.
pub(super) fn merge_groups(
    groups: Vec<Group>,
    target: impl Fn(&Group, usize, &Producers, &[Option<Group>]) -> Option<usize>,
) -> (Vec<Group>, BTreeSet<usize>) {
    let mut kernels: Vec<Option<Group>> = groups.into_iter().map(Some).collect();
    let mut producer = Producers::new();
    for (i, k) in kernels.iter().enumerate() {
        for &o in k.iter().flat_map(|k| &k.outputs) {
            producer.insert(o, i);
        }
    }
    let mut grown = BTreeSet::new();
    for r in 0..kernels.len() {
        let Some(m) = kernels[r].as_ref().and_then(|k| target(k, r, &producer, &kernels)) else {
            continue;
        };
        let Some(merged) = kernels[r].take() else { continue };
        for &o in &merged.outputs {
            producer.insert(o, m);
        }
        if let Some(into) = kernels[m].as_mut() {
            into.absorb(merged);
            grown.insert(into.anchor);
        }
    }
    (kernels.into_iter().flatten().collect(), grown)
}

fn pass_through(class: OpClass, opcode: &str) -> bool {
    // Free ops that forward a value (a tuple that is not the root forwards its operands; a reduction over unit
    // dimensions and the reshape before it, free, forward its input: `super::graph`).
    class == OpClass::Free
        && matches!(
            opcode,
            "get-tuple-element"
                | "reduce"
                | "reshape"
                | "bitcast"
                | "copy-done"
                | "copy-start"
                | "tuple"
                | "slice-start"
                | "slice-done"
                | "async-start"
                | "async-update"
                | "async-done"
        )
}

/// The operand of a tuple built in the graph (an inlined call's result) that `get-tuple-element` node `n` reads;
/// `None` for any other node, or an element of another tuple (a parameter, a loop's state).
fn built_tuple_element(g: &Graph<'_>, n: usize) -> Option<usize> {
    let node = &g.nodes[n];
    if node.ins.opcode != "get-tuple-element" {
        return None;
    }
    let t = &g.nodes[*node.operands.first()?];
    if t.ins.opcode != "tuple" {
        return None;
    }
    t.operands.get(node.ins.tuple_index()?).copied()
}

/// Whether user `w` of node `tuple`, which `from` feeds, reads `from`'s value: always, except a
/// `get-tuple-element` of a tuple built in the graph that reads another element. jax's `where` under
/// differentiation returns its selected scores and its broadcast mask in one call's tuple; the gradient reads
/// only the mask, so it does not recompute the scores (the masked product of a matmul) in its own kernels.
/// Evidence (reference sample, optimized modules): attention.b8_s1024_h12_dh64_fwdbwd_bf16 on v6e: the
/// gradient kernels of `q` and `k` (`convert_bitcast_fusion`, `.1`, 780,760 and 780,936 cycles) read the f32
/// `exp` the score kernel wrote, the bf16 `dP` and the mask, not the scores; tpusim had them recompute
/// `select(mask, scores * 0.125)` from the f32 scores its score kernel wrote out for them (805 MB written
/// instead of the compiler's 403 MB `exp`; that record 1.37 -> 1.25 of the compiler's total with the rule, the
/// corpus's causal fwd+bwd attention.029@v5e 1.99 -> 1.42, .033@v6e 1.82 -> 1.35).
fn reads_element(g: &Graph<'_>, tuple: usize, w: usize, from: usize) -> bool {
    if g.nodes[tuple].ins.opcode != "tuple" {
        return true;
    }
    built_tuple_element(g, w).is_none_or(|e| e == from)
}

struct Grouper<'a, 'm> {
    g: &'a Graph<'m>,
    groups_of: Vec<Vec<u32>>,
    kinds: Vec<KernelKind>,
    anchors: Vec<usize>,
    /// Union-find parent of each kernel (kernels merged into one fusion).
    parent: Vec<u32>,
    is_output: Vec<bool>,
    /// Dots whose result is much larger than their operands, and transcendentals cheap to recompute from memory:
    /// recomputed in each consuming kernel.
    recompute: Vec<bool>,
    /// Nodes that may make a multi-output kernel (join a sibling, or merge several consumer kernels).
    multi_output: Vec<bool>,
    /// Dots that, having lost the right to merge all their consumer kernels, may still join the earliest one.
    first_consumer: Vec<bool>,
    /// Nodes that did, for undoing joins that close a dependency cycle.
    joined: Vec<usize>,
    /// Values only ever broadcast into larger arrays: computed once by a kernel of their own.
    own_kernel: Vec<bool>,
    /// Reductions over a matmul's result.
    over_dot: Vec<bool>,
}

impl Grouper<'_, '_> {
    fn find(&self, mut k: u32) -> u32 {
        while self.parent[k as usize] != k {
            k = self.parent[k as usize];
        }
        k
    }

    /// Kernels consuming node `i` (through pass-through ops), and whether its value must be written out.
    fn user_groups(&self, i: usize) -> (BTreeSet<u32>, bool) {
        let mut set = BTreeSet::new();
        let mut out = self.is_output[i];
        // Each user with the node whose value reaches it.
        let mut stack: Vec<(usize, usize)> = self.g.users[i].iter().map(|&u| (u, i)).collect();
        let mut seen = 0usize;
        while let Some((u, from)) = stack.pop() {
            seen += 1;
            if seen > 100_000 {
                out = true;
                break;
            }
            let n = &self.g.nodes[u];
            if pass_through(n.class, &n.ins.opcode) {
                out |= self.is_output[u];
                // Only the tuple elements holding the value carry it on ([`reads_element`]).
                let on = self.g.users[u]
                    .iter()
                    .copied()
                    .filter(|&w| reads_element(self.g, u, w, from));
                stack.extend(on.map(|w| (w, u)));
                continue;
            }
            if self.groups_of[u].is_empty() {
                out = true;
            }
            for &k in &self.groups_of[u] {
                let k = self.find(k);
                // An unmodelled op reads its operands from memory, except values generated from nothing
                // (a broadcast constant, an iota: a scatter's zero initial value), which it generates itself.
                let generated = matches!(self.g.nodes[i].ins.opcode.as_str(), "broadcast" | "iota")
                    && self.g.nodes[i]
                        .operands
                        .iter()
                        .all(|&o| self.g.nodes[o].ins.opcode == "constant");
                if self.kinds[k as usize] == KernelKind::Unmodelled && !generated {
                    out = true;
                } else {
                    set.insert(k);
                }
            }
        }
        (set, out)
    }

    /// How many of kernels `ks` are MXU kernels.
    fn mxu_kernels(&self, ks: &BTreeSet<u32>) -> usize {
        ks.iter()
            .filter(|&&k| self.kinds[k as usize] == KernelKind::Mxu)
            .count()
    }

    /// The one loop kernel consuming reduction `i` to a scalar when it only finishes that scalar (its result a
    /// scalar too: a mean's divide, a convert of a sum): the compiler computes the reduction in that kernel.
    /// Evidence (compiler corpus): reduction.005 (bf16[640,11] summed in f32, converted to bf16) and
    /// reduction.017 (mean of squares) are one kernel on every chip (`reduce`; kLoop fusion of reduce and
    /// multiply), at one launch (v6e 2,163 and 2,388 cycles); a row-wise reduction's epilogue keeps a kernel of
    /// its own (norm.015: the rsqrt of f32[12] row variances, 2,122 cycles on v6e, apart from the reduce). A
    /// convert narrowing any reduction of a widened array back is its kernel too ([`super::narrow_reduce`]).
    fn epilogue_of_reduce(&self, i: usize, ug: &BTreeSet<u32>) -> Option<u32> {
        let k = self.find(*ug.iter().next()?);
        let anchor = self.anchors[k as usize];
        let scalar = |x: usize| matches!(&self.g.nodes[x].ins.shape, Shape::Array(a) if a.dims.is_empty());
        let narrowed = super::narrow_reduce::narrow_source(self.g, i, anchor).is_some();
        (matches!(self.kinds[k as usize], KernelKind::Loop | KernelKind::Reduce)
            && (scalar(i) && scalar(anchor) || narrowed))
            .then_some(k)
    }

    fn new_group(&mut self, kind: KernelKind, anchor: usize) -> u32 {
        self.kinds.push(kind);
        self.anchors.push(anchor);
        self.parent.push(self.parent.len() as u32);
        (self.kinds.len() - 1) as u32
    }

    fn run(&mut self) {
        let n = self.g.nodes.len();
        for i in (0..n).rev() {
            let node = &self.g.nodes[i];
            let class = node.class;
            if class == OpClass::Free {
                continue;
            }
            let (ug, out) = self.user_groups(i);
            // A value written out joins its earliest consumer kernel (later ones may depend on that one).
            let sibling = ug
                .iter()
                .copied()
                .filter(|&k| self.kinds[k as usize] != KernelKind::Mxu)
                .min_by_key(|&k| self.anchors[k as usize]);
            let groups: Vec<u32> = match class {
                _ if self.own_kernel[i] && !ug.is_empty() => vec![self.new_group(KernelKind::Loop, i)],
                OpClass::Elementwise | OpClass::Movement | OpClass::Relayout if !out && !ug.is_empty() => {
                    ug.into_iter().collect()
                }
                OpClass::Transcendental if !out && (ug.len() == 1 || self.recompute[i] && !ug.is_empty()) => {
                    ug.into_iter().collect()
                }
                c if c.fusible() => match sibling {
                    Some(k) if self.multi_output[i] && !ug.is_empty() => {
                        self.joined.push(i);
                        vec![k]
                    }
                    _ => vec![self.new_group(KernelKind::Loop, i)],
                },
                // The row max of a softmax over a matmul's result joins the kernel that subtracts it: the compiler
                // computes it there as a windowed reduction, in the same pass as the exp and the sum.
                OpClass::Reduce if !out && ug.len() == 1 && self.over_dot[i] => {
                    let k = ug.into_iter().next().unwrap_or(0);
                    if matches!(self.kinds[k as usize], KernelKind::Loop | KernelKind::Reduce) {
                        vec![k]
                    } else {
                        vec![self.new_group(KernelKind::Reduce, i)]
                    }
                }
                OpClass::Reduce if !out && ug.len() == 1 && self.epilogue_of_reduce(i, &ug).is_some() => {
                    let k = self.epilogue_of_reduce(i, &ug).unwrap_or(0);
                    self.kinds[k as usize] = KernelKind::Reduce;
                    vec![k]
                }
                OpClass::Reduce => vec![self.new_group(KernelKind::Reduce, i)],
                OpClass::Dot | OpClass::Convolution
                    if self.recompute[i] && !out && !ug.is_empty() && self.mxu_kernels(&ug) <= 1 =>
                {
                    for &k in &ug {
                        if self.kinds[k as usize] != KernelKind::Mxu {
                            self.kinds[k as usize] = KernelKind::Mxu;
                            self.anchors[k as usize] = i;
                        }
                    }
                    ug.into_iter().collect()
                }
                OpClass::Dot | OpClass::Convolution => {
                    // Its consumers' kernels (the reductions of a softmax over its result, say) become one fusion
                    // with it when none of them has a dot of its own.
                    let no_mxu = self.mxu_kernels(&ug) == 0;
                    let joinable = !out && !ug.is_empty() && no_mxu && (ug.len() == 1 || self.multi_output[i]);
                    let earliest = ug.iter().copied().min_by_key(|&k| self.anchors[k as usize]);
                    if joinable {
                        if ug.len() > 1 {
                            self.joined.push(i);
                        }
                        let mut it = ug.iter().copied();
                        let k = it.next().unwrap_or(0);
                        for other in it {
                            self.parent[other as usize] = k;
                        }
                        self.kinds[k as usize] = KernelKind::Mxu;
                        self.anchors[k as usize] = i;
                        vec![k]
                    } else if let Some(k) = earliest.filter(|_| no_mxu && ug.len() > 1 && self.first_consumer[i]) {
                        // Its earliest consumer kernel (the max of a softmax, which the others depend on) takes it
                        // as a multi-output kernel; the result is written out for the rest.
                        self.joined.push(i);
                        self.kinds[k as usize] = KernelKind::Mxu;
                        self.anchors[k as usize] = i;
                        vec![k]
                    } else {
                        vec![self.new_group(KernelKind::Mxu, i)]
                    }
                }
                _ => vec![self.new_group(KernelKind::Unmodelled, i)],
            };
            self.groups_of[i] = groups;
        }
    }
}

/// A dot whose result has more than this many times its operands' bytes (attention scores: contracting over a
/// head dimension of 64 expands the inputs 32-fold and more) is recomputed in each consuming kernel, as the
/// compiler does, rather than written out and read back.
const RECOMPUTE_RATIO: u64 = 8;

/// A value broadcast into arrays at least this many times its size is reused by every consumer element.
const BROADCAST_REUSE: u64 = 8;

/// Values under this many elements (scalars: a step count, a loss scale) are recomputed wherever they are used.
/// Any vector, however short, gets its own kernel: the compiler computes a norm's mean and `rsqrt` over 12 rows
/// in kernels of their own (norm.015, f32 [12,1664], on all five chips: `multiply` 2,122 and `rsqrt` 2,123 cycles
/// on v5p; norm.014, 74 rows, and norm.019, 108 rows, the same), which tpusim had fused into their consumers
/// below 128 elements (norm held-out signed median -0.21 before, -0.03 after).
const MIN_OWN_ELEMENTS: u64 = 2;

/// Whether a node is a reduction whose input is computed (through fused ops) from a matmul's result (one of
/// the matmuls `which` accepts).
fn reduces_dot(g: &Graph<'_>, i: usize, which: &dyn Fn(usize) -> bool) -> bool {
    let dot = |x: usize| matches!(g.nodes[x].class, OpClass::Dot | OpClass::Convolution) && which(x);
    g.nodes[i].class == OpClass::Reduce
        && g.nodes[i]
            .operands
            .first()
            .is_some_and(|&o| dot(o) || cone_leaves(g, o).into_iter().any(dot))
}

/// Whether a computed vector is only ever broadcast (through reshapes) into much larger arrays: a normalisation's
/// mean and `rsqrt` over its row statistics, the f32 convert of a bf16 scale, a causal mask from iotas. The
/// compiler does not duplicate such a producer into a consumer that reuses each of its elements many times; it
/// computes it once in a small kernel of its own.
fn broadcast_only(g: &Graph<'_>, i: usize) -> bool {
    let n = super::bytes::elements(&g.nodes[i].ins.shape);
    if n < MIN_OWN_ELEMENTS || !matches!(g.nodes[i].class, OpClass::Elementwise | OpClass::Transcendental) {
        return false;
    }
    let mut stack = g.users[i].clone();
    let mut any = false;
    let mut seen = 0;
    while let Some(u) = stack.pop() {
        seen += 1;
        let node = &g.nodes[u];
        match node.ins.opcode.as_str() {
            _ if seen > 64 => return false,
            "broadcast" if super::bytes::elements(&node.ins.shape) >= BROADCAST_REUSE.saturating_mul(n) => any = true,
            // A broadcast that only adds unit dimensions forwards the value, as a reshape does.
            "broadcast" if super::bytes::elements(&node.ins.shape) == n => stack.extend(g.users[u].iter().copied()),
            "reshape" | "bitcast" => stack.extend(g.users[u].iter().copied()),
            _ => return false,
        }
    }
    // Checked last (walking the producers costs more): statistics of a matmul's result (a softmax's row max
    // over attention scores) stay in the matmul's kernel, which computes them in the same pass.
    let dot = |x: usize| matches!(g.nodes[x].class, OpClass::Dot | OpClass::Convolution);
    // A cone too deep to walk (a long chain of fused layers) is taken to reach one.
    let stats_of_dot = |x: usize| {
        g.nodes[x].class == OpClass::Reduce
            && g.nodes[x].operands.first().is_some_and(|&o| {
                let (l, t) = cone_leaves_bounded(g, o);
                t || dot(o) || l.into_iter().any(dot)
            })
    };
    let (leaves, truncated) = cone_leaves_bounded(g, i);
    any && !truncated && !leaves.into_iter().any(|x| dot(x) || stats_of_dot(x))
}

/// Regroupings tried when multi-output kernels close a dependency cycle.
const MAX_REGROUPS: usize = 32;

/// Nodes at most this many fused producers deep are examined when deciding whether a dot's operand fuses.
const MAX_CONE: usize = 256;

/// The values a node's fused producer cone reads from memory (its leaves), at most `MAX_CONE` nodes deep.
fn cone_leaves(g: &Graph<'_>, o: usize) -> Vec<usize> {
    cone_leaves_bounded(g, o).0
}

/// Like [`cone_leaves`], and whether the walk stopped at `MAX_CONE` (deeper leaves are then unknown).
fn cone_leaves_bounded(g: &Graph<'_>, o: usize) -> (Vec<usize>, bool) {
    let mut seen = BTreeSet::new();
    let mut stack = vec![o];
    let mut leaves = Vec::new();
    let mut visited = 0;
    let mut truncated = false;
    while let Some(x) = stack.pop() {
        if !seen.insert(x) {
            continue;
        }
        visited += 1;
        let n = &g.nodes[x];
        let inner = n.class.fusible() || (n.class == OpClass::Free && pass_through(n.class, &n.ins.opcode));
        truncated |= visited > MAX_CONE;
        if x != o && !inner || visited > MAX_CONE {
            leaves.push(x);
            continue;
        }
        stack.extend(n.operands.iter().copied());
    }
    (leaves, truncated)
}

/// HBM bytes of the values an operand's fused producer cone reads (its leaves).
fn cone_input_bytes(g: &Graph<'_>, o: usize, bytes: &dyn Fn(usize) -> u64) -> u64 {
    cone_leaves(g, o)
        .into_iter()
        .fold(0u64, |a, x| a.saturating_add(bytes(x)))
}

/// Whether a transcendental is recomputed by each kernel consuming it rather than written out once: when it is
/// elementwise over an array already in memory (a parameter or an unfused op's result with as many elements;
/// not only over statistics, reductions' results, which the compiler computes once in a small kernel of their
/// own, like a normalisation's `rsqrt`), nothing it is computed from is a dot (whose result would have to be
/// recomputed too) unless it is an activation of matmul results alone ([`activation_of_matmul`]), and
/// re-reading its inputs costs at most what writing it out and reading it back does: the softmax's
/// `exp(logits - max)`, read again from the logits by both the sum and the gradient.
fn recompute_transcendental(g: &Graph<'_>, i: usize, bytes: &dyn Fn(usize) -> u64) -> bool {
    let leaves = cone_leaves(g, i);
    let n = super::bytes::elements(&g.nodes[i].ins.shape);
    let dot = |x: usize| matches!(g.nodes[x].class, OpClass::Dot | OpClass::Convolution);
    let full_array =
        |x: usize| g.nodes[x].class != OpClass::Reduce && super::bytes::elements(&g.nodes[x].ins.shape) >= n;
    (!leaves.iter().any(|&x| dot(x)) || activation_of_matmul(g, &leaves))
        && leaves.iter().any(|&x| full_array(x))
        && cone_input_bytes(g, i, bytes) <= 2u64.saturating_mul(bytes(i))
}

/// Whether a transcendental whose fused producers read `leaves` is an activation of matmul results (a GELU's
/// `tanh` of `x W + b`): a dot is among them, none is a reduction's result or a batched dot's (attention
/// scores, their scaling and softmax keep their kernels: [`super::passes`], [`super::rowstats`]).
/// The matmul's kernel writes its result out for the backward pass anyway, so each consumer (the next layer's
/// matmul, the activation's gradient, the next weight gradient) recomputes the activation from it.
///
/// Evidence (compiler corpus, optimized modules): no mlp, transformer_block or moe_routing record on any chip
/// has a loop fusion computing `tanh` (0 of 52 mlp, 55 transformer_block and 8 moe_routing records with a
/// GELU), where tpusim had one per hidden layer (45 mlp, 39 transformer_block, 40 moe_routing records).
/// mlp.019@v6e (fit, bf16, batch 53, four GELU layers, fwd+bwd): the GELU of each layer is a nested fusion
/// inside the consumer kernels (`fused_computation.31.clone.1`, `.45.clone.1`, `.29.clone.1.clone.clone`, each
/// with its `tanh`), the 12 compiler kernels 24,286 cycles; tpusim had three `tanh` loop kernels of 2,136-2,162
/// cycles (at the loop launch) besides its matmul kernels. mlp.027@v5e (fit, f32, batch 16,096): tpusim's
/// `tanh.1` loop kernel re-read and rewrote f32[16096,640] (69,074 cycles); the compiler has none.
fn activation_of_matmul(g: &Graph<'_>, leaves: &[usize]) -> bool {
    let batched = |x: usize| g.nodes[x].ins.int_list("lhs_batch_dims").is_some_and(|b| !b.is_empty());
    leaves.iter().any(|&x| g.nodes[x].class == OpClass::Dot)
        && !leaves.iter().any(|&x| match g.nodes[x].class {
            OpClass::Reduce | OpClass::Convolution => true,
            OpClass::Dot => batched(x),
            _ => false,
        })
}

/// Groups the graph's nodes into kernels, in execution order; `bytes` gives a node's padded result bytes.
pub fn group(g: &Graph<'_>, bytes: &dyn Fn(usize) -> u64) -> Result<Vec<Group>, HloError> {
    let mut is_output = vec![false; g.nodes.len()];
    for o in g.outputs() {
        is_output[o] = true;
    }
    let mut recompute = vec![false; g.nodes.len()];
    let own_kernel: Vec<bool> = (0..g.nodes.len()).map(|i| broadcast_only(g, i)).collect();
    for (i, n) in g.nodes.iter().enumerate() {
        if own_kernel[i] {
            is_output[i] = true;
        }
        if n.class == OpClass::Transcendental {
            recompute[i] = recompute_transcendental(g, i, bytes);
            continue;
        }
        if !matches!(n.class, OpClass::Dot | OpClass::Convolution) {
            continue;
        }
        let operand_bytes: u64 = n.operands.iter().map(|&o| bytes(o)).sum();
        recompute[i] = bytes(i) > RECOMPUTE_RATIO * operand_bytes.max(1);
        for &o in &n.operands {
            let shared = g.users[o].len() > 1;
            if shared && g.nodes[o].class.fusible() && cone_input_bytes(g, o, bytes) > 2 * bytes(o) {
                is_output[o] = true;
            }
        }
    }
    // Only over scores recomputed by their consumers: a dot whose result is written out keeps its max.
    let over_dot: Vec<bool> = (0..g.nodes.len())
        .map(|i| reduces_dot(g, i, &|d| recompute[d]))
        .collect();
    // Multi-output kernels can make kernels depend on each other circularly; the nodes whose joins formed the
    // kernels left in a cycle lose the right to join and the grouping runs again (at most `MAX_REGROUPS` times,
    // then without multi-output kernels at all, where every edge follows program order).
    let mut multi_output = vec![true; g.nodes.len()];
    let mut first_consumer = vec![true; g.nodes.len()];
    for attempt in 0..=MAX_REGROUPS {
        if attempt == MAX_REGROUPS {
            multi_output.fill(false);
            first_consumer.fill(false);
        }
        let mut gr = Grouper {
            g,
            groups_of: vec![Vec::new(); g.nodes.len()],
            kinds: Vec::new(),
            anchors: Vec::new(),
            parent: Vec::new(),
            is_output: is_output.clone(),
            recompute: recompute.clone(),
            multi_output: multi_output.clone(),
            first_consumer: first_consumer.clone(),
            joined: Vec::new(),
            own_kernel: own_kernel.clone(),
            over_dot: over_dot.clone(),
        };
        gr.run();
        let joined = std::mem::take(&mut gr.joined);
        match assemble(g, &mut gr, bytes) {
            Ok(groups) => {
                return Ok(groups);
            }
            Err(cyclic) => {
                // The join made last (the most producer-side node, as nodes are grouped consumers first).
                match joined
                    .iter()
                    .copied()
                    .filter(|i| cyclic.contains(i) && (multi_output[*i] || first_consumer[*i]))
                    .min()
                {
                    // A dot steps down from all its consumers to the earliest one, then to none.
                    Some(i) if multi_output[i] => multi_output[i] = false,
                    Some(i) => first_consumer[i] = false,
                    None => {
                        multi_output.fill(false);
                        first_consumer.fill(false);
                    }
                }
            }
        }
    }
    // Without multi-output kernels every edge between kernels follows program order, so this is not reached.
    Err(HloError::Unsupported("kernels depend on each other circularly".into()))
}

/// Resolves merged kernels and renumbers the surviving ones densely.
fn renumber(gr: &mut Grouper<'_, '_>) {
    let roots: Vec<u32> = (0..gr.kinds.len() as u32).map(|k| gr.find(k)).collect();
    let mut dense = vec![u32::MAX; roots.len()];
    let mut kinds = Vec::new();
    let mut anchors = Vec::new();
    for (k, &r) in roots.iter().enumerate() {
        if r as usize == k {
            dense[k] = kinds.len() as u32;
            kinds.push(gr.kinds[k]);
            anchors.push(gr.anchors[k]);
        }
    }
    for gs in gr.groups_of.iter_mut() {
        for x in gs.iter_mut() {
            *x = dense[roots[*x as usize] as usize];
        }
        gs.sort_unstable();
        gs.dedup();
    }
    gr.kinds = kinds;
    gr.anchors = anchors;
    gr.parent = (0..gr.kinds.len() as u32).collect();
}

/// The members of the kernels that could not be ordered (`order` holds those that could).
fn cycle_members(order: &[usize], succ: &[Vec<usize>], members: &[Vec<usize>]) -> BTreeSet<usize> {
    // The unordered kernels are those on a cycle and those after one; peeling off, repeatedly, the ones no
    // unordered kernel depends on leaves the cycles (and what lies between them).
    let mut left: BTreeSet<usize> = (0..succ.len()).collect();
    for x in order {
        left.remove(x);
    }
    loop {
        let sinks: Vec<usize> = left
            .iter()
            .copied()
            .filter(|&x| !succ[x].iter().any(|s| left.contains(s)))
            .collect();
        if sinks.is_empty() {
            break;
        }
        for x in sinks {
            left.remove(&x);
        }
    }
    left.into_iter().flat_map(|x| members[x].iter().copied()).collect()
}

/// Members, inputs and outputs of each kernel, ordered topologically; if kernels depend on each other
/// circularly, the members of the kernels that could not be ordered.
fn assemble(
    g: &Graph<'_>,
    gr: &mut Grouper<'_, '_>,
    bytes: &dyn Fn(usize) -> u64,
) -> Result<Vec<Group>, BTreeSet<usize>> {
    renumber(gr);
    let k = gr.kinds.len();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (i, gs) in gr.groups_of.iter().enumerate() {
        for &x in gs {
            members[x as usize].push(i);
        }
    }
    // The node holding the value a (possibly pass-through) operand forwards.
    let source = |mut o: usize| {
        let mut hops = 0;
        while hops < 1000 {
            let n = &g.nodes[o];
            if n.ins.opcode == "get-tuple-element" {
                // An element of a tuple built in the graph is that operand; of any other tuple (a parameter,
                // a loop's state), a buffer of its own.
                let from = n.operands.first().map(|&t| &g.nodes[t]);
                match (from, n.ins.tuple_index()) {
                    (Some(t), Some(i)) if t.ins.opcode == "tuple" && i < t.operands.len() => {
                        o = t.operands[i];
                        hops += 1;
                        continue;
                    }
                    _ => break,
                }
            }
            if n.ins.opcode != "tuple"
                && pass_through(n.class, &n.ins.opcode)
                && n.operands.len() == 1
                && (!gr.groups_of[n.operands[0]].is_empty() || g.nodes[n.operands[0]].class == OpClass::Free)
            {
                o = n.operands[0];
                hops += 1;
                continue;
            }
            break;
        }
        o
    };
    let mut inputs: Vec<Vec<usize>> = vec![Vec::new(); k];
    let mut preds: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); k];
    for (gi, ms) in members.iter().enumerate() {
        let mut seen = BTreeSet::new();
        for &m in ms {
            for &o in &g.nodes[m].operands {
                let src = source(o);
                if gr.groups_of[src].contains(&(gi as u32)) {
                    continue;
                }
                if seen.insert(src) {
                    inputs[gi].push(src);
                }
                for &p in &gr.groups_of[src] {
                    preds[gi].insert(p as usize);
                }
            }
        }
    }
    let mut outputs: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (gi, ms) in members.iter().enumerate() {
        for &m in ms {
            let (ug, out) = gr.user_groups(m);
            if out || ug.iter().any(|&u| !gr.groups_of[m].contains(&u)) {
                outputs[gi].push(m);
            }
        }
    }
    merge_siblings(g, gr, &mut members, &mut inputs, &mut outputs, &mut preds, bytes);
    let k = gr.kinds.len();
    // A list schedule as the compiler's memory-minimising scheduler makes: of the kernels whose inputs are
    // ready, run the one that frees the most buffer bytes net of what it allocates; ties in program order.
    let mut indeg: Vec<usize> = preds.iter().map(|p| p.len()).collect();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (gi, p) in preds.iter().enumerate() {
        for &x in p {
            succ[x].push(gi);
        }
    }
    let entry_outputs: BTreeSet<usize> = g.outputs().into_iter().collect();
    // Kernels still to read each buffer.
    let mut readers: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for ins in &inputs {
        for &i in ins {
            *readers.entry(i).or_insert(0) += 1;
        }
    }
    let net = |x: usize, readers: &std::collections::HashMap<usize, usize>| -> i128 {
        let alloc: u64 = outputs[x]
            .iter()
            .filter(|o| !entry_outputs.contains(o))
            .map(|&o| bytes(o))
            .sum();
        let freed: u64 = inputs[x]
            .iter()
            .filter(|i| readers.get(i) == Some(&1) && !entry_outputs.contains(i) && g.nodes[**i].param.is_none())
            .map(|&i| bytes(i))
            .sum();
        alloc as i128 - freed as i128
    };
    let mut ready: Vec<usize> = (0..k).filter(|&x| indeg[x] == 0).collect();
    let mut order = Vec::with_capacity(k);
    while !ready.is_empty() {
        let (pos, _) = ready
            .iter()
            .enumerate()
            .min_by_key(|(_, &x)| (net(x, &readers), gr.anchors[x]))
            .unwrap_or((0, &0));
        let x = ready.swap_remove(pos);
        order.push(x);
        for i in &inputs[x] {
            if let Some(r) = readers.get_mut(i) {
                *r = r.saturating_sub(1);
            }
        }
        for &s in &succ[x] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                ready.push(s);
            }
        }
    }
    if order.len() < k {
        return Err(cycle_members(&order, &succ, &members));
    }
    Ok(order
        .into_iter()
        .map(|x| Group {
            kind: gr.kinds[x],
            anchor: gr.anchors[x],
            members: std::mem::take(&mut members[x]),
            inputs: std::mem::take(&mut inputs[x]),
            outputs: std::mem::take(&mut outputs[x]),
        })
        .collect())
}

/// The iteration space of a loop or reduce kernel: the most elements any member walks (a reduction walks its
/// operand, anything else its result).
fn iteration_elements(g: &Graph<'_>, members: &[usize]) -> u64 {
    members
        .iter()
        .map(|&m| {
            let n = &g.nodes[m];
            match (n.class, n.operands.first()) {
                (OpClass::Reduce, Some(&o)) => super::bytes::elements(&g.nodes[o].ins.shape),
                _ => super::bytes::elements(&n.ins.shape),
            }
        })
        .max()
        .unwrap_or(0)
}

/// Merges sibling loop/reduce kernels into multi-output kernels, as XLA's multi-output fusion does: two kernels
/// that read the same buffer, where that buffer is the largest input of each, that walk the same number of
/// elements, and where neither depends (transitively) on the other. Merged kernels keep the smaller index;
/// the others are left empty and dropped by the caller's renumbering.
fn merge_siblings(
    g: &Graph<'_>,
    gr: &mut Grouper<'_, '_>,
    members: &mut Vec<Vec<usize>>,
    inputs: &mut Vec<Vec<usize>>,
    outputs: &mut Vec<Vec<usize>>,
    preds: &mut Vec<BTreeSet<usize>>,
    bytes: &dyn Fn(usize) -> u64,
) {
    let k = members.len();
    let eligible = |x: usize, kinds: &[KernelKind]| matches!(kinds[x], KernelKind::Loop | KernelKind::Reduce);
    if (0..k).filter(|&x| eligible(x, &gr.kinds)).count() < 2 {
        return;
    }
    // Descendants of each kernel as bitsets (the kernel graph is acyclic here; otherwise merge nothing).
    let words = k.div_ceil(64);
    let Some(mut reach) = descendants(preds, words) else {
        return;
    };
    let reaches = |reach: &[u64], a: usize, b: usize| reach[a * words + b / 64] >> (b % 64) & 1 == 1;
    let largest_input = |ins: &[usize]| ins.iter().map(|&i| bytes(i)).max().unwrap_or(0);
    // Kernels reading each buffer, in kernel order.
    let mut readers: std::collections::BTreeMap<usize, Vec<usize>> = std::collections::BTreeMap::new();
    for (x, ins) in inputs.iter().enumerate() {
        if eligible(x, &gr.kinds) {
            for &i in ins {
                readers.entry(i).or_default().push(x);
            }
        }
    }
    let mut alive = vec![true; k];
    let iter: Vec<u64> = members.iter().map(|m| iteration_elements(g, m)).collect();
    for (buffer, ks) in readers {
        let b = bytes(buffer);
        if b < 4096 || ks.len() < 2 {
            continue;
        }
        for ai in 0..ks.len() {
            let a = ks[ai];
            if !alive[a] || largest_input(&inputs[a]) > b {
                continue;
            }
            for &c in &ks[ai + 1..] {
                if !alive[c] || iter[a] != iter[c] || largest_input(&inputs[c]) > b {
                    continue;
                }
                if reaches(&reach, a, c) || reaches(&reach, c, a) {
                    continue;
                }
                // Merge c into a.
                alive[c] = false;
                let mut m = std::mem::take(&mut members[c]);
                members[a].append(&mut m);
                members[a].sort_unstable();
                members[a].dedup();
                let moved = std::mem::take(&mut inputs[c]);
                for i in moved {
                    if !inputs[a].contains(&i) {
                        inputs[a].push(i);
                    }
                }
                let moved = std::mem::take(&mut outputs[c]);
                for o in moved {
                    if !outputs[a].contains(&o) {
                        outputs[a].push(o);
                    }
                }
                outputs[a].sort_unstable();
                let moved = std::mem::take(&mut preds[c]);
                preds[a].extend(moved);
                if gr.kinds[c] == KernelKind::Reduce {
                    gr.kinds[a] = KernelKind::Reduce;
                }
                // Whatever reached a or c now reaches a and all both reach.
                let mut both = vec![0u64; words];
                for (w, v) in both.iter_mut().enumerate() {
                    *v = reach[a * words + w] | reach[c * words + w];
                }
                for x in 0..k {
                    if x == a || reaches(&reach, x, a) || reaches(&reach, x, c) {
                        for (w, v) in both.iter().enumerate() {
                            reach[x * words + w] |= v;
                        }
                        if x != a {
                            reach[x * words + a / 64] |= 1 << (a % 64);
                        }
                    }
                }
                // Kernels that waited on c wait on a.
                for p in preds.iter_mut() {
                    if p.remove(&c) {
                        p.insert(a);
                    }
                }
            }
        }
    }
    if alive.iter().all(|&a| a) {
        return;
    }
    drop_merged(gr, members, inputs, outputs, preds, &alive);
}

/// Drops the kernels merged away (`alive` false) and renumbers the rest, their predecessors included.
fn drop_merged(
    gr: &mut Grouper<'_, '_>,
    members: &mut Vec<Vec<usize>>,
    inputs: &mut Vec<Vec<usize>>,
    outputs: &mut Vec<Vec<usize>>,
    preds: &mut Vec<BTreeSet<usize>>,
    alive: &[bool],
) {
    let k = alive.len();
    // Drop the merged-away kernels and renumber.
    let mut dense = vec![usize::MAX; k];
    let mut n = 0;
    for x in 0..k {
        if alive[x] {
            dense[x] = n;
            n += 1;
        }
    }
    retain_alive(members, alive);
    retain_alive(inputs, alive);
    retain_alive(outputs, alive);
    retain_alive(preds, alive);
    for p in preds.iter_mut() {
        *p = p.iter().map(|&x| dense[x]).filter(|&x| x != usize::MAX).collect();
    }
    for (x, p) in preds.iter_mut().enumerate() {
        p.remove(&x);
    }
    retain_alive(&mut gr.kinds, alive);
    retain_alive(&mut gr.anchors, alive);
    gr.parent = (0..gr.kinds.len() as u32).collect();
}

/// Each kernel's descendants as a bitset of `words` words per kernel, or `None` when `preds` has a cycle.
fn descendants(preds: &[BTreeSet<usize>], words: usize) -> Option<Vec<u64>> {
    let k = preds.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); k];
    let mut indeg: Vec<usize> = preds.iter().map(|p| p.len()).collect();
    for (x, p) in preds.iter().enumerate() {
        for &y in p {
            succ[y].push(x);
        }
    }
    let mut topo: Vec<usize> = (0..k).filter(|&x| indeg[x] == 0).collect();
    let mut at = 0;
    while at < topo.len() {
        let x = topo[at];
        at += 1;
        for &s in &succ[x] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                topo.push(s);
            }
        }
    }
    if topo.len() < k {
        return None;
    }
    let mut reach = vec![0u64; k * words];
    for &x in topo.iter().rev() {
        for &s in &succ[x] {
            reach[x * words + s / 64] |= 1 << (s % 64);
            for w in 0..words {
                let v = reach[s * words + w];
                reach[x * words + w] |= v;
            }
        }
    }
    Some(reach)
}

/// Keeps the elements whose flag in `alive` is set.
fn retain_alive<T>(v: &mut Vec<T>, alive: &[bool]) {
    let mut i = 0;
    v.retain(|_| {
        i += 1;
        alive[i - 1]
    });
}
