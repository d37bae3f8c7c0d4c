//! The event loop: dense task arrays, an event heap ordered by (time, sequence), unit queues and
//! max-min fair bandwidth sharing recomputed at every transfer start and finish.
//!
//! Performance notes (the engine bench wants >= 20 M events/s): the graph (task records, successor
//! lists) is built once per engine and copied per run; starting a task prefetches its first
//! successor, whose pending count is written when it finishes; every task is a 16-byte [`Dense`]
//! record prepared when the task is added (occupy durations are converted to picoseconds then, so
//! the loop never divides); heap entries carry their payload (no side table that grows per
//! event); successor lists are one compressed array; bandwidth checks that a reshare made stale
//! are recognised by sequence number; nothing is allocated per event.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::heap::EventHeap;

mod repeat;

pub use repeat::FastForward;

use slotmap::Key;

use super::{Demand, Engine, EngineError, QueuePolicy, Resource, ResourceId, TaskId};
use crate::recorder::{ArgValue, Recorder, Span};
use crate::time::SimTime;

/// Scale of transfer progress: remaining work is kept in byte-picoseconds-per-second units
/// (bytes x 10^12) so that rate (bytes/s) x elapsed (ps) is exact integer progress.
const PS_PER_S: u128 = 1_000_000_000_000;

/// Statistics of one resource over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceStats {
    /// Time the resource was in use (units: summed over servers; bandwidth: time with any transfer).
    pub busy_ps: u64,
    /// Bytes moved (bandwidth resources).
    pub bytes: u64,
    /// Tasks served.
    pub tasks: u64,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunResult {
    task_count: usize,
    nodes: Vec<Node>,
    /// When the last task finished.
    pub makespan: SimTime,
    /// Per resource, in creation order.
    pub resource_stats: Vec<ResourceStats>,
    /// Spans and counters (empty when recording was off).
    pub recorder: Recorder,
    /// Events taken from the event heap (task finishes, zero-time completions, bandwidth checks).
    pub events: u64,
    /// Periods of a repeating graph filled in by shifting instead of simulated
    /// ([`Engine::run_repeating`]); everything else is as the full simulation gives it.
    pub fast_forward: Option<FastForward>,
}

impl RunResult {
    /// Start time of a task.
    pub fn start(&self, t: TaskId) -> Option<SimTime> {
        dense_index(self.task_count, t).map(|i| SimTime(self.nodes[i as usize].start))
    }
    /// End time of a task.
    pub fn end(&self, t: TaskId) -> Option<SimTime> {
        dense_index(self.task_count, t).map(|i| SimTime(self.nodes[i as usize].amount_or_end))
    }
    /// Busy time of a resource (units: summed over servers; bandwidth: time with any transfer).
    pub fn busy(&self, r: ResourceId) -> Option<SimTime> {
        self.resource_stats.get(r.0 as usize).map(|s| SimTime(s.busy_ps))
    }
    /// Busy fraction of a resource over the makespan (units: per server), 0 for an empty run.
    pub fn utilization(&self, engine: &Engine, r: ResourceId) -> Option<f64> {
        let busy = self.resource_stats.get(r.0 as usize)?.busy_ps as f64;
        let servers = match engine.resources.get(r.0 as usize)? {
            Resource::Unit { servers, .. } => *servers as f64,
            Resource::Bandwidth { .. } => 1.0,
        };
        let span = self.makespan.0 as f64 * servers;
        Some(if span > 0.0 { busy / span } else { 0.0 })
    }
}

/// Dense position of a task: tasks are never removed, so a slot map key's slot index is its
/// insertion position plus one (slot 0 is the map's sentinel).
pub(crate) fn dense_index(task_count: usize, id: TaskId) -> Option<u32> {
    if id.is_null() {
        return None;
    }
    let slot = (id.data().as_ffi() & 0xFFFF_FFFF) as usize;
    let i = slot.checked_sub(1)?;
    (i < task_count).then_some(i as u32)
}

/// Kinds of [`Dense`] records (top two bits of `kind_res`).
const K_OCCUPY: u32 = 0;
const K_TRANSFER: u32 = 1;
const K_DELAY: u32 = 2;
const K_WAIT: u32 = 3;
const RES_MASK: u32 = (1 << 30) - 1;
/// `extra` of a transfer without a rate cap.
const NO_CAP: u32 = u32::MAX;

/// A task's demand in 16 bytes, so the event loop never touches the slot map.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dense {
    /// Occupy and delay: duration in ps. Transfer: bytes.
    amount: u64,
    /// Kind (top 2 bits) and resource index (low 30 bits).
    kind_res: u32,
    /// Occupy: priority. Transfer: index into `Engine::caps`, or `NO_CAP`.
    extra: u32,
}

impl Dense {
    /// A barrier (also stands in for a task whose resource was bad; the run reports the error).
    pub(crate) const WAIT: Dense = Dense {
        amount: 0,
        kind_res: K_WAIT << 30,
        extra: 0,
    };

    /// The dense form of `task` against the engine's resources, or what is wrong with it.
    pub(crate) fn of(task: &super::Task, engine: &mut Engine) -> Result<Dense, EngineError> {
        let bad = |resource: ResourceId, problem| EngineError::BadResource {
            task: task.name.clone(),
            resource: resource.0,
            problem,
        };
        let res_bits = |r: ResourceId| -> Result<u32, EngineError> {
            if r.0 > RES_MASK {
                Err(bad(r, "does not exist"))
            } else {
                Ok(r.0)
            }
        };
        Ok(match task.demand {
            Demand::Occupy { unit, cycles } => {
                let dur = match engine.resources.get(unit.0 as usize) {
                    None => return Err(bad(unit, "does not exist")),
                    Some(Resource::Bandwidth { .. }) => return Err(bad(unit, "is a bandwidth resource, not a unit")),
                    Some(Resource::Unit { clock, .. }) => clock.cycles_to_time(cycles).0,
                };
                Dense {
                    amount: dur,
                    kind_res: (K_OCCUPY << 30) | res_bits(unit)?,
                    extra: task.priority as u32,
                }
            }
            Demand::Transfer {
                resource,
                bytes,
                cap_bytes_per_s,
            } => {
                match engine.resources.get(resource.0 as usize) {
                    None => return Err(bad(resource, "does not exist")),
                    Some(Resource::Unit { .. }) => return Err(bad(resource, "is a unit, not a bandwidth resource")),
                    Some(Resource::Bandwidth { .. }) => {}
                }
                let extra = match cap_bytes_per_s {
                    Some(c) => {
                        engine.caps.push(c.max(1));
                        (engine.caps.len() - 1) as u32
                    }
                    None => NO_CAP,
                };
                Dense {
                    amount: bytes,
                    kind_res: (K_TRANSFER << 30) | res_bits(resource)?,
                    extra,
                }
            }
            Demand::Delay(d) => Dense {
                amount: d.0,
                kind_res: K_DELAY << 30,
                extra: 0,
            },
            Demand::Wait => Dense::WAIT,
        })
    }
}

/// Replaces task `i`'s dense record (its cap slot reused) and, when the run-ready graph is built,
/// its node: dependencies, and so pending counts and successors, are unchanged.
pub(crate) fn replace(engine: &mut Engine, i: usize, task: &super::Task) {
    let old = engine.dense[i];
    let old_cap = (old.kind_res >> 30 == K_TRANSFER && old.extra != NO_CAP).then_some(old.extra);
    let mut d = match Dense::of(task, engine) {
        Ok(d) => d,
        Err(e) => {
            engine.first_error.get_or_insert(e);
            Dense::WAIT
        }
    };
    if let (Some(slot), true) = (old_cap, d.kind_res >> 30 == K_TRANSFER && d.extra != NO_CAP) {
        // The new cap went to the end of `caps`: move it into the old slot.
        if let Some(c) = engine.caps.pop() {
            engine.caps[slot as usize] = c;
            d.extra = slot;
        }
    }
    engine.dense[i] = d;
    if let Some(t) = engine.template.get_mut() {
        t.nodes[i].amount_or_end = d.amount;
        t.nodes[i].kind_res = d.kind_res;
    }
}

/// Heap payload (`what`): a task index for a finish, or `BW_FLAG | resource` for a bandwidth
/// check (valid only if its sequence number is the resource's latest).
const BW_FLAG: u32 = 1 << 31;

/// One transfer in flight.
struct Active {
    task: u32,
    /// Remaining bytes x 10^12.
    remaining: u128,
    /// Current rate, bytes per second.
    rate: u64,
    /// Rate cap, bytes per second.
    cap: u64,
}

enum Queue {
    Fifo(VecDeque<u32>),
    Priority(BinaryHeap<(i32, Reverse<u64>, u32)>),
}

enum State {
    Unit {
        free: u32,
        queue: Queue,
    },
    Bandwidth {
        total: u64,
        /// In flight, kept sorted by (cap, task) for water-filling.
        active: Vec<Active>,
        /// Time progress was last applied.
        last: u64,
        /// Sequence number of the one valid pending check event.
        check_seq: u64,
    },
}

/// Run-time record of one task: everything the loop touches for it in one aligned 32-byte
/// block (a cache line holds two), so a chain of tasks costs one memory stream, not six.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Node {
    /// Until the task finishes: its duration in ps (occupy, delay) or bytes (transfer). Then: its
    /// end time in ps.
    amount_or_end: u64,
    /// Start time in ps.
    start: u64,
    /// Kind and resource, as in [`Dense`].
    kind_res: u32,
    /// Unfinished dependencies; `DONE` once the task has finished (when watching for a repeated
    /// state; 0 otherwise).
    pending: u32,
    /// First successor, or `NONE`.
    first_succ: u32,
    /// Index of the other successors' range in `Sim::more`, or `NONE`.
    more: u32,
}

const NONE: u32 = u32::MAX;

/// `Node::pending` of a finished task.
const DONE: u32 = u32::MAX;

/// A cache prefetch hint (no effect on results; a no-op where the architecture has none).
#[inline(always)]
fn prefetch_write<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; it never faults and reads no memory the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The simulation of one run. `WATCH`: watching for a repeated state (the bookkeeping it needs
/// is compiled out of plain runs).
struct Sim<'a, const WATCH: bool> {
    engine: &'a Engine,
    nodes: Vec<Node>,
    /// Ranges (start, end) into `more_succ` for tasks with more than one successor.
    more: &'a [(u32, u32)],
    more_succ: &'a [u32],
    states: Vec<State>,
    stats: Vec<ResourceStats>,
    heap: EventHeap,
    seq: u64,
    ready_seq: u64,
    now: u64,
    events: u64,
    done: usize,
    finished: Vec<u32>,
    recorder: Recorder,
    /// Largest task index readied or released so far: tasks above it still have their initial
    /// pending counts.
    hi: u32,
    /// Watching a repeating graph for a repeated state ([`Engine::run_repeating`]).
    watch: Option<Box<repeat::Watch>>,
    /// The periods skipped, once a repeated state was found.
    fast_forward: Option<FastForward>,
}

/// The run-ready graph: initial task records (pending counts, first successor) and the other
/// successors in compressed ranges. It depends only on tasks and dependencies, so every run of an
/// engine shares one (copying it is a straight memcpy; building it is a random-access pass).
pub(crate) struct Template {
    nodes: Vec<Node>,
    more: Vec<(u32, u32)>,
    more_succ: Vec<u32>,
}

fn template(engine: &Engine) -> Template {
    let mut nodes: Vec<Node> = engine
        .dense
        .iter()
        .map(|d| Node {
            amount_or_end: d.amount,
            start: 0,
            kind_res: d.kind_res,
            pending: 0,
            first_succ: NONE,
            more: NONE,
        })
        .collect();
    // Successors in the order the dependencies were added: the first inline in the node, the
    // rest in compressed ranges (only tasks with fan-out have one).
    let mut extras: Vec<(u32, u32)> = Vec::new();
    for &(a, b) in &engine.deps {
        nodes[b as usize].pending += 1;
        let na = &mut nodes[a as usize];
        if na.first_succ == NONE {
            na.first_succ = b;
        } else {
            extras.push((a, b));
        }
    }
    let mut more: Vec<(u32, u32)> = Vec::new();
    for &(a, _) in &extras {
        let na = &mut nodes[a as usize];
        if na.more == NONE {
            na.more = more.len() as u32;
            more.push((0, 0));
        }
        more[na.more as usize].1 += 1;
    }
    let mut total = 0u32;
    for r in more.iter_mut() {
        let count = r.1;
        *r = (total, total);
        total += count;
    }
    let mut more_succ = vec![0u32; extras.len()];
    for &(a, b) in &extras {
        let r = &mut more[nodes[a as usize].more as usize];
        more_succ[r.1 as usize] = b;
        r.1 += 1;
    }
    Template { nodes, more, more_succ }
}

pub(super) fn run(engine: &Engine) -> Result<RunResult, EngineError> {
    simulate::<false>(engine, None)
}

/// [`Engine::run_repeating`]: a run that skips periods once the state repeats (see `repeat`).
pub(super) fn run_repeating(engine: &Engine, anchor: TaskId, again: TaskId) -> Result<RunResult, EngineError> {
    let n = engine.ids.len();
    let index = |id| dense_index(n, id).filter(|&i| engine.ids[i as usize] == id);
    match (index(anchor), index(again)) {
        (Some(a), Some(b)) if b > a => match repeat::Watch::new(engine, a, b - a) {
            Some(w) => simulate::<true>(engine, Some(w)),
            None => simulate::<false>(engine, None),
        },
        _ => simulate::<false>(engine, None),
    }
}

fn simulate<const WATCH: bool>(engine: &Engine, watch: Option<Box<repeat::Watch>>) -> Result<RunResult, EngineError> {
    if let Some(e) = &engine.first_error {
        return Err(e.clone());
    }
    let n = engine.ids.len();
    let t = engine.template.get_or_init(|| template(engine));
    let nodes = t.nodes.clone();
    let (more, more_succ) = (&t.more[..], &t.more_succ[..]);
    let states = engine
        .resources
        .iter()
        .map(|r| match r {
            Resource::Unit { servers, policy, .. } => State::Unit {
                free: *servers,
                queue: match policy {
                    QueuePolicy::Fifo => Queue::Fifo(VecDeque::new()),
                    QueuePolicy::Priority => Queue::Priority(BinaryHeap::new()),
                },
            },
            Resource::Bandwidth { bytes_per_s, .. } => State::Bandwidth {
                total: *bytes_per_s,
                active: Vec::new(),
                last: 0,
                check_seq: u64::MAX,
            },
        })
        .collect();
    let mut sim = Sim::<WATCH> {
        engine,
        nodes,
        more,
        more_succ,
        states,
        stats: vec![ResourceStats::default(); engine.resources.len()],
        heap: EventHeap::with_capacity(1024),
        seq: 0,
        ready_seq: 0,
        now: 0,
        events: 0,
        done: 0,
        finished: Vec::new(),
        recorder: engine.new_recorder(),
        hi: 0,
        watch,
        fast_forward: None,
    };
    for i in 0..n {
        if sim.nodes[i].pending == 0 {
            sim.hi = i as u32;
            sim.ready(i as u32);
        }
    }
    while let Some(ev) = sim.heap.pop() {
        sim.events += 1;
        sim.now = ev.time();
        if ev.what & BW_FLAG != 0 {
            sim.bandwidth_check((ev.what & !BW_FLAG) as usize, ev.seq());
        } else {
            sim.finish(ev.what);
        }
        if WATCH {
            if let Some(w) = &sim.watch {
                if sim.nodes[w.next_anchor()].pending == DONE {
                    sim.at_anchor();
                }
            }
        }
    }
    if sim.done != n {
        let stuck = n - sim.done;
        let example = (0..n)
            .find(|&i| sim.nodes[i].pending > 0 && sim.nodes[i].pending != DONE)
            .map(|i| engine.tasks[engine.ids[i]].name.clone());
        return Err(EngineError::Cycle {
            stuck,
            example: example.unwrap_or_default(),
        });
    }
    let makespan = sim.nodes.iter().map(|x| x.amount_or_end).max().unwrap_or(0);
    Ok(RunResult {
        task_count: n,
        nodes: sim.nodes,
        makespan: SimTime(makespan),
        resource_stats: sim.stats,
        recorder: sim.recorder,
        events: sim.events,
        fast_forward: sim.fast_forward,
    })
}

impl<const WATCH: bool> Sim<'_, WATCH> {
    #[inline]
    fn push(&mut self, time: u64, what: u32) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        self.heap.push(time, seq, what);
        seq
    }

    #[inline]
    fn ready(&mut self, t: u32) {
        let now = self.now;
        let node = &mut self.nodes[t as usize];
        let (kind, r, amount) = (
            node.kind_res >> 30,
            (node.kind_res & RES_MASK) as usize,
            node.amount_or_end,
        );
        if kind == K_OCCUPY {
            let State::Unit { free, queue } = &mut self.states[r] else {
                unreachable!("checked when the task was added")
            };
            if *free > 0 {
                *free -= 1;
                self.start_occupy(t, r, amount);
            } else {
                self.ready_seq += 1;
                match queue {
                    Queue::Fifo(q) => q.push_back(t),
                    Queue::Priority(h) => {
                        let priority = self.engine.dense[t as usize].extra as i32;
                        h.push((priority, Reverse(self.ready_seq), t))
                    }
                }
            }
            return;
        }
        node.start = now;
        match kind {
            K_TRANSFER => {
                self.stats[r].tasks += 1;
                if amount == 0 {
                    self.push(now, t);
                    return;
                }
                let extra = self.engine.dense[t as usize].extra;
                let cap = if extra == NO_CAP {
                    u64::MAX
                } else {
                    self.engine.caps[extra as usize]
                };
                self.prefetch_successor(t);
                self.advance(r);
                self.stats[r].bytes += amount;
                let State::Bandwidth { active, .. } = &mut self.states[r] else {
                    unreachable!("checked when the task was added")
                };
                let pos = active.partition_point(|a| (a.cap, a.task) < (cap, t));
                active.insert(
                    pos,
                    Active {
                        task: t,
                        remaining: amount as u128 * PS_PER_S,
                        rate: 0,
                        cap,
                    },
                );
                self.reshare(r);
            }
            K_DELAY => {
                self.prefetch_successor(t);
                self.push(now.saturating_add(amount), t);
            }
            _ => {
                self.push(now, t);
            }
        }
    }

    /// Asks the CPU to bring task `t`'s first successor into cache: its pending count is written
    /// when `t` finishes, many events from now, and in a wide graph that line is cold by then.
    #[inline(always)]
    fn prefetch_successor(&self, t: u32) {
        let s = self.nodes[t as usize].first_succ;
        if s != NONE {
            prefetch_write(&self.nodes[s as usize]);
        }
    }

    #[inline]
    fn start_occupy(&mut self, t: u32, unit: usize, dur: u64) {
        self.prefetch_successor(t);
        self.nodes[t as usize].start = self.now;
        let s = &mut self.stats[unit];
        s.busy_ps += dur;
        s.tasks += 1;
        self.push(self.now.saturating_add(dur), t);
    }

    /// Moves every active transfer of bandwidth resource `r` forward to now.
    fn advance(&mut self, r: usize) {
        let now = self.now;
        let State::Bandwidth { active, last, .. } = &mut self.states[r] else {
            unreachable!()
        };
        let dt = now - *last;
        if dt > 0 && !active.is_empty() {
            self.stats[r].busy_ps += dt;
            for a in active.iter_mut() {
                a.remaining = a.remaining.saturating_sub(a.rate as u128 * dt as u128);
            }
        }
        *last = now;
    }

    /// Recomputes max-min fair rates (water-filling under per-transfer caps; integer rates, the
    /// remainder of an uneven split going to the highest-capped transfers) and schedules the
    /// next finish.
    fn reshare(&mut self, r: usize) {
        let now = self.now;
        let State::Bandwidth { total, active, .. } = &mut self.states[r] else {
            unreachable!()
        };
        let mut left = *total;
        let mut n = active.len() as u64;
        let mut next = u64::MAX;
        for a in active.iter_mut() {
            a.rate = a.cap.min(left / n);
            left -= a.rate;
            n -= 1;
            if a.rate > 0 {
                next = next.min(a.remaining.div_ceil(a.rate as u128).min(u64::MAX as u128) as u64);
            }
        }
        let used = *total - left;
        let check = if next == u64::MAX {
            u64::MAX
        } else {
            self.push(now.saturating_add(next), BW_FLAG | r as u32)
        };
        let State::Bandwidth { check_seq, .. } = &mut self.states[r] else {
            unreachable!()
        };
        *check_seq = check;
        if self.engine.record {
            let track = self.engine.resources[r].track();
            self.recorder.counter(
                &track.process,
                format!("{} GB/s", track.thread),
                SimTime(now),
                used as f64 / 1e9,
            );
        }
    }

    fn bandwidth_check(&mut self, r: usize, seq: u64) {
        let State::Bandwidth { check_seq, .. } = &self.states[r] else {
            unreachable!()
        };
        if *check_seq != seq {
            return;
        }
        self.advance(r);
        let State::Bandwidth { active, .. } = &mut self.states[r] else {
            unreachable!()
        };
        let mut finished = std::mem::take(&mut self.finished);
        finished.clear();
        active.retain(|a| {
            if a.remaining == 0 {
                finished.push(a.task);
                false
            } else {
                true
            }
        });
        // Transfers finishing at one instant complete in task insertion order.
        finished.sort_unstable();
        self.reshare(r);
        for &t in &finished {
            self.finish(t);
        }
        self.finished = finished;
    }

    #[inline]
    fn finish(&mut self, t: u32) {
        let now = self.now;
        let node = &mut self.nodes[t as usize];
        node.amount_or_end = now;
        let (kind_res, first, more) = (node.kind_res, node.first_succ, node.more);
        self.done += 1;
        if WATCH {
            node.pending = DONE;
            if let Some(w) = &mut self.watch {
                w.log.push(t);
            }
        }
        if kind_res >> 30 == K_OCCUPY {
            let u = (kind_res & RES_MASK) as usize;
            let State::Unit { free, queue } = &mut self.states[u] else {
                unreachable!()
            };
            let next = match queue {
                Queue::Fifo(q) => q.pop_front(),
                Queue::Priority(h) => h.pop().map(|x| x.2),
            };
            match next {
                Some(nt) => {
                    let dur = self.nodes[nt as usize].amount_or_end;
                    self.start_occupy(nt, u, dur);
                }
                None => *free += 1,
            }
        }
        if self.engine.record {
            self.record_span(t as usize);
        }
        if first != NONE {
            self.release(first);
            if more != NONE {
                let (a, b) = self.more[more as usize];
                for k in a..b {
                    let s = self.more_succ[k as usize];
                    self.release(s);
                }
            }
        }
    }

    /// One dependency of `s` has finished.
    #[inline]
    fn release(&mut self, s: u32) {
        if WATCH {
            self.hi = self.hi.max(s);
        }
        let p = &mut self.nodes[s as usize].pending;
        *p -= 1;
        if *p == 0 {
            self.ready(s);
        }
    }

    fn record_span(&mut self, ti: usize) {
        let task = &self.engine.tasks[self.engine.ids[ti]];
        let track = match (&task.track, &task.demand) {
            (Some(t), _) => t.clone(),
            (None, Demand::Occupy { unit: r, .. }) | (None, Demand::Transfer { resource: r, .. }) => {
                self.engine.resources[r.0 as usize].track().clone()
            }
            _ => return,
        };
        let mut args = task.args.clone();
        match task.demand {
            Demand::Occupy { cycles, .. } if !args.iter().any(|(k, _)| k == "cycles") => {
                args.push(("cycles".into(), ArgValue::Int(cycles as i64)));
            }
            Demand::Transfer { bytes, .. } if !args.iter().any(|(k, _)| k == "bytes") => {
                args.push(("bytes".into(), ArgValue::Int(bytes as i64)));
            }
            _ => {}
        }
        let node = &self.nodes[ti];
        self.recorder.span(Span {
            track,
            name: task.name.clone(),
            category: task.category.clone(),
            start: SimTime(node.start),
            end: SimTime(node.amount_or_end),
            args,
            tag: task.tag,
        });
    }
}
