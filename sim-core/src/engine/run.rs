//! The event loop: dense task arrays, an event heap ordered by (time, sequence), unit queues and
//! max-min fair bandwidth sharing recomputed at every transfer start and finish.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use slotmap::Key;

use super::{Demand, Engine, EngineError, QueuePolicy, Resource, TaskId};
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
    ids: Vec<TaskId>,
    start: Vec<u64>,
    end: Vec<u64>,
    /// When the last task finished.
    pub makespan: SimTime,
    /// Per resource, in creation order.
    pub resource_stats: Vec<ResourceStats>,
    /// Spans and counters (empty when recording was off).
    pub recorder: Recorder,
    /// Events taken from the event heap.
    pub events: u64,
}

impl RunResult {
    /// Start time of a task.
    pub fn start(&self, t: TaskId) -> Option<SimTime> {
        dense_index(&self.ids, t).map(|i| SimTime(self.start[i as usize]))
    }
    /// End time of a task.
    pub fn end(&self, t: TaskId) -> Option<SimTime> {
        dense_index(&self.ids, t).map(|i| SimTime(self.end[i as usize]))
    }
}

/// Dense position of a task: tasks are never removed, so a slot map key's slot index is its
/// insertion position plus one (slot 0 is the map's sentinel). Checked against the id list.
pub(crate) fn dense_index(ids: &[TaskId], id: TaskId) -> Option<u32> {
    let slot = (id.data().as_ffi() & 0xFFFF_FFFF) as usize;
    let i = slot.checked_sub(1)?;
    (ids.get(i) == Some(&id)).then_some(i as u32)
}

/// An event in the heap: ordered by (time, sequence). What it is lives in `Sim::payload[seq]`, so
/// the heap moves 16-byte keys.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    time: u64,
    seq: u64,
}

/// What an event does: a task index for a finish, or `BW_FLAG | resource` with the epoch of a
/// bandwidth check (stale checks are skipped).
#[derive(Clone, Copy)]
struct Payload {
    what: u64,
    epoch: u64,
}

const BW_FLAG: u64 = 1 << 63;

struct Active {
    task: u32,
    remaining: u128,
    rate: u64,
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
        clock_hz: u64,
    },
    Bandwidth {
        total: u64,
        active: Vec<Active>,
        last: u64,
        epoch: u64,
    },
}

/// A task's demand in dense form, so the event loop never touches the slot map.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Dense {
    Occupy { unit: u32, cycles: u64, priority: i32 },
    Transfer { resource: u32, bytes: u64, cap: u64 },
    Delay(u64),
    Wait,
}

impl Dense {
    pub(crate) fn of(task: &super::Task) -> Dense {
        match task.demand {
            Demand::Occupy { unit, cycles } => Dense::Occupy {
                unit: unit.0,
                cycles,
                priority: task.priority,
            },
            Demand::Transfer {
                resource,
                bytes,
                cap_bytes_per_s,
            } => Dense::Transfer {
                resource: resource.0,
                bytes,
                cap: cap_bytes_per_s.unwrap_or(u64::MAX).max(1),
            },
            Demand::Delay(d) => Dense::Delay(d.0),
            Demand::Wait => Dense::Wait,
        }
    }
}

struct Sim<'a> {
    engine: &'a Engine,
    ids: &'a [TaskId],
    dense: &'a [Dense],
    succ_start: Vec<u32>,
    succ: Vec<u32>,
    pending: Vec<u32>,
    start: Vec<u64>,
    end: Vec<u64>,
    states: Vec<State>,
    stats: Vec<ResourceStats>,
    heap: BinaryHeap<Reverse<Event>>,
    payload: Vec<Payload>,
    ready_seq: u64,
    now: u64,
    events: u64,
    done: usize,
    recorder: Recorder,
}

pub(super) fn run(engine: &Engine) -> Result<RunResult, EngineError> {
    let n = engine.ids.len();
    for (i, d) in engine.dense.iter().enumerate() {
        check_resource(engine, d, i)?;
    }
    // Successor lists in compressed form (counting sort of the dependency pairs).
    let mut counts = vec![0u32; n + 1];
    let mut pending = vec![0u32; n];
    for &(a, b) in &engine.deps {
        counts[a as usize + 1] += 1;
        pending[b as usize] += 1;
    }
    for i in 0..n {
        counts[i + 1] += counts[i];
    }
    let mut fill = counts.clone();
    let mut succ = vec![0u32; engine.deps.len()];
    for &(a, b) in &engine.deps {
        succ[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
    }
    let states = engine
        .resources
        .iter()
        .map(|r| match r {
            Resource::Unit {
                clock, servers, policy, ..
            } => State::Unit {
                free: *servers,
                queue: match policy {
                    QueuePolicy::Fifo => Queue::Fifo(VecDeque::new()),
                    QueuePolicy::Priority => Queue::Priority(BinaryHeap::new()),
                },
                clock_hz: clock.hz,
            },
            Resource::Bandwidth { bytes_per_s, .. } => State::Bandwidth {
                total: *bytes_per_s,
                active: Vec::new(),
                last: 0,
                epoch: 0,
            },
        })
        .collect();
    let mut sim = Sim {
        engine,
        ids: &engine.ids,
        dense: &engine.dense,
        succ_start: counts,
        succ,
        pending,
        start: vec![u64::MAX; n],
        end: vec![u64::MAX; n],
        states,
        stats: vec![ResourceStats::default(); engine.resources.len()],
        heap: BinaryHeap::with_capacity(1024),
        payload: Vec::with_capacity(n + n / 4 + 16),
        ready_seq: 0,
        now: 0,
        events: 0,
        done: 0,
        recorder: engine.new_recorder(),
    };
    for i in 0..n {
        if sim.pending[i] == 0 {
            sim.ready(i as u32);
        }
    }
    while let Some(Reverse(ev)) = sim.heap.pop() {
        sim.events += 1;
        sim.now = ev.time;
        let Payload { what, epoch } = sim.payload[ev.seq as usize];
        if what & BW_FLAG != 0 {
            sim.bandwidth_check((what & !BW_FLAG) as usize, epoch);
        } else {
            sim.finish(what as u32);
        }
    }
    if sim.done != n {
        let stuck = n - sim.done;
        let example = (0..n)
            .find(|&i| sim.end[i] == u64::MAX)
            .map(|i| engine.tasks[engine.ids[i]].name.clone());
        return Err(EngineError::Cycle {
            stuck,
            example: example.unwrap_or_default(),
        });
    }
    let makespan = sim.end.iter().copied().max().unwrap_or(0);
    Ok(RunResult {
        ids: engine.ids.clone(),
        start: sim.start,
        end: sim.end,
        makespan: SimTime(makespan),
        resource_stats: sim.stats,
        recorder: sim.recorder,
        events: sim.events,
    })
}

fn check_resource(engine: &Engine, d: &Dense, i: usize) -> Result<(), EngineError> {
    let (r, want_unit) = match *d {
        Dense::Occupy { unit, .. } => (unit, true),
        Dense::Transfer { resource, .. } => (resource, false),
        _ => return Ok(()),
    };
    let bad = |problem| EngineError::BadResource {
        task: engine.tasks[engine.ids[i]].name.clone(),
        resource: r,
        problem,
    };
    match engine.resources.get(r as usize) {
        None => Err(bad("does not exist")),
        Some(Resource::Unit { .. }) if !want_unit => Err(bad("is a unit, not a bandwidth resource")),
        Some(Resource::Bandwidth { .. }) if want_unit => Err(bad("is a bandwidth resource, not a unit")),
        Some(_) => Ok(()),
    }
}

impl Sim<'_> {
    fn push(&mut self, time: u64, what: u64, epoch: u64) {
        let seq = self.payload.len() as u64;
        self.payload.push(Payload { what, epoch });
        self.heap.push(Reverse(Event { time, seq }));
    }

    fn ready(&mut self, t: u32) {
        match self.dense[t as usize] {
            Dense::Occupy { unit, cycles, priority } => {
                let u = unit as usize;
                let State::Unit { free, queue, clock_hz } = &mut self.states[u] else {
                    unreachable!()
                };
                if *free > 0 {
                    *free -= 1;
                    let hz = *clock_hz;
                    self.start_occupy(t, u, cycles, hz);
                } else {
                    self.ready_seq += 1;
                    match queue {
                        Queue::Fifo(q) => q.push_back(t),
                        Queue::Priority(h) => h.push((priority, Reverse(self.ready_seq), t)),
                    }
                }
            }
            Dense::Transfer { resource, bytes, cap } => {
                self.start[t as usize] = self.now;
                if bytes == 0 {
                    self.push(self.now, t as u64, 0);
                    return;
                }
                let r = resource as usize;
                self.advance(r);
                let State::Bandwidth { active, .. } = &mut self.states[r] else {
                    unreachable!()
                };
                active.push(Active {
                    task: t,
                    remaining: bytes as u128 * PS_PER_S,
                    rate: 0,
                    cap,
                });
                self.reshare(r);
            }
            Dense::Delay(d) => {
                self.start[t as usize] = self.now;
                self.push(self.now + d, t as u64, 0);
            }
            Dense::Wait => {
                self.start[t as usize] = self.now;
                self.push(self.now, t as u64, 0);
            }
        }
    }

    fn start_occupy(&mut self, t: u32, unit: usize, cycles: u64, hz: u64) {
        self.start[t as usize] = self.now;
        // u64 arithmetic when it cannot overflow (the common case), u128 otherwise.
        let dur = match cycles.checked_mul(PS_PER_S as u64) {
            Some(num) => num.div_ceil(hz),
            None => (cycles as u128 * PS_PER_S).div_ceil(hz as u128) as u64,
        };
        self.stats[unit].busy_ps += dur;
        self.stats[unit].tasks += 1;
        self.push(self.now + dur, t as u64, 0);
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

    /// Recomputes max-min fair rates (water-filling under per-transfer caps) and schedules the next finish.
    fn reshare(&mut self, r: usize) {
        let now = self.now;
        let record = self.engine.record;
        let State::Bandwidth {
            total, active, epoch, ..
        } = &mut self.states[r]
        else {
            unreachable!()
        };
        *epoch += 1;
        let ep = *epoch;
        if active.is_empty() {
            if record {
                let track = self.engine.resources[r].track();
                self.recorder
                    .counter(&track.process, format!("{} GB/s", track.thread), SimTime(now), 0.0);
            }
            return;
        }
        active.sort_by_key(|a| (a.cap, a.task));
        let mut left = *total;
        let mut n = active.len() as u64;
        let mut used = 0u64;
        for a in active.iter_mut() {
            let share = left / n;
            a.rate = a.cap.min(share).max(1);
            left = left.saturating_sub(a.rate);
            used += a.rate;
            n -= 1;
        }
        let next = active
            .iter()
            .map(|a| a.remaining.div_ceil(a.rate as u128) as u64)
            .min()
            .unwrap_or(0);
        if record {
            let track = self.engine.resources[r].track();
            self.recorder.counter(
                &track.process,
                format!("{} GB/s", track.thread),
                SimTime(now),
                used as f64 / 1e9,
            );
        }
        self.push(now + next, BW_FLAG | r as u64, ep);
    }

    fn bandwidth_check(&mut self, r: usize, ep: u64) {
        let State::Bandwidth { epoch, .. } = &self.states[r] else {
            unreachable!()
        };
        if *epoch != ep {
            return;
        }
        self.advance(r);
        let State::Bandwidth { active, .. } = &mut self.states[r] else {
            unreachable!()
        };
        let mut finished = Vec::new();
        active.retain(|a| {
            if a.remaining == 0 {
                finished.push(a.task);
                false
            } else {
                true
            }
        });
        self.reshare(r);
        for t in finished {
            self.finish(t);
        }
    }

    fn finish(&mut self, t: u32) {
        let ti = t as usize;
        self.end[ti] = self.now;
        self.done += 1;
        match self.dense[ti] {
            Dense::Occupy { unit, .. } => {
                let u = unit as usize;
                let State::Unit { free, queue, clock_hz } = &mut self.states[u] else {
                    unreachable!()
                };
                let next = match queue {
                    Queue::Fifo(q) => q.pop_front(),
                    Queue::Priority(h) => h.pop().map(|x| x.2),
                };
                let hz = *clock_hz;
                match next {
                    Some(nt) => {
                        let Dense::Occupy { cycles, .. } = self.dense[nt as usize] else {
                            unreachable!()
                        };
                        self.start_occupy(nt, u, cycles, hz);
                    }
                    None => *free += 1,
                }
            }
            Dense::Transfer { resource, bytes, .. } => {
                let s = &mut self.stats[resource as usize];
                s.bytes += bytes;
                s.tasks += 1;
            }
            _ => {}
        }
        if self.engine.record {
            self.record_span(ti);
        }
        let (a, b) = (self.succ_start[ti] as usize, self.succ_start[ti + 1] as usize);
        for k in a..b {
            let s = self.succ[k] as usize;
            self.pending[s] -= 1;
            if self.pending[s] == 0 {
                self.ready(s as u32);
            }
        }
    }

    fn record_span(&mut self, ti: usize) {
        let task = &self.engine.tasks[self.ids[ti]];
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
        self.recorder.span(Span {
            track,
            name: task.name.clone(),
            category: task.category.clone(),
            start: SimTime(self.start[ti]),
            end: SimTime(self.end[ti]),
            args,
        });
    }
}
