//! The pipelining lesson (`tpusim explain pipelining --html`): a training step reduced to its
//! stages, with times a learner picks, scheduled by the engine over a grid of slider values.
//!
//! Each step: the host preprocesses its ids (host time), the SparseCores look up the embeddings
//! (half the SparseCore time), the TensorCore runs the forward pass (a third of the TensorCore
//! time) and the backward pass (two thirds: backward does about twice forward's matmuls), and the
//! SparseCores apply the embedding gradients (the other half). The gates are the program's own
//! ([`crate::program::graph::sc_forward_gate`], [`crate::program::graph::host_gate`]): SparseCore
//! forward of step i waits for SparseCore backward of step i-1 (sequential) or i-2 (pipelined),
//! and the host runs at most `in_flight` steps ahead. Units are FIFO, as in the program.
//!
//! The step time is measured as `program::measure` does: after two warm-up steps, from the end of
//! one step to the end of the last, over the steps between.

use serde::{Deserialize, Serialize};
use sim_core::engine::{Engine, QueuePolicy, Task, TaskId};
use sim_core::time::Clock;

use crate::program::graph::{host_gate, sc_forward_gate};
use crate::spec::{Pipelining, WorkloadError};

/// Steps each lesson run simulates (two warm-up steps, four measured).
pub const LESSON_STEPS: usize = 6;
/// Warm-up steps left out of the step time.
const WARM_STEPS: usize = 2;

/// One setting of the sliders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LessonPoint {
    /// TensorCore time per step (forward + backward), µs.
    pub tc_us: u64,
    /// SparseCore time per step (lookups + gradient updates), µs.
    pub sc_us: u64,
    /// Host preprocessing time per step, µs.
    pub host_us: u64,
    /// Steps the host may prepare ahead of the SparseCores (input prefetch depth, >= 1).
    pub in_flight: u32,
    /// Sequential or pipelined.
    pub pipelining: Pipelining,
}

/// The stage a bar of the lesson's Gantt chart shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LessonStage {
    /// Host preprocessing.
    Host,
    /// SparseCore forward (embedding lookups).
    ScForward,
    /// TensorCore forward.
    TcForward,
    /// TensorCore backward.
    TcBackward,
    /// SparseCore backward (embedding updates).
    ScBackward,
}

/// What one lesson run scheduled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LessonRun {
    /// Steady-state step time, ns.
    pub step_ns: u64,
    /// Every task: stage, step, start and end in ns.
    pub bars: Vec<(LessonStage, u32, u64, u64)>,
    /// Staleness arrows: (step whose embedding update, first step whose lookups see it).
    pub arrows: Vec<(u32, u32)>,
    /// The unit busiest in the steady state: "host", "SparseCore" or "TensorCore".
    pub bottleneck: String,
}

/// Schedules `LESSON_STEPS` steps of the point on the engine.
pub fn run_point(p: &LessonPoint) -> Result<LessonRun, WorkloadError> {
    let err = |e: sim_core::engine::EngineError| WorkloadError::Run(e.to_string());
    let mut e = Engine::new();
    // 1 GHz: one cycle is one nanosecond.
    let clock = Clock::from_mhz(1000);
    let host = e
        .add_unit("host", "preprocess", clock, QueuePolicy::Fifo)
        .map_err(err)?;
    let sc = e
        .add_unit("chip", "SparseCore", clock, QueuePolicy::Fifo)
        .map_err(err)?;
    let tc = e
        .add_unit("chip", "TensorCore", clock, QueuePolicy::Fifo)
        .map_err(err)?;
    let ns = |us: u64| us.saturating_mul(1000).max(1);
    let (sc_f, sc_b) = (ns(p.sc_us) / 2, ns(p.sc_us) - ns(p.sc_us) / 2);
    let (tc_f, tc_b) = (ns(p.tc_us) / 3, ns(p.tc_us) - ns(p.tc_us) / 3);
    // Per step: (task, stage) in order, and the SparseCore forward gate.
    let mut steps: Vec<[TaskId; 5]> = Vec::new();
    let mut gates: Vec<TaskId> = Vec::new();
    for i in 0..LESSON_STEPS {
        let h = e.add_task(Task::occupy(host, ns(p.host_us)).name(format!("host {i}")));
        if let Some(k) = host_gate(p.in_flight, i) {
            e.add_dep(gates[k], h).map_err(err)?;
        }
        let gate = e.add_task(Task::wait().name(format!("SC fwd start {i}")));
        e.add_dep(h, gate).map_err(err)?;
        if let Some(k) = sc_forward_gate(p.pipelining, i) {
            e.add_dep(steps[k][4], gate).map_err(err)?;
        }
        let sf = e.add_task(Task::occupy(sc, sc_f.max(1)).name(format!("SC fwd {i}")));
        let tf = e.add_task(Task::occupy(tc, tc_f.max(1)).name(format!("TC fwd {i}")));
        let tb = e.add_task(Task::occupy(tc, tc_b.max(1)).name(format!("TC bwd {i}")));
        let sb = e.add_task(Task::occupy(sc, sc_b.max(1)).name(format!("SC bwd {i}")));
        e.add_dep(gate, sf).map_err(err)?;
        e.add_dep(sf, tf).map_err(err)?;
        if let Some(prev) = steps.last() {
            // The dense update of the previous step lands before this forward pass.
            e.add_dep(prev[3], tf).map_err(err)?;
        }
        e.add_dep(tf, tb).map_err(err)?;
        e.add_dep(tb, sb).map_err(err)?;
        steps.push([h, sf, tf, tb, sb]);
        gates.push(gate);
    }
    let run = e.run().map_err(err)?;
    let t = |x: TaskId| {
        (
            run.start(x).unwrap_or_default().0 / 1000,
            run.end(x).unwrap_or_default().0 / 1000,
        )
    };
    let stages = [
        LessonStage::Host,
        LessonStage::ScForward,
        LessonStage::TcForward,
        LessonStage::TcBackward,
        LessonStage::ScBackward,
    ];
    let mut bars = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        for (k, &task) in s.iter().enumerate() {
            let (a, b) = t(task);
            bars.push((stages[k], i as u32, a, b));
        }
    }
    let end_of = |i: usize| t(steps[i][4]).1.max(t(steps[i][3]).1);
    let (t0, t1) = (end_of(WARM_STEPS - 1), end_of(LESSON_STEPS - 1));
    let step_ns = (t1 - t0) / (LESSON_STEPS - WARM_STEPS) as u64;
    let arrows = (0..LESSON_STEPS)
        .filter_map(|i| sc_forward_gate(p.pipelining, i).map(|k| (k as u32, i as u32)))
        .collect();
    // Busy time per unit inside the window (units run one task at a time).
    let busy = |which: &[usize]| -> u64 {
        steps
            .iter()
            .flat_map(|s| which.iter().map(move |&k| s[k]))
            .map(|x| {
                let (a, b) = t(x);
                b.min(t1).saturating_sub(a.max(t0))
            })
            .sum()
    };
    let units = [
        ("host", busy(&[0])),
        ("SparseCore", busy(&[1, 4])),
        ("TensorCore", busy(&[2, 3])),
    ];
    let bottleneck = units
        .iter()
        .max_by_key(|(name, b)| (*b, std::cmp::Reverse(*name)))
        .map_or("", |u| u.0)
        .to_string();
    Ok(LessonRun {
        step_ns,
        bars,
        arrows,
        bottleneck,
    })
}

/// The slider values: every combination is run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LessonAxes {
    /// TensorCore time per step, µs.
    pub tc_us: Vec<u64>,
    /// SparseCore time per step, µs.
    pub sc_us: Vec<u64>,
    /// Host time per step, µs.
    pub host_us: Vec<u64>,
    /// Steps in flight (host prefetch depth).
    pub in_flight: Vec<u32>,
    /// Schedules.
    pub pipelining: Vec<Pipelining>,
}

impl Default for LessonAxes {
    /// 5 x 5 x 4 x 3 x 2 = 600 runs.
    fn default() -> Self {
        LessonAxes {
            tc_us: vec![20, 40, 60, 80, 100],
            sc_us: vec![20, 40, 60, 80, 100],
            host_us: vec![10, 30, 50, 70],
            in_flight: vec![1, 2, 3],
            pipelining: vec![Pipelining::Sequential, Pipelining::Pipelined],
        }
    }
}

/// One grid point's result as the page draws it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LessonCell {
    /// The run.
    #[serde(flatten)]
    pub run: LessonRun,
    /// Sequential step time over this point's step time (1 for sequential points).
    pub speedup: f64,
}

/// Every run of the grid, in index order: pipelining varies fastest, then in_flight, host, sc, tc.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LessonGrid {
    /// The slider values.
    pub axes: LessonAxes,
    /// Steps per run.
    pub steps: usize,
    /// The runs.
    pub cells: Vec<LessonCell>,
}

impl LessonGrid {
    /// Index of the cell for slider positions (tc, sc, host, in_flight, pipelining).
    pub fn index(&self, tc: usize, sc: usize, host: usize, in_flight: usize, pipelining: usize) -> usize {
        let a = &self.axes;
        (((tc * a.sc_us.len() + sc) * a.host_us.len() + host) * a.in_flight.len() + in_flight) * a.pipelining.len()
            + pipelining
    }
}

/// Runs every point of the axes on the engine.
pub fn run_grid(axes: &LessonAxes) -> Result<LessonGrid, WorkloadError> {
    let mut cells = Vec::new();
    for &tc_us in &axes.tc_us {
        for &sc_us in &axes.sc_us {
            for &host_us in &axes.host_us {
                for &in_flight in &axes.in_flight {
                    let point = |pipelining| LessonPoint {
                        tc_us,
                        sc_us,
                        host_us,
                        in_flight,
                        pipelining,
                    };
                    let seq = run_point(&point(Pipelining::Sequential))?;
                    for &pl in &axes.pipelining {
                        let run = run_point(&point(pl))?;
                        let speedup = seq.step_ns as f64 / run.step_ns.max(1) as f64;
                        cells.push(LessonCell {
                            speedup: (speedup * 1000.0).round() / 1000.0,
                            run,
                        });
                    }
                }
            }
        }
    }
    Ok(LessonGrid {
        axes: axes.clone(),
        steps: LESSON_STEPS,
        cells,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(pipelining: Pipelining) -> LessonPoint {
        LessonPoint {
            tc_us: 60,
            sc_us: 60,
            host_us: 10,
            in_flight: 2,
            pipelining,
        }
    }

    #[test]
    fn sequential_adds_the_units_pipelined_overlaps_them() {
        let seq = run_point(&point(Pipelining::Sequential)).unwrap();
        let pip = run_point(&point(Pipelining::Pipelined)).unwrap();
        // Sequential: SparseCore and TensorCore work of a step one after the other (120 µs).
        assert_eq!(seq.step_ns, 120_000);
        // Pipelined: the next lookups run during the TensorCore passes; the step is bounded by the
        // SparseCore or TensorCore chain, no longer their sum.
        assert!(pip.step_ns < seq.step_ns, "{}", pip.step_ns);
        assert_eq!(pip.arrows[0], (0, 2));
        assert_eq!(seq.arrows[0], (0, 1));
        assert_eq!(seq.bars.len(), 5 * LESSON_STEPS);
    }

    #[test]
    fn slow_host_is_the_bottleneck() {
        let mut p = point(Pipelining::Pipelined);
        p.host_us = 200;
        let r = run_point(&p).unwrap();
        assert_eq!(r.bottleneck, "host");
        assert_eq!(r.step_ns, 200_000);
    }

    #[test]
    fn grid_is_indexed_as_documented() {
        let axes = LessonAxes {
            tc_us: vec![20, 60],
            sc_us: vec![40],
            host_us: vec![10, 30],
            in_flight: vec![2],
            pipelining: vec![Pipelining::Sequential, Pipelining::Pipelined],
        };
        let g = run_grid(&axes).unwrap();
        assert_eq!(g.cells.len(), 8);
        let i = g.index(1, 0, 1, 0, 1);
        let direct = run_point(&LessonPoint {
            tc_us: 60,
            sc_us: 40,
            host_us: 30,
            in_flight: 2,
            pipelining: Pipelining::Pipelined,
        })
        .unwrap();
        assert_eq!(g.cells[i].run, direct);
        assert_eq!(g.cells[g.index(1, 0, 1, 0, 0)].speedup, 1.0);
    }
}
