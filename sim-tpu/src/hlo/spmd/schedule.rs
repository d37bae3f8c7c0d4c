//! The step's schedule: the TensorCore runs kernels one at a time, the earliest in program order among those
//! whose inputs are ready; the ICI runs collectives one at a time, each as soon as its operands are ready. A
//! kernel reading a collective's result waits for it; nothing else does (the latency-hiding scheduler's
//! overlap, as far as dependencies allow). The `-done` half of an async pair is where the wait is: it takes
//! no TensorCore time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::super::collective::CollectiveKind;
use super::super::cost::ModuleCost;
use super::super::graph::Graph;
use super::CollectiveCost;

/// What the schedule gives.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// TensorCore cycles of non-collective kernels.
    pub compute_cycles: u64,
    /// When the last kernel or collective ends.
    pub step_cycles: u64,
    /// Kernels that stand for collectives (and their `-done` halves).
    pub collective_kernels: Vec<usize>,
    /// Each kernel's start cycle in the step.
    pub kernel_starts: Vec<u64>,
}

/// One unit of work: a kernel of the module cost.
struct Item {
    /// Collective node it carries, if any.
    collective: Option<usize>,
    /// TensorCore cycles (0 for collectives and `-done`s).
    cycles: u64,
    /// A collective or the `-done` of one.
    on_ici: bool,
    preds: BTreeSet<usize>,
}

/// Kernels each node's value comes from (walking through free nodes: parameters, tuples, bitcasts).
fn producers(g: &Graph<'_>, owner: &[Option<usize>]) -> Vec<BTreeSet<usize>> {
    let mut out: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); g.nodes.len()];
    // Node ids are topological, so one forward pass sees every operand first.
    for i in 0..g.nodes.len() {
        if let Some(k) = owner[i] {
            out[i].insert(k);
            continue;
        }
        let mut s = BTreeSet::new();
        for &o in &g.nodes[i].operands {
            s.extend(out[o].iter().copied());
        }
        out[i] = s;
    }
    out
}

fn items(g: &Graph<'_>, cost: &ModuleCost, collectives: &BTreeMap<usize, CollectiveCost>) -> Vec<Item> {
    let mut owner = vec![None; g.nodes.len()];
    for (k, kc) in cost.kernels.iter().enumerate() {
        for &n in &kc.nodes {
            // A fused op recomputed by several kernels is first available from the earliest.
            if let Some(o @ None) = owner.get_mut(n) {
                *o = Some(k);
            }
        }
    }
    let prod = producers(g, &owner);
    cost.kernels
        .iter()
        .enumerate()
        .map(|(k, kc)| {
            let collective = kc.nodes.iter().copied().find(|n| collectives.contains_key(n));
            let done = kc
                .nodes
                .iter()
                .any(|&n| CollectiveKind::is_done(&g.nodes[n].ins.opcode));
            let mut preds = BTreeSet::new();
            for &n in &kc.nodes {
                for &o in &g.nodes[n].operands {
                    // Operands computed inside this kernel are not waited for.
                    if !kc.nodes.contains(&o) {
                        preds.extend(prod[o].iter().copied().filter(|&p| p != k));
                    }
                }
            }
            Item {
                collective,
                on_ici: collective.is_some() || done,
                cycles: if collective.is_some() || done { 0 } else { kc.cycles },
                preds,
            }
        })
        .collect()
}

/// The schedule's moving parts.
struct State<'a> {
    items: &'a [Item],
    succs: Vec<Vec<usize>>,
    waiting: Vec<usize>,
    ready_at: Vec<u64>,
    end: Vec<u64>,
    /// (ready time, index) of TensorCore items whose inputs are all produced.
    pending: BinaryHeap<Reverse<(u64, usize)>>,
    /// When the ICI is next free.
    ici: u64,
}

impl State<'_> {
    /// Runs collective item `k` on the ICI once its inputs are ready at `ready`; returns its end.
    fn run_collective(&mut self, k: usize, ready: u64, collectives: &mut BTreeMap<usize, CollectiveCost>) -> u64 {
        let node = self.items[k].collective.unwrap_or(usize::MAX);
        let Some(c) = collectives.get_mut(&node) else {
            return ready;
        };
        c.start_cycle = ready.max(self.ici);
        c.end_cycle = c.start_cycle + c.cycles;
        self.ici = c.end_cycle;
        c.end_cycle
    }

    /// Item `k` ends at `t`: successors whose inputs are all produced become ready (collectives run at once).
    fn release(&mut self, k: usize, t: u64, collectives: &mut BTreeMap<usize, CollectiveCost>) {
        let mut stack = vec![(k, t)];
        while let Some((k, t)) = stack.pop() {
            self.end[k] = t;
            for i in 0..self.succs[k].len() {
                let s = self.succs[k][i];
                self.ready_at[s] = self.ready_at[s].max(t);
                self.waiting[s] -= 1;
                if self.waiting[s] == 0 {
                    if self.items[s].collective.is_some() {
                        let e = self.run_collective(s, self.ready_at[s], collectives);
                        stack.push((s, e));
                    } else {
                        self.pending.push(Reverse((self.ready_at[s], s)));
                    }
                }
            }
        }
    }
}

/// Schedules the kernels of `cost` and the collectives (by node), filling each collective's start and end.
pub fn run(g: &Graph<'_>, cost: &ModuleCost, collectives: &mut BTreeMap<usize, CollectiveCost>) -> Plan {
    let items = items(g, cost, collectives);
    let n = items.len();
    let mut st = State {
        items: &items,
        succs: vec![Vec::new(); n],
        waiting: items.iter().map(|it| it.preds.len()).collect(),
        ready_at: vec![0; n],
        end: vec![0; n],
        pending: BinaryHeap::new(),
        ici: 0,
    };
    for (k, it) in items.iter().enumerate() {
        for &p in &it.preds {
            st.succs[p].push(k);
        }
    }
    // Items without inputs, taken before any release (a release makes more items ready).
    let roots: Vec<usize> = (0..n).filter(|&k| st.waiting[k] == 0).collect();
    for k in roots {
        {
            if items[k].collective.is_some() {
                let e = st.run_collective(k, 0, collectives);
                st.release(k, e, collectives);
            } else {
                st.pending.push(Reverse((0, k)));
            }
        }
    }
    let (mut tc, mut compute) = (0u64, 0u64);
    let mut starts = vec![0u64; n];
    let mut ready_now: BTreeSet<usize> = BTreeSet::new();
    loop {
        while let Some(&Reverse((t, k))) = st.pending.peek() {
            if t > tc && !ready_now.is_empty() {
                break;
            }
            st.pending.pop();
            tc = tc.max(t);
            ready_now.insert(k);
        }
        let Some(k) = ready_now.pop_first() else { break };
        starts[k] = tc;
        tc += items[k].cycles;
        compute += items[k].cycles;
        st.release(k, tc, collectives);
    }
    // Items never released (a dependency the kernel order does not respect) run last, in program order,
    // so every kernel and collective is counted.
    for k in 0..n {
        if st.waiting[k] > 0 {
            st.waiting[k] = 0;
            if items[k].collective.is_some() {
                let e = st.run_collective(k, tc, collectives);
                st.end[k] = e;
            } else {
                starts[k] = tc;
                tc += items[k].cycles;
                compute += items[k].cycles;
                st.end[k] = tc;
            }
        }
    }
    let collective_kernels = (0..n).filter(|&k| items[k].on_ici).collect();
    let step = st.end.iter().copied().max().unwrap_or(0).max(tc);
    Plan {
        compute_cycles: compute,
        step_cycles: step,
        collective_kernels,
        kernel_starts: starts,
    }
}
