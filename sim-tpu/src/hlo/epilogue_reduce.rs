//! A reduction over a matmul's epilogue is computed by the matmul's kernel, as one more output.
//!
//! The compiler's output (kOutput) fusions are multi-output: a reduction reading the matmul's result, or
//! elementwise ops of it, in one pass (a loss `sum(y * y)`, a bias gradient summing `dY` over the batch rows,
//! a softmax's row max) is computed on the result tiles while they are in registers, and only its small result
//! is written. tpusim's grouping gives such a reduction a reduce kernel of its own whenever the matmul's result
//! also feeds other matmuls (the backward pass), which then re-reads the whole result.
//!
//! Evidence (compiler corpus, optimized modules): mlp.032 on v5e (f32, batch 4,608, widths 256-128-4864,
//! fwd+bwd): the compiler's `fusion` (57,136 cycles) computes layer 2's matmul, its bias add, the loss's sum of
//! squares and the bias gradient's sum over rows, outputs `(f32[4864], f32[], f32[4608,4864])`; tpusim had a
//! reduce kernel of 214,588 cycles re-reading the f32[4608,4864] result beside its 47,136-cycle matmul. mlp.013
//! on v6e: `(f32[58], f32[], f32[29824,58])` in one kOutput fusion of 6,530 cycles, tpusim's separate reduce
//! 11,682. Over the whole corpus, 1,825 of 5,462 kOutput fusions contain a reduce (mlp 275 of 857, dcn_cross
//! 145 of 602, resnet_block 341 of 689, transformer_block 488 of 1,477).
//!
//! Only matmul (dot) kernels take them. A convolution's fused statistics cost the compiler about what a separate
//! pass does (conv.017 on v4, a depthwise convolution with its loss: 156,606 cycles for the fused kernel, against
//! tpusim's 73,520 for the convolution and 101,930 for its reduce kernel), so a reduce kernel stands for them.
//!
//! A reduction reading the results of several matmul kernels joins the latest of them: the earlier ones' results
//! are written before it runs, operands like any other. Evidence (dcn_cross.016 on tpu7x, a fit record, f32
//! [17408,102], three cross layers `x * (h W + b) + h` trained on a sum of squares): the compiler's `fusion.8`
//! computes the third layer's matmul, the loss, its gradient and the bias gradient, outputs `(f32[102], f32[],
//! f32[102], f32[17408,102])` in 9,992 cycles, reading the second layer's output `h`; tpusim kept a reduce kernel
//! of 9,874 cycles re-reading the result beside the 9,236-cycle matmul, and another of 13,868 after the next
//! matmul (dcn_cross family on all chips: median 18.9% to 16.6%, p90 64.8% to 50.9%, before refitting).
//!
//! Not merged: a reduction needing another reduction of the same kernel first (a softmax's sum of
//! `exp(x - max)`: a second pass, its own kernel in the compiler's modules too), or one reading the results of a
//! kernel that runs after the matmul's.

use std::collections::BTreeSet;

use super::fusion::{merge_groups, Group, KernelKind, Producers};
use super::graph::Graph;
use super::ops::OpClass;

/// `groups` (in execution order) with every reduce kernel that reads exactly one MXU kernel's results in one pass
/// merged into that MXU kernel, at the MXU kernel's place in the order.
pub(super) fn merge_into_mxu(g: &Graph<'_>, groups: Vec<Group>) -> Vec<Group> {
    let (mut merged, grown) = merge_groups(groups, |k, at, producer, kernels| target(g, k, at, producer, kernels));
    drop_internal_outputs(g, &mut merged, &grown);
    merged
}

/// The MXU kernel reduce kernel `k` (at `at`) joins, if any: `k` only reduces and does elementwise work, it joins
/// the latest matmul kernel before it writing values it reads, those values do not depend on a reduction of that
/// kernel, and every other value it reads is written before the MXU kernel runs.
fn target(g: &Graph<'_>, k: &Group, at: usize, producer: &Producers, kernels: &[Option<Group>]) -> Option<usize> {
    let plain = |m: &usize| {
        let c = g.nodes[*m].class;
        c.fusible() || c == OpClass::Reduce || c == OpClass::Free
    };
    if k.kind != KernelKind::Reduce || !k.members.iter().all(plain) {
        return None;
    }
    let mxu_of = |p: usize| kernels[p].as_ref().is_some_and(|x| x.kind == KernelKind::Mxu);
    let mut mxu: Option<usize> = None;
    for &i in &k.inputs {
        match producer.get(&i) {
            Some(&p) if p < at && mxu_of(p) => match mxu {
                Some(m) if m > p => {}
                _ => mxu = Some(p),
            },
            _ => {}
        }
    }
    let m = mxu?;
    let mk = kernels[m].as_ref()?;
    if g.nodes[mk.anchor].class != OpClass::Dot {
        return None;
    }
    let members: BTreeSet<usize> = mk.members.iter().copied().collect();
    for &i in &k.inputs {
        match producer.get(&i) {
            Some(&p) if p == m && after_reduction(g, i, &members) => return None,
            Some(&p) if p > m => return None,
            _ => {}
        }
    }
    Some(m)
}

/// Whether value `v`, computed in a kernel of `members`, depends on a reduction computed in that kernel.
fn after_reduction(g: &Graph<'_>, v: usize, members: &BTreeSet<usize>) -> bool {
    let mut stack = vec![v];
    let mut seen = BTreeSet::new();
    while let Some(x) = stack.pop() {
        if !seen.insert(x) || !members.contains(&x) {
            continue;
        }
        if g.nodes[x].class == OpClass::Reduce {
            return true;
        }
        stack.extend(g.nodes[x].operands.iter().copied());
    }
    false
}

/// Outputs of the kernels that took reductions (anchored at `grown`) that no remaining kernel reads and the entry
/// does not return are no longer written out (a matmul result only the merged reduction read).
fn drop_internal_outputs(g: &Graph<'_>, kernels: &mut [Group], grown: &BTreeSet<usize>) {
    let entry: BTreeSet<usize> = g.outputs().into_iter().collect();
    let read: BTreeSet<usize> = kernels.iter().flat_map(|k| k.inputs.iter().copied()).collect();
    for k in kernels.iter_mut() {
        if !grown.contains(&k.anchor) {
            continue;
        }
        let members: BTreeSet<usize> = k.members.iter().copied().collect();
        k.inputs.retain(|i| !members.contains(i));
        k.outputs
            .retain(|o| entry.contains(o) || read.contains(o) || escapes(g, *o, &members));
    }
}

/// Whether value `o` reaches something outside `members` through pass-through ops only (a tuple or bitcast the
/// entry returns, a while loop's operand): kept written out, as the grouping decided.
fn escapes(g: &Graph<'_>, o: usize, members: &BTreeSet<usize>) -> bool {
    g.users[o]
        .iter()
        .any(|&u| !members.contains(&u) && g.nodes[u].class == OpClass::Free)
}
