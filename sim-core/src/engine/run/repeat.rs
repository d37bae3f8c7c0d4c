//! Fast-forwarding a repeating task graph ([`Engine::run_repeating`](super::super::Engine::run_repeating)).
//!
//! A graph *repeats with stride S from task F* when every task `i >= F` with `i + S` in the graph
//! has a copy `i + S`: the same demand (kind, resource, amount, cap, priority), the same number of
//! dependencies, and as successors its own shifted by `S`, in the same order (those shifted past
//! the end of the graph missing). [`Watch::new`] finds the smallest such `F`.
//!
//! Why skipping is exact. The run's future depends only on its *state* between two events: the
//! heap (times, sequence numbers, payloads), each unit's free servers and queue, each bandwidth
//! resource's transfers in flight (remaining bytes, rates, caps), when it last advanced and its
//! pending check, the sequence counters, and the pending counts of unfinished tasks (tasks above
//! `hi`, never readied nor released, still have their initial counts). Durations, bytes and
//! successor lists are fixed by the graph. Everything else (task times, statistics, spans,
//! counter samples) is output. Each time a copy `a + kS` of the anchor finishes, the state is
//! captured relative to that instant, its sequence counter and its anchor. If a capture equals an
//! earlier one `L = rS` tasks back, `D` ps earlier, and both lie in the repeating part, then the
//! events between them, mirrored by `L` tasks, `D` ps and the sequence numbers used in between,
//! are a valid run from the later state: every step of the engine (queue order, max-min fair
//! shares, `(time, sequence)` ties, integer progress) depends on relative times and relative
//! order only, and every task those events touch (at most `hi`) has a copy `L` later with the
//! same demand and successors, as long as `hi + L` is in the graph. By induction the run repeats
//! for `m = (n - 1 - hi) / L` periods: the tasks finishing in them are the period's finishers
//! shifted by `kL` tasks and `kD` ps (`k = 1..=m`), in the same order, and the state after them is
//! the capture shifted by `mL`, `mD`. That is written out, and the rest of the run (the last
//! steps, which no longer have copies after them) is simulated as usual. Spans and counter
//! samples of the skipped periods are recorded in the order the full run records them; statistics,
//! events and finished tasks grow by `m` times a period's. Nothing is compared against a full run:
//! a state that never repeats (a priority queue, an unstable schedule) is simply simulated.

use std::collections::VecDeque;

use super::{Active, Engine, Queue, ResourceStats, Sim, State, BW_FLAG, DONE, K_OCCUPY, K_TRANSFER, NONE, NO_CAP};
use crate::recorder::CounterSample;
use crate::time::SimTime;

/// Captures kept to compare with: a schedule may repeat only every few periods of the graph.
const KEEP: usize = 4;

/// How a run skipped periods of a repeating graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastForward {
    /// Tasks per period of the schedule.
    pub period_tasks: usize,
    /// Strides of the graph per period of the schedule (it may repeat only every few).
    pub strides: u64,
    /// Time one period takes, ps.
    pub period_ps: u64,
    /// Periods filled in by shifting instead of simulated.
    pub periods: u64,
    /// Simulated time at which they were skipped, ps.
    pub from_ps: u64,
}

/// An event in the heap, relative to a capture.
#[derive(Clone, Debug, PartialEq)]
enum Event {
    /// A task finishes: its index from the anchor, and how long ago it started (ps).
    Finish { task: i64, started_ago: u64 },
    /// A bandwidth resource's check.
    Check(u32),
}

/// One resource's state relative to a capture.
#[derive(Clone, Debug, PartialEq)]
enum Resource {
    /// Free servers; queued tasks (index from the anchor), first served first.
    Unit { free: u32, queue: Vec<i64> },
    /// Transfers in flight: (task from the anchor, remaining bytes x 10^12, rate, cap, started
    /// how long ago); ps since progress was last applied; sequence numbers back to the valid check.
    Bandwidth {
        active: Vec<(i64, u128, u64, u64, u64)>,
        since_last: u64,
        check_back: Option<u64>,
    },
}

/// What the rest of a run depends on, relative to the instant, sequence counter and anchor of a
/// capture: two captures with equal shapes have the same future, shifted.
#[derive(Clone, Debug, PartialEq)]
struct Shape {
    /// Lowest unfinished task, from the anchor.
    lo: i64,
    /// Pending counts (`DONE`: finished) of tasks `lo..=hi`.
    pending: Vec<u32>,
    /// Heap entries: (ps from now, sequence numbers back from the counter, event), in key order.
    heap: Vec<(u64, u64, Event)>,
    /// Per resource. (The engine's count of queue arrivals orders priority queues only, and a
    /// watch is never set up with one.)
    resources: Vec<Resource>,
}

/// The state when a copy of the anchor finished, and the output accumulated until then.
struct Capture {
    anchor: u32,
    now: u64,
    seq: u64,
    hi: u32,
    shape: Shape,
    stats: Vec<ResourceStats>,
    events: u64,
    done: usize,
    /// Lengths of the finish log and of the counter samples.
    log: usize,
    counters: usize,
}

/// Watching a run for a repeated state.
pub(crate) struct Watch {
    stride: u32,
    /// Tasks from here on repeat with the stride.
    first: u32,
    /// The copy of the anchor whose finish triggers the next capture.
    next: u32,
    /// Lowest unfinished task (advanced lazily).
    lo: u32,
    captures: VecDeque<Capture>,
    /// Tasks in the order they finished.
    pub(super) log: Vec<u32>,
}

impl Watch {
    /// A watch for copies of task `anchor` every `stride` tasks, or None when the graph does not
    /// repeat with that stride at all, or has a unit with a priority queue (not captured).
    pub(super) fn new(engine: &Engine, anchor: u32, stride: u32) -> Option<Box<Watch>> {
        let n = engine.ids.len();
        let priority = engine.resources.iter().any(|r| {
            matches!(
                r,
                crate::engine::Resource::Unit {
                    policy: crate::engine::QueuePolicy::Priority,
                    ..
                }
            )
        });
        if priority || (anchor as usize) >= n || (stride as usize) >= n {
            return None;
        }
        let t = engine.template.get_or_init(|| super::template(engine));
        let s = stride as usize;
        let extra = |i: usize| {
            let d = engine.dense[i];
            match d.kind_res >> 30 {
                K_TRANSFER if d.extra != NO_CAP => Some(engine.caps[d.extra as usize]),
                K_TRANSFER => None,
                K_OCCUPY => Some(d.extra as u64),
                _ => Some(0),
            }
        };
        let succ = |i: usize| {
            let node = &t.nodes[i];
            let more = match node.more {
                NONE => &[][..],
                m => {
                    let (a, b) = t.more[m as usize];
                    &t.more_succ[a as usize..b as usize]
                }
            };
            (node.first_succ != NONE)
                .then_some(node.first_succ)
                .into_iter()
                .chain(more.iter().copied())
        };
        let copy = |i: usize| {
            let j = i + s;
            let (a, b) = (engine.dense[i], engine.dense[j]);
            a.amount == b.amount
                && a.kind_res == b.kind_res
                && extra(i) == extra(j)
                && t.nodes[i].pending == t.nodes[j].pending
                && succ(i)
                    .map(|x| x as usize + s)
                    .filter(|&x| x < n)
                    .eq(succ(j).map(|x| x as usize))
        };
        let first = (0..n - s).rev().find(|&i| !copy(i)).map_or(0, |i| i + 1);
        Some(Box::new(Watch {
            stride,
            first: first as u32,
            next: anchor,
            lo: 0,
            captures: VecDeque::new(),
            log: Vec::new(),
        }))
    }

    /// The task whose finish triggers the next capture.
    pub(super) fn next_anchor(&self) -> usize {
        self.next as usize
    }
}

impl<const WATCH: bool> Sim<'_, WATCH> {
    /// A copy of the anchor has finished: capture the state, and skip periods when it repeats an
    /// earlier capture. Stops watching once a jump is made or no longer possible.
    pub(super) fn at_anchor(&mut self) {
        let Some(mut w) = self.watch.take() else {
            return;
        };
        let n = self.nodes.len();
        while (w.lo as usize) < n && self.nodes[w.lo as usize].pending == DONE {
            w.lo += 1;
        }
        let anchor = w.next;
        if w.lo >= w.first && (w.lo as usize) < n {
            let c = self.capture(anchor, w.lo, &w);
            if let Some(old) = w.captures.iter().rev().find(|o| o.shape == c.shape) {
                // Repeated: skip what the graph has room for, then simulate the rest.
                let period = (c.anchor - old.anchor) as usize;
                let m = (n - 1 - c.hi as usize) / period;
                if m > 0 {
                    self.jump(old, &c, m as u64, &w);
                }
                return;
            }
            w.captures.push_back(c);
            if w.captures.len() > KEEP {
                w.captures.pop_front();
            }
        }
        // A copy that finished before this one was not captured at its own finish: skip it
        // (captures are compared whole periods apart, however many strides).
        let mut next = anchor as usize + w.stride as usize;
        while next < n && self.nodes[next].pending == DONE {
            next += w.stride as usize;
        }
        if next < n {
            w.next = next as u32;
            self.watch = Some(w);
        }
    }

    fn capture(&self, anchor: u32, lo: u32, w: &Watch) -> Capture {
        let (now, seq) = (self.now, self.seq);
        let rel = |t: u32| t as i64 - anchor as i64;
        let started_ago = |t: u32| now - self.nodes[t as usize].start;
        let pending = (lo..=self.hi.max(lo))
            .take_while(|&i| (i as usize) < self.nodes.len())
            .map(|i| self.nodes[i as usize].pending)
            .collect();
        let mut heap: Vec<(u64, u64, Event)> = self
            .heap
            .entries()
            .iter()
            .map(|e| {
                let ev = if e.what & BW_FLAG != 0 {
                    Event::Check(e.what & !BW_FLAG)
                } else {
                    Event::Finish {
                        task: rel(e.what),
                        started_ago: started_ago(e.what),
                    }
                };
                (e.time() - now, seq - e.seq(), ev)
            })
            .collect();
        // Sequence numbers are unique: (time, sequence) is the order events leave the heap.
        heap.sort_by_key(|h| (h.0, std::cmp::Reverse(h.1)));
        let resources = self
            .states
            .iter()
            .map(|st| match st {
                State::Unit { free, queue } => Resource::Unit {
                    free: *free,
                    queue: match queue {
                        Queue::Fifo(q) => q.iter().map(|&t| rel(t)).collect(),
                        // Not reached: a watch is never set up with a priority unit.
                        Queue::Priority(_) => vec![i64::MIN],
                    },
                },
                State::Bandwidth {
                    active,
                    last,
                    check_seq,
                    ..
                } => Resource::Bandwidth {
                    active: active
                        .iter()
                        .map(|a| (rel(a.task), a.remaining, a.rate, a.cap, started_ago(a.task)))
                        .collect(),
                    // Progress is applied to transfers in flight only: with none, `last` is never read.
                    since_last: if active.is_empty() { 0 } else { now - last },
                    check_back: (*check_seq != u64::MAX).then(|| seq - check_seq),
                },
            })
            .collect();
        Capture {
            anchor,
            now,
            seq,
            hi: self.hi.max(lo),
            shape: Shape {
                lo: rel(lo),
                pending,
                heap,
                resources,
            },
            stats: self.stats.clone(),
            events: self.events,
            done: self.done,
            log: w.log.len(),
            counters: self.recorder.counters.len(),
        }
    }

    /// Writes out `m` periods of `old`..`new` (equal shapes) and moves the state `m` periods on.
    /// Does nothing if a time or sequence number would overflow.
    fn jump(&mut self, old: &Capture, new: &Capture, m: u64, w: &Watch) {
        let (log, stride) = (&w.log[..], w.stride);
        let period = new.anchor - old.anchor;
        let (d, dseq) = (new.now - old.now, new.seq - old.seq);
        let latest = new.shape.heap.last().map_or(0, |h| h.0);
        let fits = d
            .checked_mul(m)
            .and_then(|md| new.now.checked_add(md)?.checked_add(latest))
            .zip(dseq.checked_mul(m).and_then(|ms| new.seq.checked_add(ms)))
            .is_some_and(|(t, _)| t < u64::MAX / 2);
        if !fits {
            return;
        }
        let (md, mseq, ml) = (d * m, dseq * m, period * m as u32);
        // The tasks finishing in the skipped periods, in the order they finish.
        let finished = &log[old.log..new.log];
        let counters: Vec<CounterSample> = self.recorder.counters[old.counters..new.counters].to_vec();
        for k in 1..=m {
            let (dt, dk) = (d * k, period * k as u32);
            for &x in finished {
                let (start, end) = (self.nodes[x as usize].start, self.nodes[x as usize].amount_or_end);
                let y = &mut self.nodes[(x + dk) as usize];
                (y.start, y.amount_or_end, y.pending) = (start + dt, end + dt, DONE);
                if self.engine.record {
                    self.record_span((x + dk) as usize);
                }
            }
            if self.engine.record {
                self.recorder.counters.extend(counters.iter().map(|c| CounterSample {
                    time: SimTime(c.time.0 + dt),
                    ..c.clone()
                }));
            }
        }
        // The state m periods on: pending counts, tasks in flight (with their starts), queues.
        let now = new.now + md;
        let lo = (new.anchor as i64 + new.shape.lo) as usize;
        for (i, &p) in new.shape.pending.iter().enumerate() {
            if p != DONE {
                self.nodes[lo + i + ml as usize].pending = p;
            }
        }
        let image = |rel: i64| (new.anchor as i64 + rel) as usize + ml as usize;
        for (_, _, ev) in &new.shape.heap {
            if let Event::Finish { task, started_ago } = ev {
                self.nodes[image(*task)].start = now - started_ago;
            }
        }
        for r in &new.shape.resources {
            if let Resource::Bandwidth { active, .. } = r {
                for &(task, _, _, _, started_ago) in active {
                    self.nodes[image(task)].start = now - started_ago;
                }
            }
        }
        self.heap.shift(md, mseq, |w| if w & BW_FLAG != 0 { w } else { w + ml });
        for st in &mut self.states {
            match st {
                State::Unit { queue, .. } => {
                    if let Queue::Fifo(q) = queue {
                        q.iter_mut().for_each(|t| *t += ml);
                    }
                }
                State::Bandwidth {
                    active,
                    last,
                    check_seq,
                    ..
                } => {
                    active.iter_mut().for_each(|a: &mut Active| a.task += ml);
                    *last += md;
                    if *check_seq != u64::MAX {
                        *check_seq += mseq;
                    }
                }
            }
        }
        for ((s, a), b) in self.stats.iter_mut().zip(&old.stats).zip(&new.stats) {
            s.busy_ps += m * (b.busy_ps - a.busy_ps);
            s.bytes += m * (b.bytes - a.bytes);
            s.tasks += m * (b.tasks - a.tasks);
        }
        self.events += m * (new.events - old.events);
        self.done += m as usize * (new.done - old.done);
        (self.now, self.seq, self.hi) = (now, new.seq + mseq, new.hi + ml);
        self.fast_forward = Some(FastForward {
            period_tasks: period as usize,
            strides: (period / stride) as u64,
            period_ps: d,
            periods: m,
            from_ps: new.now,
        });
    }
}
