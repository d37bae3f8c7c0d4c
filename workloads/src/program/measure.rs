//! Stage 4: what the schedule says: steady-state step time, busy and overlap fractions, and the
//! critical path of the steady-state steps told in stages.

use std::collections::{BTreeMap, HashMap};

use sim_core::engine::{ResourceId, RunResult as EngineRun, TaskId};
use sim_core::recorder::{Recorder, Span};
use sim_core::summary::BusyFraction;
use sim_core::tag::Unit;
use sim_core::time::merged_intervals;

use super::graph::{Stage, StepGraph};
use super::resolve::Plan;

/// What the run measured.
#[derive(Debug)]
pub struct Measured {
    /// Per measured step: (SparseCore forward start, SparseCore backward end) in ps: when the
    /// step's lookups began and its embedding updates landed.
    pub step_times: Vec<(u64, u64)>,
    /// Steps simulated: warm-up, measured and drain.
    pub step_count: usize,
    /// Steady-state step time, ps.
    pub step_ps: u64,
    /// Busy fractions in the steady-state window.
    pub busy: BusyFraction,
    /// Each SparseCore's busy fraction.
    pub sc_each: Vec<f64>,
    /// TensorCore and SparseCore both busy, fraction of the window.
    pub overlap: f64,
    /// Critical path of the steady-state steps: time per stage per step, ps, largest first (the
    /// sum of `critical_segments` per stage over `steady_steps`).
    pub critical_path: Vec<(Stage, u64)>,
    /// The critical path's pieces inside the window, in time order.
    pub critical_segments: Vec<Segment>,
    /// Steps measured in the window (the steps asked for).
    pub steady_steps: u64,
    /// Warm-up steps before the window.
    pub warmup_steps: u64,
    /// The steady-state window the fractions are measured in: (start, end), ps.
    pub window_ps: (u64, u64),
    /// Spans, flows and counters.
    pub recorder: Recorder,
}

/// One piece of the critical path: a task's time inside the window charged to a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// What the time is charged to.
    pub stage: Stage,
    /// The stage of the task it lies in (a kernel's launch share lies in its kernel's stage).
    pub task_stage: Stage,
    /// Start, ps.
    pub start: u64,
    /// End, ps.
    pub end: u64,
}

pub use super::window::{drain_steps, warmup_steps};

/// Reads the run: the graph's steps are warm-up steps, the `measured` steps asked for, then drain
/// steps; the window runs from the end of the last warm-up step to the end of the last measured one.
pub fn measure(p: &Plan, g: &StepGraph, run: EngineRun, measured: usize) -> Measured {
    let spec = p.spec();
    let warm = warmup_steps(p.w.host.prefetch).min(g.steps.len().saturating_sub(1));
    let n = (warm + measured.max(1)).min(g.steps.len().max(1));
    let end_of = |i: usize| {
        let s = &g.steps[i];
        run.end(s.sc_bwd_done)
            .unwrap_or_default()
            .0
            .max(run.end(s.update_done).unwrap_or_default().0)
    };
    let step_times: Vec<(u64, u64)> = (warm..n)
        .map(|i| {
            let s = &g.steps[i];
            (
                run.start(s.sc_fwd_start).unwrap_or_default().0,
                run.end(s.sc_bwd_done).unwrap_or_default().0,
            )
        })
        .collect();
    // A step ends when both its embedding updates and its dense update have landed.
    let (t0, t1) = if warm == 0 {
        (0, end_of(n - 1))
    } else {
        (end_of(warm - 1), end_of(n - 1))
    };
    let steady_steps = (n - warm).max(1) as u64;
    let step_ps = (t1 - t0) / steady_steps;
    let window = (t0, t1.max(t0 + 1));
    let last = &g.steps[n - 1];
    let final_task = if run.end(last.update_done) >= run.end(last.sc_bwd_done) {
        last.update_done
    } else {
        last.sc_bwd_done
    };
    let critical_segments = critical_segments(g, &run, final_task, window);
    let critical_path = per_stage(&critical_segments, steady_steps);
    let recorder = run.recorder;
    let span = (window.1 - window.0) as f64;
    let busy = |pred: &dyn Fn(&Span) -> bool| union_in(&recorder.spans, pred, window) as f64 / span;
    let unit = |s: &Span| s.tag.map(|t| t.unit);
    let sc_each: Vec<f64> = (0..spec.sparsecores_per_chip)
        .map(|n| busy(&|s: &Span| unit(s) == Some(Unit::SparseCore(n))))
        .collect();
    let sc_busy = if sc_each.is_empty() {
        0.0
    } else {
        sc_each.iter().sum::<f64>() / sc_each.len() as f64
    };
    let both = intersect_in(
        &recorder.spans,
        &|s: &Span| unit(s) == Some(Unit::TensorCore),
        &|s: &Span| matches!(unit(s), Some(Unit::SparseCore(_))),
        window,
    );
    let busy_fraction = BusyFraction {
        tc: busy(&|s: &Span| unit(s) == Some(Unit::TensorCore)),
        sc: sc_busy,
        hbm: utilisation(&recorder, &["HBM".to_string()], spec.hbm_bytes_per_s, window),
        ici: utilisation(&recorder, &ici_threads(g), g.ici_bytes_per_s, window),
        host: busy(&|s: &Span| matches!(unit(s), Some(Unit::Host | Unit::HostLink))),
    };
    Measured {
        step_times,
        step_ps,
        busy: busy_fraction,
        sc_each,
        overlap: both as f64 / span,
        critical_path,
        critical_segments,
        step_count: g.steps.len(),
        steady_steps,
        warmup_steps: warm as u64,
        window_ps: window,
        recorder,
    }
}

/// Walks back from `last`: a task started when its last predecessor finished, or, on a FIFO unit,
/// when the task before it there did. Every task on that chain gives its time inside `window` to
/// its stage, a kernel's launch share to kernel launches. Returned in time order.
fn critical_segments(g: &StepGraph, run: &EngineRun, last: TaskId, window: (u64, u64)) -> Vec<Segment> {
    // Tasks of each unit by end time, for queue waits.
    let mut by_unit: HashMap<ResourceId, Vec<(u64, TaskId)>> = HashMap::new();
    for (&t, info) in &g.info {
        if let (Some(u), Some(end)) = (info.unit, run.end(t)) {
            by_unit.entry(u).or_default().push((end.0, t));
        }
    }
    for v in by_unit.values_mut() {
        v.sort_unstable();
    }
    let mut out = Vec::new();
    let mut cur = last;
    // Each step back moves to a task that ends no later; the count bounds the walk.
    for _ in 0..g.engine.task_count() + 1 {
        let (Some(s), Some(e)) = (run.start(cur), run.end(cur)) else {
            break;
        };
        let (s, e) = (s.0, e.0);
        if let Some(info) = g.info.get(&cur) {
            let lo = s.max(window.0);
            let hi = e.min(window.1);
            if hi > lo {
                let launch = info.launch_ps.min(hi - lo);
                let piece = |stage, start, end| Segment {
                    stage,
                    task_stage: info.stage,
                    start,
                    end,
                };
                if hi - lo > launch {
                    out.push(piece(info.stage, lo + launch, hi));
                }
                if launch > 0 {
                    out.push(piece(Stage::KernelLaunch, lo, lo + launch));
                }
            }
        }
        if s <= window.0 {
            break;
        }
        let pred = g
            .preds
            .get(&cur)
            .into_iter()
            .flatten()
            .filter_map(|&q| run.end(q).map(|end| (end.0, q)))
            .filter(|&(end, _)| end == s)
            // Prefer a timed task over a barrier at the same instant.
            .max_by_key(|&(_, q)| g.info.contains_key(&q));
        let next = match pred {
            Some((_, q)) => Some(q),
            None => g.info.get(&cur).and_then(|i| i.unit).and_then(|u| {
                by_unit
                    .get(&u)
                    .and_then(|v| v.iter().find(|(end, q)| *end == s && *q != cur).map(|x| x.1))
            }),
        };
        match next {
            Some(q) => cur = q,
            None => break,
        }
    }
    out.reverse();
    out
}

/// Time per stage per step, ps, largest first: the segments summed per stage over `steps`.
pub fn per_stage(segments: &[Segment], steps: u64) -> Vec<(Stage, u64)> {
    let mut total: BTreeMap<Stage, u64> = BTreeMap::new();
    for s in segments {
        *total.entry(s.stage).or_default() += s.end - s.start;
    }
    let mut v: Vec<(Stage, u64)> = total.into_iter().map(|(k, t)| (k, t / steps.max(1))).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// Bytes a bandwidth resource moved inside the window over what it could move: the engine's
/// "<thread> GB/s" counter (the rate in use, piecewise constant between samples) integrated over
/// the window, so fluid sharing inside a transfer that the window cuts is counted as it ran.
/// The ICI link groups' resource names (`ICI x+`, ...).
pub fn ici_threads(g: &StepGraph) -> Vec<String> {
    g.units.ici.iter().map(|(l, _)| format!("ICI {}", l.name())).collect()
}

/// Bytes the resources named `threads` moved in the window over what `bytes_per_s` could have.
fn utilisation(rec: &Recorder, threads: &[String], bytes_per_s: u64, window: (u64, u64)) -> f64 {
    let mut moved = 0.0;
    for thread in threads {
        let name = format!("{thread} GB/s");
        let samples: Vec<(u64, f64)> = rec
            .counters
            .iter()
            .filter(|c| c.name == name)
            .map(|c| (c.time.0, c.value))
            .collect();
        for (i, &(t, gb_per_s)) in samples.iter().enumerate() {
            let until = samples.get(i + 1).map_or(window.1, |s| s.0);
            let inside = until.min(window.1).saturating_sub(t.max(window.0));
            moved += gb_per_s * 1e9 * inside as f64 / 1e12;
        }
    }
    // + 0.0: an empty float sum is -0.0.
    moved / (bytes_per_s.max(1) as f64 * (window.1 - window.0) as f64 / 1e12) + 0.0
}

fn intervals(spans: &[Span], pred: &dyn Fn(&Span) -> bool, window: (u64, u64)) -> Vec<(u64, u64)> {
    let v: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| pred(s))
        .map(|s| (s.start.0.max(window.0), s.end.0.min(window.1)))
        .filter(|(a, b)| b > a)
        .collect();
    merged_intervals(v)
}

fn union_in(spans: &[Span], pred: &dyn Fn(&Span) -> bool, window: (u64, u64)) -> u64 {
    intervals(spans, pred, window).iter().map(|(a, b)| b - a).sum()
}

fn intersect_in(spans: &[Span], p: &dyn Fn(&Span) -> bool, q: &dyn Fn(&Span) -> bool, window: (u64, u64)) -> u64 {
    let (a, b) = (intervals(spans, p, window), intervals(spans, q, window));
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}
