//! Running a task graph: dense per-task arrays, a (time, sequence) event heap, unit queues and
//! bandwidth sharing. No allocation per event in the hot loop beyond amortised vector growth.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use slotmap::SecondaryMap;

use super::bandwidth::BwState;
use super::{BandwidthId, Demand, Engine, EngineError, QueuePolicy, TaskId, UnitId};
use crate::recorder::{Recorder, Span, SpanId, Track};
use crate::time::SimTime;

/// When a task started and ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskTimes {
    /// Start of service (when it got its unit, began transferring, or became ready for waits).
    pub start: SimTime,
    /// Completion.
    pub end: SimTime,
}

/// Totals for one unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitStats {
    /// Server-time spent on tasks in ps (summed over servers).
    pub busy_ps: u64,
    /// Tasks served.
    pub tasks: u64,
}

/// Totals for one bandwidth resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BandwidthStats {
    /// Time with at least one transfer active, in ps.
    pub busy_ps: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Highest total rate in use, bytes per second.
    pub peak_bytes_per_s: u64,
    /// Transfers served.
    pub transfers: u64,
}

/// Result of [`Engine::run`].
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Start and end of every task.
    pub times: SecondaryMap<TaskId, TaskTimes>,
    /// Totals per unit.
    pub units: SecondaryMap<UnitId, UnitStats>,
    /// Totals per bandwidth resource.
    pub bandwidths: SecondaryMap<BandwidthId, BandwidthStats>,
    /// Completion time of the last task.
    pub makespan: SimTime,
    /// Events processed: one start and one completion per task.
    pub events: u64,
    /// Spans, flows and counters (empty when recording is off).
    pub recorder: Recorder,
    /// Span recorded for each task that recorded one.
    pub spans: SecondaryMap<TaskId, SpanId>,
}

impl RunReport {
    /// Start time of a task.
    pub fn start(&self, t: TaskId) -> Option<SimTime> {
        self.times.get(t).map(|x| x.start)
    }
    /// End time of a task.
    pub fn end(&self, t: TaskId) -> Option<SimTime> {
        self.times.get(t).map(|x| x.end)
    }
    /// Busy time of a unit (server-time, summed over its servers).
    pub fn unit_busy(&self, u: UnitId) -> SimTime {
        SimTime(self.units.get(u).map_or(0, |s| s.busy_ps))
    }
    /// Time a bandwidth resource had at least one transfer active.
    pub fn bandwidth_busy(&self, b: BandwidthId) -> SimTime {
        SimTime(self.bandwidths.get(b).map_or(0, |s| s.busy_ps))
    }
}

const KIND_OCCUPY: u8 = 0;
const KIND_TRANSFER: u8 = 1;
const KIND_WAIT: u8 = 2;
const KIND_DELAY: u8 = 3;

/// Hot per-task data.
#[derive(Clone, Copy)]
struct DenseTask {
    kind: u8,
    /// Dense unit or bandwidth index.
    res: u32,
    /// Duration in ps (occupy, delay) or bytes (transfer).
    amount: u64,
    /// Rate cap (transfer).
    cap: u64,
    priority: i64,
}

/// A heap event; ordered by (time, seq) only, earliest first.
#[derive(Clone, Copy)]
struct Event {
    time: u64,
    seq: u64,
    /// Task index (task finish) or bandwidth index | BW_FLAG with epoch in the high half.
    payload: u64,
}
const BW_FLAG: u64 = 1 << 31;

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

enum Queue {
    Fifo(VecDeque<u32>),
    Priority(BinaryHeap<(i64, Reverse<u64>, u32)>),
}

struct UnitState {
    free: u32,
    queue: Queue,
    busy_ps: u64,
    tasks: u64,
}

struct Sim<'a> {
    engine: &'a Engine,
    tasks: Vec<DenseTask>,
    preds_left: Vec<u32>,
    succ_off: Vec<u32>,
    succ: Vec<u32>,
    start: Vec<u64>,
    end: Vec<u64>,
    heap: BinaryHeap<Event>,
    seq: u64,
    units: Vec<UnitState>,
    bws: Vec<BwState>,
    ready: VecDeque<u32>,
    dirty_bws: Vec<u32>,
    finished: Vec<u32>,
    events: u64,
    done: usize,
    recorder: Option<Recorder>,
    span_of: Vec<u32>,
    unit_ids: Vec<UnitId>,
    bw_ids: Vec<BandwidthId>,
}

const NO_SPAN: u32 = u32::MAX;
const UNSET: u64 = u64::MAX;

impl Engine {
    /// Runs the task graph from time zero until every task has completed.
    pub fn run(&self) -> Result<RunReport, EngineError> {
        if let Some(e) = &self.deferred_error {
            return Err(e.clone());
        }
        let mut sim = Sim::build(self)?;
        sim.simulate();
        if sim.done < sim.tasks.len() {
            return Err(sim.find_cycle());
        }
        Ok(sim.report())
    }
}

fn res_name(process: &str, name: &str) -> String {
    format!("{process}/{name}")
}

impl<'a> Sim<'a> {
    fn build(engine: &'a Engine) -> Result<Self, EngineError> {
        let mut unit_index: SecondaryMap<UnitId, u32> = SecondaryMap::new();
        let mut unit_ids = Vec::with_capacity(engine.units.len());
        let mut units = Vec::with_capacity(engine.units.len());
        for (id, u) in &engine.units {
            if u.servers == 0 || u.clock.hz == 0 {
                let what = if u.servers == 0 { "servers" } else { "clock hz" };
                return Err(EngineError::ZeroCapacity {
                    resource: res_name(&u.process, &u.name),
                    what: what.into(),
                });
            }
            unit_index.insert(id, units.len() as u32);
            unit_ids.push(id);
            let queue = match u.policy {
                QueuePolicy::Fifo => Queue::Fifo(VecDeque::new()),
                QueuePolicy::Priority => Queue::Priority(BinaryHeap::new()),
            };
            units.push(UnitState {
                free: u.servers,
                queue,
                busy_ps: 0,
                tasks: 0,
            });
        }
        let mut bw_index: SecondaryMap<BandwidthId, u32> = SecondaryMap::new();
        let mut bw_ids = Vec::with_capacity(engine.bandwidths.len());
        let mut bws = Vec::with_capacity(engine.bandwidths.len());
        for (id, b) in &engine.bandwidths {
            if b.bytes_per_s == 0 {
                return Err(EngineError::ZeroCapacity {
                    resource: res_name(&b.process, &b.name),
                    what: "bytes per second".into(),
                });
            }
            bw_index.insert(id, bws.len() as u32);
            bw_ids.push(id);
            bws.push(BwState::new(b.bytes_per_s));
        }

        let n = engine.order.len();
        let mut tasks = Vec::with_capacity(n);
        for &id in &engine.order {
            let t = &engine.tasks[id].task;
            let d = match &t.demand {
                Demand::Occupy { unit, cycles } => {
                    let u = *unit_index
                        .get(*unit)
                        .ok_or_else(|| EngineError::UnknownUnit { task: t.name.clone() })?;
                    let clock = engine.units[*unit].clock;
                    let amount = clock.cycles_to_time(*cycles).0;
                    DenseTask {
                        kind: KIND_OCCUPY,
                        res: u,
                        amount,
                        cap: 0,
                        priority: t.priority,
                    }
                }
                Demand::Transfer {
                    bandwidth,
                    bytes,
                    rate_cap_bytes_per_s,
                } => {
                    let b = *bw_index
                        .get(*bandwidth)
                        .ok_or_else(|| EngineError::UnknownBandwidth { task: t.name.clone() })?;
                    if *rate_cap_bytes_per_s == 0 {
                        return Err(EngineError::ZeroRateCap { task: t.name.clone() });
                    }
                    DenseTask {
                        kind: KIND_TRANSFER,
                        res: b,
                        amount: *bytes,
                        cap: *rate_cap_bytes_per_s,
                        priority: 0,
                    }
                }
                Demand::Wait => DenseTask {
                    kind: KIND_WAIT,
                    res: 0,
                    amount: 0,
                    cap: 0,
                    priority: 0,
                },
                Demand::Delay { duration } => DenseTask {
                    kind: KIND_DELAY,
                    res: 0,
                    amount: duration.0,
                    cap: 0,
                    priority: 0,
                },
            };
            tasks.push(d);
        }

        // Successors in compressed rows, in the order dependencies were added.
        let mut preds_left = vec![0u32; n];
        let mut succ_off = vec![0u32; n + 1];
        for &(b, a) in &engine.deps {
            succ_off[b as usize + 1] += 1;
            preds_left[a as usize] += 1;
        }
        for i in 0..n {
            succ_off[i + 1] += succ_off[i];
        }
        let mut fill: Vec<u32> = succ_off[..n].to_vec();
        let mut succ = vec![0u32; engine.deps.len()];
        for &(b, a) in &engine.deps {
            succ[fill[b as usize] as usize] = a;
            fill[b as usize] += 1;
        }

        let recording = engine.recording;
        Ok(Sim {
            engine,
            tasks,
            preds_left,
            succ_off,
            succ,
            start: vec![UNSET; n],
            end: vec![UNSET; n],
            heap: BinaryHeap::with_capacity(1024),
            seq: 0,
            units,
            bws,
            ready: VecDeque::new(),
            dirty_bws: Vec::new(),
            finished: Vec::new(),
            events: 0,
            done: 0,
            recorder: recording.then(Recorder::new),
            span_of: if recording { vec![NO_SPAN; n] } else { Vec::new() },
            unit_ids,
            bw_ids,
        })
    }

    #[inline]
    fn push(&mut self, time: u64, payload: u64) {
        self.heap.push(Event {
            time,
            seq: self.seq,
            payload,
        });
        self.seq += 1;
    }

    fn simulate(&mut self) {
        for t in 0..self.tasks.len() as u32 {
            if self.preds_left[t as usize] == 0 {
                self.ready.push_back(t);
            }
        }
        self.drain(0);
        while let Some(ev) = self.heap.pop() {
            let now = ev.time;
            if ev.payload & BW_FLAG != 0 {
                let b = (ev.payload & (BW_FLAG - 1)) as usize;
                let epoch = (ev.payload >> 32) as u32;
                if self.bws[b].epoch != epoch {
                    continue;
                }
                let bw = &mut self.bws[b];
                bw.advance(now);
                let mut fin = std::mem::take(&mut self.finished);
                fin.clear();
                bw.take_finished(now, &mut fin);
                // Always reschedule: the next finish of the remaining transfers needs a new event.
                bw.dirty = true;
                self.dirty_bws.push(b as u32);
                for &t in &fin {
                    self.complete(t, now);
                }
                self.finished = fin;
            } else {
                let t = ev.payload as u32;
                let d = self.tasks[t as usize];
                if d.kind == KIND_OCCUPY {
                    self.release_unit(d.res, now);
                }
                self.complete(t, now);
            }
            self.drain(now);
        }
    }

    /// Frees a server of unit `u` and starts the next queued task on it.
    #[inline]
    fn release_unit(&mut self, u: u32, now: u64) {
        let st = &mut self.units[u as usize];
        let next = match &mut st.queue {
            Queue::Fifo(q) => q.pop_front(),
            Queue::Priority(q) => q.pop().map(|(_, _, t)| t),
        };
        match next {
            Some(t) => self.start_occupy(t, now),
            None => st.free += 1,
        }
    }

    #[inline]
    fn start_occupy(&mut self, t: u32, now: u64) {
        let d = self.tasks[t as usize];
        let st = &mut self.units[d.res as usize];
        st.busy_ps += d.amount;
        st.tasks += 1;
        self.start[t as usize] = now;
        self.events += 1;
        self.push(now.saturating_add(d.amount), t as u64);
    }

    /// Marks `t` complete at `now` and queues successors that became ready.
    #[inline]
    fn complete(&mut self, t: u32, now: u64) {
        self.end[t as usize] = now;
        self.events += 1;
        self.done += 1;
        if self.recorder.is_some() {
            self.record_span(t);
        }
        let (a, b) = (
            self.succ_off[t as usize] as usize,
            self.succ_off[t as usize + 1] as usize,
        );
        for i in a..b {
            let s = self.succ[i];
            let p = &mut self.preds_left[s as usize];
            *p -= 1;
            if *p == 0 {
                self.ready.push_back(s);
            }
        }
    }

    /// Dispatches every ready task at `now`, then reschedules bandwidth resources that changed.
    fn drain(&mut self, now: u64) {
        while let Some(t) = self.ready.pop_front() {
            let d = self.tasks[t as usize];
            match d.kind {
                KIND_OCCUPY => {
                    let st = &mut self.units[d.res as usize];
                    if st.free > 0 {
                        st.free -= 1;
                        self.start_occupy(t, now);
                    } else {
                        match &mut st.queue {
                            Queue::Fifo(q) => q.push_back(t),
                            Queue::Priority(q) => q.push((d.priority, Reverse(self.seq), t)),
                        }
                        self.seq += 1;
                    }
                }
                KIND_TRANSFER => {
                    self.start[t as usize] = now;
                    self.events += 1;
                    if d.amount == 0 {
                        self.complete(t, now);
                    } else {
                        let bw = &mut self.bws[d.res as usize];
                        bw.advance(now);
                        if !bw.dirty {
                            self.dirty_bws.push(d.res);
                        }
                        bw.add(t, d.amount, d.cap, now);
                    }
                }
                KIND_WAIT => {
                    self.start[t as usize] = now;
                    self.events += 1;
                    self.complete(t, now);
                }
                _ => {
                    self.start[t as usize] = now;
                    self.events += 1;
                    self.push(now.saturating_add(d.amount), t as u64);
                }
            }
        }
        while let Some(b) = self.dirty_bws.pop() {
            let bw = &mut self.bws[b as usize];
            if !bw.dirty {
                continue;
            }
            bw.recompute();
            let epoch = bw.epoch;
            let in_use = bw.in_use;
            if let Some(tf) = bw.next_finish_ps() {
                self.push(tf, (b as u64) | BW_FLAG | ((epoch as u64) << 32));
            }
            if let Some(rec) = &mut self.recorder {
                let r = &self.engine.bandwidths[self.bw_ids[b as usize]];
                rec.counter(
                    r.process.clone(),
                    format!("{} GB/s", r.name),
                    SimTime(now),
                    in_use as f64 / 1e9,
                );
            }
        }
    }

    fn record_span(&mut self, t: u32) {
        let engine = self.engine;
        let id = engine.order[t as usize];
        let task = &engine.tasks[id].task;
        let d = self.tasks[t as usize];
        let track = match d.kind {
            KIND_OCCUPY => {
                let u = &engine.units[self.unit_ids[d.res as usize]];
                Track {
                    process: u.process.clone(),
                    thread: u.name.clone(),
                }
            }
            KIND_TRANSFER => {
                let b = &engine.bandwidths[self.bw_ids[d.res as usize]];
                Track {
                    process: b.process.clone(),
                    thread: b.name.clone(),
                }
            }
            _ => match &task.track {
                Some((p, th)) => Track {
                    process: p.clone(),
                    thread: th.clone(),
                },
                None => return,
            },
        };
        let span = Span {
            track,
            name: task.name.clone(),
            category: task.category.clone(),
            start: SimTime(self.start[t as usize]),
            end: SimTime(self.end[t as usize]),
            args: task.args.clone(),
        };
        if let Some(rec) = &mut self.recorder {
            self.span_of[t as usize] = rec.span(span).0 as u32;
        }
    }

    /// Names the tasks on one dependency cycle among the tasks that never completed.
    fn find_cycle(&self) -> EngineError {
        let engine = self.engine;
        let n = self.tasks.len();
        let mut pred_of = vec![u32::MAX; n];
        for &(b, a) in &engine.deps {
            if self.end[b as usize] == UNSET && pred_of[a as usize] == u32::MAX {
                pred_of[a as usize] = b;
            }
        }
        let mut t = (0..n)
            .find(|&i| self.end[i] == UNSET && pred_of[i] != u32::MAX)
            .unwrap_or(0) as u32;
        let mut seen = vec![u32::MAX; n];
        let mut path = Vec::new();
        while seen[t as usize] == u32::MAX && pred_of[t as usize] != u32::MAX {
            seen[t as usize] = path.len() as u32;
            path.push(t);
            t = pred_of[t as usize];
        }
        let from = seen[t as usize].min(path.len() as u32) as usize;
        let mut cycle: Vec<String> = path[from..]
            .iter()
            .rev()
            .map(|&i| {
                let task = &engine.tasks[engine.order[i as usize]].task;
                if task.name.is_empty() {
                    format!("task #{i}")
                } else {
                    task.name.clone()
                }
            })
            .collect();
        if let Some(first) = cycle.first().cloned() {
            cycle.push(first);
        }
        EngineError::Cycle { cycle }
    }

    fn report(mut self) -> RunReport {
        let engine = self.engine;
        let mut times = SecondaryMap::with_capacity(engine.order.len());
        let mut makespan = 0;
        for (i, &id) in engine.order.iter().enumerate() {
            makespan = makespan.max(self.end[i]);
            times.insert(
                id,
                TaskTimes {
                    start: SimTime(self.start[i]),
                    end: SimTime(self.end[i]),
                },
            );
        }
        let mut units = SecondaryMap::new();
        for (i, st) in self.units.iter().enumerate() {
            units.insert(
                self.unit_ids[i],
                UnitStats {
                    busy_ps: st.busy_ps,
                    tasks: st.tasks,
                },
            );
        }
        let mut transfers = vec![0u64; self.bws.len()];
        for d in &self.tasks {
            if d.kind == KIND_TRANSFER {
                transfers[d.res as usize] += 1;
            }
        }
        let mut bandwidths = SecondaryMap::new();
        for (i, b) in self.bws.iter().enumerate() {
            bandwidths.insert(
                self.bw_ids[i],
                BandwidthStats {
                    busy_ps: b.busy_ps,
                    bytes: b.bytes,
                    peak_bytes_per_s: b.peak_bytes_per_s,
                    transfers: transfers[i],
                },
            );
        }
        let mut spans = SecondaryMap::new();
        let mut recorder = self.recorder.take().unwrap_or_default();
        if !self.span_of.is_empty() {
            for (i, &s) in self.span_of.iter().enumerate() {
                if s != NO_SPAN {
                    spans.insert(engine.order[i], SpanId(s as usize));
                }
            }
            for (from, to, label) in &engine.flows {
                if let (Some(&f), Some(&t)) = (spans.get(*from), spans.get(*to)) {
                    recorder.flow(f, t, label.clone());
                }
            }
        }
        RunReport {
            times,
            units,
            bandwidths,
            makespan: SimTime(makespan),
            events: self.events,
            recorder,
            spans,
        }
    }
}
