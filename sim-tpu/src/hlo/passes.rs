//! A matmul kernel makes one pass over its result: what needs a reduction of that result first (a log-softmax's
//! `logits - max`, then `exp` and its sum, then `- log(sum)`) runs in later kernels, one per pass, reading the
//! result back.
//!
//! The grouping joins every consumer kernel of a matmul into one multi-output fusion when no dependency cycle
//! forbids it, so a softmax over a matmul's logits became one kernel making one pass. The compiler's output
//! fusion computes the matmul and the reductions reading its result in one pass only; each further pass is a loop
//! fusion of its own streaming the (written) result again.
//!
//! Evidence (compiler corpus, optimized modules): softmax_xent.018 on v4 (bf16 logits [151,4480]): the kOutput
//! fusion computes the dot and its row max (14,052 cycles), a loop fusion `exp(logits - max)` and its sum (11,548),
//! another `logits - max - log(sum)` (17,453); tpusim's one kernel took 14,394 for all of it. softmax_xent.012 on
//! v6e (f32 logits [512,33557]): 24,704, 184,473 and 183,967 cycles, against tpusim's one kernel of 130,894.
//!
//! Only dot kernels are split: a convolution's batch-norm statistics are the convolution rules' (conv.017 in
//! [`super::epilogue_reduce`]). A matmul recomputed by its consumers (attention scores, [`super::fusion`]'s `RECOMPUTE_RATIO`) is left whole:
//! the compiler computes max, exp and sum of those in one pass (attention.017 on v5e). A matmul large against
//! its operands that only one kernel computes is not recomputed, and is split like any other: softmax_xent.014
//! on v5e (f32 logits [8320,8897], 8.4 times its operands' bytes, one consumer kernel) is, in the compiler's
//! module, the dot with the row max (1,019,991 cycles), `exp` and its sum (1,351,438), the subtraction
//! (1,350,963); tpusim's one kernel cost 1,553,568 for all of it (0.42 of the compiler's total, 0.90 after).

use std::collections::{BTreeMap, BTreeSet};

use super::fusion::{Group, KernelKind};
use super::graph::Graph;
use super::ops::OpClass;

/// A matmul whose result has more than this many times its operands' bytes is recomputed by its consumers (the
/// grouping's rule, [`super::fusion`]): its kernel is not split.
const RECOMPUTE_RATIO: u64 = 8;

/// `groups` (in execution order) with every matmul kernel split into its passes; `bytes` gives a node's padded
/// result bytes.
pub(super) fn split_passes(g: &Graph<'_>, groups: Vec<Group>, bytes: &dyn Fn(usize) -> u64) -> Vec<Group> {
    // How many kernels compute each node: a recomputed dot is a member of several.
    let mut computed_by: BTreeMap<usize, usize> = BTreeMap::new();
    for k in &groups {
        for &m in &k.members {
            *computed_by.entry(m).or_insert(0) += 1;
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for k in groups {
        if k.kind != KernelKind::Mxu
            || g.nodes[k.anchor].class != OpClass::Dot
            || recomputed(g, &k, bytes, &computed_by)
            || super::rowstats::one_pass(g, &k)
        {
            out.push(k);
            continue;
        }
        out.extend(split(g, k));
    }
    out
}

/// Whether a dot or convolution of kernel `k` is one the grouping recomputes in each consumer: large against
/// its operands and either computed by another kernel too (`computed_by`: kernels per node) or with rows whole in
/// one window ([`super::rowstats::rows_in_one_window`]: attention's scores up to 8,192 long, b4_s2048 attention
/// in the reference sample). A large dot with longer rows that only one kernel computes (logits over a
/// vocabulary of 8,897 and 36,736: softmax_xent.014, .006) is written out once like any other.
fn recomputed(g: &Graph<'_>, k: &Group, bytes: &dyn Fn(usize) -> u64, computed_by: &BTreeMap<usize, usize>) -> bool {
    k.members.iter().any(|&m| {
        let n = &g.nodes[m];
        matches!(n.class, OpClass::Dot | OpClass::Convolution)
            && (computed_by.get(&m).is_some_and(|&c| c > 1) || super::rowstats::rows_in_one_window(g, m))
            && {
                let operands: u64 = n.operands.iter().map(|&o| bytes(o)).sum();
                bytes(m) > RECOMPUTE_RATIO.saturating_mul(operands.max(1))
            }
    })
}

/// The pass of each member: its in-kernel operands' latest pass, one more for an operand that is a reduction (it
/// must be complete before its value is used again), but for a scalar computed from a scalar reduction (mlp.003 on
/// v6e: the loss's `/ N` after its sum has no estimate of its own).
fn passes_of(g: &Graph<'_>, k: &Group) -> BTreeMap<usize, usize> {
    let members: BTreeSet<usize> = k.members.iter().copied().collect();
    let mut pass: BTreeMap<usize, usize> = BTreeMap::new();
    // Members are in a topological order (node ids).
    for &m in &k.members {
        let mut p = 0;
        for &o in &g.nodes[m].operands {
            let Some(&po) = pass.get(&o).filter(|_| members.contains(&o)) else {
                continue;
            };
            // A scalar (a loss) finished into another scalar is the compiler's free scalar epilogue: no pass.
            let after = g.nodes[o].class == OpClass::Reduce && !(is_scalar(g, o) && is_scalar(g, m));
            p = p.max(po + usize::from(after));
        }
        pass.insert(m, p);
    }
    pass
}

fn is_scalar(g: &Graph<'_>, n: usize) -> bool {
    matches!(&g.nodes[n].ins.shape, sim_core::layout::Shape::Array(a) if a.dims.is_empty())
}

/// Kernel `k` as one kernel per pass, in pass order; `k` itself when it makes one pass.
fn split(g: &Graph<'_>, k: Group) -> Vec<Group> {
    let pass = passes_of(g, &k);
    let last = pass.values().copied().max().unwrap_or(0);
    // A matmul after a reduction of the kernel (none the grouping makes) is left as grouped.
    let late_dot = pass
        .iter()
        .any(|(&m, &p)| p > 0 && matches!(g.nodes[m].class, OpClass::Dot | OpClass::Convolution));
    if last == 0 || late_dot {
        return vec![k];
    }
    // Members of each pass; cheap values of an earlier pass a later one reads are recomputed there, values that
    // end a pass (reductions, matmuls) are read from memory.
    let mut sets: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); last + 1];
    for (&m, &p) in &pass {
        sets[p].insert(m);
    }
    let stored = |x: usize| matches!(g.nodes[x].class, OpClass::Reduce | OpClass::Dot | OpClass::Convolution);
    let mut reads: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); last + 1];
    for p in 1..=last {
        let mut stack: Vec<usize> = sets[p].iter().copied().collect();
        while let Some(x) = stack.pop() {
            for &o in &g.nodes[x].operands {
                match pass.get(&o) {
                    Some(&po) if po < p && stored(o) => {
                        reads[p].insert(o);
                    }
                    Some(&po) if po < p && sets[p].insert(o) => stack.push(o),
                    _ => {}
                }
            }
        }
    }
    let read_later: BTreeSet<usize> = reads.iter().flatten().copied().collect();
    let mut out = Vec::with_capacity(last + 1);
    for (p, set) in sets.into_iter().enumerate() {
        if set.is_empty() {
            continue;
        }
        let members: Vec<usize> = set.iter().copied().collect();
        let mut inputs: Vec<usize> = k.inputs.iter().copied().filter(|&i| reaches(g, i, &set)).collect();
        inputs.extend(reads[p].iter().copied());
        let outputs: Vec<usize> = members
            .iter()
            .copied()
            .filter(|m| pass.get(m) == Some(&p) && (k.outputs.contains(m) || read_later.contains(m)))
            .collect();
        let has = |c: OpClass| members.iter().any(|&m| g.nodes[m].class == c);
        let (kind, anchor) = if p == 0 {
            (k.kind, k.anchor)
        } else {
            let kind = if has(OpClass::Reduce) {
                KernelKind::Reduce
            } else {
                KernelKind::Loop
            };
            let anchor = members
                .iter()
                .rev()
                .copied()
                .find(|&m| g.nodes[m].class == OpClass::Reduce)
                .or_else(|| outputs.last().copied())
                .unwrap_or(members[members.len() - 1]);
            (kind, anchor)
        };
        out.push(Group {
            kind,
            anchor,
            members,
            inputs,
            outputs,
        });
    }
    out
}

/// Whether value `i` is read by a node of `set`, directly or through pass-through ops outside it.
fn reaches(g: &Graph<'_>, i: usize, set: &BTreeSet<usize>) -> bool {
    let mut stack = vec![i];
    let mut seen = BTreeSet::new();
    while let Some(x) = stack.pop() {
        if !seen.insert(x) {
            continue;
        }
        for &u in &g.users[x] {
            if set.contains(&u) {
                return true;
            }
            if g.nodes[u].class == OpClass::Free {
                stack.push(u);
            }
        }
    }
    false
}
