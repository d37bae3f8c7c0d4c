//! The training-step program, in stages with data flowing one way:
//!
//! `resolve` (workload + chip + parameters -> [`resolve::Plan`]) -> `work` (every step's SparseCore
//! work from the real preprocessing) and `dense` (the TensorCore kernels) -> `graph` (the task graph
//! with typed handles; pipelining decides the edges) -> engine -> `measure` (step time, busy, critical
//! path) -> `limits` and `memory` (verdicts per stack, HBM by the shared sizing) -> `advice` (misfits,
//! bottleneck, straggler, warnings) -> the knob report, a function of those facts.
//!
//! One representative chip is simulated: all chips run the same program on their share of the
//! batch; collectives are timed on the slice's torus.

pub mod advice;
pub mod dense;
pub mod graph;
pub mod limits;
pub mod measure;
pub mod memory;
pub mod resolve;
pub mod stages;
pub mod window;
pub mod work;

use std::collections::HashMap;

use sim_core::recorder::{ArgValue, Recorder, Span};
use sim_core::summary::{CriticalStage, FitKind, FitReason, RunSummary};
use sim_core::tag::{SpanTag, Unit as TagUnit};

pub use graph::Stage;
pub use resolve::{sc_params, Plan};

use crate::spec::{Pipelining, Workload, WorkloadError};

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Also train a small model on the schedule (real tables and updates).
    pub functional: bool,
    /// Record spans (for traces, reports, the Gantt chart).
    pub record: bool,
    /// Chip preset and step-parameter overrides (a chip file's JSON, or `--set chip.FIELD=VALUE`).
    pub chip_overrides: Option<serde_json::Value>,
    /// Ids and step work shared with other runs of a sweep (results are the same without it).
    pub cache: Option<crate::cache::RunCache>,
    /// Work the run may take on (steps, ids per step); beyond them it is refused up front.
    pub bounds: crate::spec::RunBounds,
    /// Simulate every step even when the schedule is found to repeat (tests and diagnostics: the
    /// result is the same, only slower).
    pub simulate_every_step: bool,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunResult {
    /// The JSON summary.
    pub summary: RunSummary,
    /// Spans, flows and counters.
    pub recorder: Recorder,
    /// The stage that holds most of the critical path.
    pub bottleneck_stage: Option<Stage>,
    /// One sentence: what does not fit, then the bottleneck and what to change.
    pub bottleneck: String,
    /// Chip constants and step parameters used: field, value, source.
    pub chip_constants: Vec<(String, String, String)>,
    /// Padding per buffer: name, padded bytes, unpadded bytes.
    pub padding_per_buffer: Vec<(String, u64, u64)>,
    /// Per step: (SC forward start, SC backward end) in ps.
    pub step_times: Vec<(u64, u64)>,
    /// The SparseCore guide's knobs: name, setting, effect in this run.
    pub knobs: Vec<(String, String, String)>,
    /// Advice the run gives (stacking outside 5-100 tables, ids out of range, out of memory).
    pub warnings: Vec<String>,
    /// Peak HBM per chip by kind: what, bytes.
    pub memory_breakdown: Vec<(String, u64)>,
    /// Start-up time: table initialisation (host + PCIe, or on device), ps.
    pub startup_ps: u64,
    /// Which SparseCore partition is the straggler, and why.
    pub straggler: String,
    /// Functional mode with xla_sc_detect_nan: where the first NaN appeared.
    pub nan: Option<String>,
    /// Steps whose schedule was written out as a repeated period instead of simulated (0: every
    /// step was simulated). Diagnostics: no other field depends on it.
    pub extrapolated_steps: u64,
}

/// The program `simulate` would run for the workload, as data (resolve, work, program; no run).
pub fn program(w: &Workload, opts: &RunOptions) -> Result<stages::StepProgram, WorkloadError> {
    w.validate()?;
    w.check_bounds(&opts.bounds)?;
    let plan = resolve::resolve(w, opts.chip_overrides.as_ref())?;
    let work = work::run_work(&plan, opts.cache.as_ref())?;
    let dense = dense::dense_program(&plan)?;
    Ok(stages::step_program(&graph::build(&plan, &work, &dense)?))
}

/// Simulates the workload's steps and summarises them.
pub fn simulate(w: &Workload, opts: &RunOptions) -> Result<RunResult, WorkloadError> {
    w.validate()?;
    w.check_bounds(&opts.bounds)?;
    let plan = resolve::resolve(w, opts.chip_overrides.as_ref())?;
    let work = work::run_work(&plan, opts.cache.as_ref())?;
    let dense = dense::dense_program(&plan)?;
    // A sweep's runs of one shape rebuild one graph in place instead of building their own.
    let shape = opts.cache.as_ref().map(|_| graph::shape_key(&plan, &dense));
    let old = opts
        .cache
        .as_ref()
        .zip(shape.as_deref())
        .and_then(|(c, k)| c.take_graph::<graph::StepGraph>(k));
    let graph = graph::rebuild(&plan, &work, &dense, old)?;
    let (run, extrapolated_steps) = run_engine(&graph, work.period, opts.simulate_every_step)?;
    let mut measured = measure::measure(&plan, &graph, run, w.steps as usize);
    add_tc_phase_spans(&mut measured.recorder, &dense, plan.model.clock_hz as u64);
    if opts.record {
        add_sc_tile_spans(&mut measured.recorder, &graph, &plan.sc);
    }
    add_window_span(&graph, plan.spec().hbm_bytes_per_s, &mut measured);
    add_critical_spans(&graph, &mut measured);
    if let (Some(c), Some(k)) = (&opts.cache, shape) {
        c.keep_graph(k, graph);
    }
    add_staleness_flows(&mut measured.recorder, w, measured.step_count);
    let limits = limits::check(&plan, &work);
    let mem = memory::size(&plan, &work, &dense, &limits);
    let reasons = advice::fit_reasons(&plan, &mem, &limits.stacks, &work);
    let bottleneck = advice::bottleneck(&plan, &measured, &reasons);
    let steps = w.steps as u64;

    let (hbm_bytes, hbm_pad) = hbm_per_step(&plan, &work, &dense);
    let step_s = measured.step_ps as f64 / 1e12;
    let summary = RunSummary {
        step_time_us: measured.step_ps as f64 / 1e6,
        steady_steps: measured.steady_steps,
        warmup_steps: measured.warmup_steps,
        drain_steps: measure::drain_steps(w.host.prefetch) as u64,
        samples_per_s: if step_s > 0.0 {
            w.global_batch as f64 / step_s
        } else {
            0.0
        },
        busy_fraction: measured.busy.clone(),
        overlap_fraction: measured.overlap,
        hbm_bytes_per_step: hbm_bytes,
        hbm_padding_bytes_per_step: hbm_pad,
        peak_memory_bytes: mem.peak.clone(),
        capacity_bytes: mem.capacity.clone(),
        fits: reasons.is_empty(),
        fit_reasons: reasons,
        slice: plan.slice.to_string(),
        critical_path: measured
            .critical_path
            .iter()
            .map(|(s, ps)| CriticalStage {
                stage: s.key().to_string(),
                us_per_step: *ps as f64 / 1e6,
            })
            .collect(),
        limits: limits.stacks.clone(),
        minibatches_per_step: work
            .steps
            .iter()
            .flat_map(|s| s.minibatches.iter().copied())
            .max()
            .unwrap_or(1) as u64,
        dropped_ids_per_step: work.steps.iter().map(|s| s.dropped).sum::<u64>() / steps.max(1),
        limits_needed: limits.needed.clone(),
        step_time_low_us: None,
        step_time_high_us: None,
        dense_out_of_domain_fraction: None,
        loss: Vec::new(),
    };
    let summary = with_hlo_band(summary, &dense, plan.model.clock_hz);

    let startup_ps = startup_ps(&plan, &mem);
    let chip_constants = chip_constants(&plan);
    let padding_per_buffer = padding_per_buffer(&plan, &mem);
    let mut result = RunResult {
        summary,
        recorder: measured.recorder,
        bottleneck_stage: bottleneck.stage,
        bottleneck: bottleneck.sentence,
        chip_constants,
        padding_per_buffer,
        step_times: measured.step_times,
        knobs: Vec::new(),
        warnings: advice::warnings(&plan, &work, &mem),
        memory_breakdown: mem.breakdown.clone(),
        startup_ps,
        straggler: advice::straggler_text(&plan, &work),
        nan: None,
        extrapolated_steps,
    };
    if opts.functional {
        train_on_schedule(w, &mut result)?;
    }
    result.knobs = knob_report(&plan, &work, &mem, &limits, &result);
    Ok(result)
}

/// Trains the small functional model on the run's schedule: the loss per step, and a NaN as a
/// reason the run does not fit.
fn train_on_schedule(w: &Workload, result: &mut RunResult) -> Result<(), WorkloadError> {
    let t = crate::functional::train(w, &result.step_times)?;
    result.summary.loss = t.losses;
    if let Some(n) = t.nan {
        result.summary.fits = false;
        result.summary.fit_reasons.push(FitReason {
            kind: FitKind::Nan,
            message: n.clone(),
            needed_bytes: None,
            capacity_bytes: None,
        });
        result.nan = Some(n);
    }
    Ok(())
}

/// HBM traffic per step, bytes and padding bytes: the mean of the measured steps' SparseCore passes
/// plus the TensorCore kernels.
fn hbm_per_step(plan: &Plan, work: &work::RunWork, dense: &dense::DenseProgram) -> (u64, u64) {
    let spec = plan.spec();
    let (mut hbm_bytes, mut hbm_pad) = (0u64, 0u64);
    let counted = work.steps.len().max(1) as u64;
    for sw in &work.steps {
        for s in 0..spec.sparsecores_per_chip as usize {
            for (k, st) in plan.stacks.iter().enumerate() {
                let wk = sw.per_stack.get(k).and_then(|v| v.get(s)).copied().unwrap_or_default();
                let f = plan.sc.forward(wk, st.dim, st.elem_bytes);
                let b = plan.sc.backward(wk, st.dim, st.elem_bytes, st.optimizer);
                hbm_bytes += f.hbm_bytes + b.hbm_bytes;
                hbm_pad += f.hbm_padding_bytes + b.hbm_padding_bytes;
            }
        }
    }
    (hbm_bytes, hbm_pad) = (hbm_bytes / counted, hbm_pad / counted);
    for k in dense.kernels() {
        hbm_bytes += k.hbm_bytes;
        hbm_pad += k.hbm_bytes - k.hbm_unpadded.min(k.hbm_bytes);
    }
    (hbm_bytes, hbm_pad)
}

/// Start-up, ps: tables (with slots) initialised on the host and copied over PCIe (the two overlap
/// in chunks), or written on the device at HBM bandwidth.
fn startup_ps(plan: &Plan, mem: &memory::Memory) -> u64 {
    let (w, spec) = (&plan.w, plan.spec());
    let table_bytes = mem.sparsecore.tables_bytes;
    let on_device = w.enable_fast_table_initialization || !w.initialize_tables_on_host;
    if on_device {
        table_bytes.saturating_mul(1_000_000) / (spec.hbm_bytes_per_s / 1_000_000).max(1)
    } else {
        let fill = table_bytes.saturating_mul(1_000_000)
            / (plan.params().host_init_bytes_per_s_per_thread * w.host.threads as u64 / 1_000_000).max(1);
        let copy = table_bytes.saturating_mul(1_000_000) / (spec.host_link_bytes_per_s / 1_000_000).max(1);
        fill.max(copy)
    }
}

/// Every chip value and step parameter of the run: name, value, source.
fn chip_constants(plan: &Plan) -> Vec<(String, String, String)> {
    plan.chip
        .to_json()
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v["value"].to_string(),
                        v["source"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Each table's buffer, padded and unpadded bytes, named with its stack and optimizer slots.
fn padding_per_buffer(plan: &Plan, mem: &memory::Memory) -> Vec<(String, u64, u64)> {
    mem.sparsecore
        .tables
        .iter()
        .map(|(name, padded, unpadded)| {
            let opt = plan
                .sc_w
                .tables
                .iter()
                .find(|t| &t.name == name)
                .map_or(sim_sparsecore::model::Optimizer::Sgd, |t| t.optimizer);
            let stack = plan
                .stacks
                .iter()
                .find(|s| s.def.tables.iter().any(|t| &t.name == name))
                .map_or("", |s| s.def.name.as_str());
            (
                format!("table {name} in stack {stack} (+{} slots)", opt.slots()),
                *padded,
                *unpadded,
            )
        })
        .collect()
}

/// Runs the task graph; when every step's work repeats with `period` steps (NPZ ids,
/// [`work::RunWork::period`]) and `full` is off, as a repeating graph: once the engine's state at
/// the start of a step's SparseCore forward equals its state whole periods earlier, the steps the
/// graph still has room for are written out shifted and only the last ones are simulated
/// ([`sim_core::engine::Engine::run_repeating`]). That is exact: the future of a run is a function
/// of its state (heap, queues, transfers in flight, pending counts), and from step 1 on each
/// period's tasks are copies of the previous period's (same durations, bytes, dependencies
/// shifted), which the engine checks before relying on it. Every task's times, the spans and the
/// bandwidth counter samples are the full run's, so everything `measure` and the report read from
/// them is too. Returns the run and the number of steps written out.
fn run_engine(
    g: &graph::StepGraph,
    period: Option<u32>,
    full: bool,
) -> Result<(sim_core::engine::RunResult, u64), WorkloadError> {
    // Step 0 has no previous step to wait for (one task fewer): copies start at step 1.
    let watch = period.filter(|_| !full).and_then(|p| {
        Some((
            p,
            g.steps.get(1)?.sc_fwd_start,
            g.steps.get(1 + p as usize)?.sc_fwd_start,
        ))
    });
    let run = match watch {
        Some((_, anchor, again)) => g.engine.run_repeating(anchor, again),
        None => g.engine.run(),
    }
    .map_err(|e| WorkloadError::Run(e.to_string()))?;
    let steps = match (run.fast_forward, watch) {
        (Some(f), Some((p, ..))) => f.periods * f.strides * p as u64,
        _ => 0,
    };
    Ok((run, steps))
}

fn knob_report(
    plan: &Plan,
    work: &work::RunWork,
    mem: &memory::Memory,
    limits: &limits::LimitsOutcome,
    r: &RunResult,
) -> Vec<(String, String, String)> {
    let w = &plan.w;
    let params = plan.params();
    let sc_ps = |cycles: u64| plan.sc.cycles_to_ps(cycles);
    // Per-step costs of the debug knobs on SparseCore 0 and the host (first step).
    let (mut nan_cycles, mut quant_cycles) = (0u64, 0u64);
    if let Some(sw) = work.steps.first() {
        for (k, st) in plan.stacks.iter().enumerate() {
            let wk = sw.per_stack.get(k).and_then(|v| v.first()).copied().unwrap_or_default();
            let lanes = if st.elem_bytes == 2 {
                plan.sc.lanes_bf16
            } else {
                plan.sc.lanes_f32
            }
            .max(1) as u64;
            let row_pass = wk.ids * st.dim.div_ceil(lanes) / plan.sc.tiles.max(1) as u64;
            if w.xla_sc_detect_nan {
                nan_cycles += 2 * row_pass;
            }
            if w.quantization.is_some() {
                quant_cycles += 2 * row_pass;
            }
        }
    }
    let id_check_ps = if w.xla_sparse_core_enable_id_bound_check {
        work.steps.first().map_or(0, |s| {
            s.ids * params.host_id_bound_check_ps_per_id / 1000 / w.host.threads as u64 * 1000
        })
    } else {
        0
    };
    let collective_latency_ps = if w.chips > 1 {
        (params.ici_collective_launch_ns + params.ici_hop_latency_ns * plan.slice.diameter()) * 1000
    } else {
        0
    };
    crate::knobs::knob_report(
        w,
        &crate::knobs::KnobFacts {
            summary: r.summary.clone(),
            straggler: r.straggler.clone(),
            padding_per_buffer: r.padding_per_buffer.clone(),
            startup_ps: r.startup_ps,
            nan: r.nan.clone(),
        },
        &crate::knobs::KnobCosts {
            stacks: plan
                .stacks
                .iter()
                .map(|s| (s.def.name.clone(), s.def.tables.len()))
                .collect(),
            serial_groups: plan.serial_groups,
            sc_stack_peak: mem.sparsecore.stack_peak_bytes,
            stack_hbm: mem.sparsecore.stack_estimates.clone(),
            prefetched_bytes: mem.prefetched_bytes,
            id_check_ps,
            nan_check_ps: sc_ps(nan_cycles),
            quantization_ps: sc_ps(quant_cycles),
            table_ids_per_sc: work.table_ids_max.clone(),
            out_of_range: work.out_of_range_count,
            chip_buffer_fill: limits.chip_buffer_fill,
            collective_latency_ps,
        },
    )
}

/// Trace detail: each TensorCore kernel's stages as the TensorCore model computes them, on threads
/// labelled as model phases ("TC MXU (model)", ...) inside the kernel's span. They are not scheduled
/// by the engine: figures are read from the TensorCore's own spans only.
fn add_tc_phase_spans(rec: &mut Recorder, dense: &dense::DenseProgram, clock_hz: u64) {
    use sim_tpu::tensorcore::Unit;
    let kernels: Vec<&dense::Kernel> = dense.kernels().collect();
    let ps = |cycles: u64| cycles.saturating_mul(1_000_000) / (clock_hz / 1_000_000).max(1);
    let mut extra = Vec::new();
    for s in &rec.spans {
        let Some(tag) = s.tag.filter(|t| t.unit == TagUnit::TensorCore) else {
            continue;
        };
        let Some(k) = tag.kernel.and_then(|n| kernels.get(n as usize)) else {
            continue;
        };
        for p in &k.phases {
            let start = (s.start.0 + ps(p.start_cycle)).min(s.end.0);
            let end = (start + ps(p.cycles)).min(s.end.0);
            if end <= start {
                continue;
            }
            let unit = match p.unit {
                Unit::Mxu => "TC MXU (model)",
                Unit::Vpu => "TC VPU (model)",
                Unit::Hbm => "TC DMA (model)",
                Unit::Sequencer => "TC sequencer (model)",
            };
            let mut args = vec![
                ("cycles".to_string(), ArgValue::Int(p.cycles as i64)),
                ("busy_cycles".to_string(), ArgValue::Int(p.busy_cycles as i64)),
            ];
            if p.bytes > 0 {
                args.push(("bytes".to_string(), ArgValue::Int(p.bytes as i64)));
            }
            args.extend(s.args.iter().filter(|(k, _)| k == "step").cloned());
            extra.push(Span {
                track: sim_core::recorder::Track {
                    process: s.track.process.clone(),
                    thread: unit.to_string(),
                },
                name: format!("{} {} (model phase)", k.name, p.name),
                category: "tc_model_phase".into(),
                start: sim_core::time::SimTime(start),
                end: sim_core::time::SimTime(end),
                args,
                tag: Some(tag.on(TagUnit::TensorCorePhase)),
            });
        }
    }
    for sp in extra {
        rec.span(sp);
    }
}

/// The thread of tile `tile` of SparseCore `sc` in the trace.
pub fn sc_tile_thread(sc: usize, tile: usize) -> String {
    format!("SC {sc} tile {tile}")
}

/// Trace detail: each SparseCore pass split over its tiles as the SparseCore model deals the work
/// (ids and rows evenly, the first tiles taking the remainder), one thread per tile, each tile's
/// span starting with the pass and lasting its own compute cycles. The pass occupies the
/// SparseCore for the busiest tile's cycles; figures are read from the "SC N" threads only.
fn add_sc_tile_spans(rec: &mut Recorder, graph: &graph::StepGraph, sc: &sim_sparsecore::model::ScParams) {
    let mut extra = Vec::new();
    for s in &rec.spans {
        // The pass's compute on its SparseCore (not its HBM traffic).
        let Some((tag, unit, stage, step)) = s.tag.and_then(|t| match (t.unit, t.stage, t.step) {
            (TagUnit::SparseCore(n), Some(st), Some(step)) if st.is_sparsecore() => Some((t, n, st, step)),
            _ => None,
        }) else {
            continue;
        };
        let (unit, forward) = (unit as usize, stage == Stage::ScForward);
        let Some(tiles) = graph.sc_tile_cycles.get(&(unit, step as usize, forward)) else {
            continue;
        };
        for (t, &cycles) in tiles.iter().enumerate() {
            let end = (s.start.0 + sc.cycles_to_ps(cycles)).min(s.end.0);
            if end <= s.start.0 {
                continue;
            }
            extra.push(Span {
                track: sim_core::recorder::Track {
                    process: s.track.process.clone(),
                    thread: sc_tile_thread(unit, t),
                },
                name: format!("{} tile {t}", s.name),
                category: "sc_tile".into(),
                start: s.start,
                end: sim_core::time::SimTime(end),
                args: vec![
                    ("step".to_string(), ArgValue::Int(step as i64)),
                    ("cycles".to_string(), ArgValue::Int(cycles as i64)),
                ],
                tag: Some(tag.on(TagUnit::SparseCoreTile {
                    sc: unit as u32,
                    tile: t as u32,
                })),
            });
        }
    }
    for sp in extra {
        rec.span(sp);
    }
}

/// The thread holding the steady-state window in the trace.
pub const WINDOW_THREAD: &str = "measured window";

/// One span on its own thread over the steady-state window the run's fractions are measured in,
/// so a trace reader can add up busy time exactly where the summary did; with the HBM and ICI
/// capacities the bandwidth counters are read against.
fn add_window_span(graph: &graph::StepGraph, hbm_bytes_per_s: u64, m: &mut measure::Measured) {
    m.recorder.span(Span {
        track: sim_core::recorder::Track {
            process: graph.chip_process.clone(),
            thread: WINDOW_THREAD.to_string(),
        },
        name: "steady state: step time and busy fractions are measured here".into(),
        category: "window".into(),
        start: sim_core::time::SimTime(m.window_ps.0),
        end: sim_core::time::SimTime(m.window_ps.1),
        args: vec![
            ("step_ps".to_string(), ArgValue::Int(m.step_ps as i64)),
            ("busy_tc".to_string(), ArgValue::Float(m.busy.tc)),
            ("busy_sc".to_string(), ArgValue::Float(m.busy.sc)),
            ("busy_host".to_string(), ArgValue::Float(m.busy.host)),
            ("util_hbm".to_string(), ArgValue::Float(m.busy.hbm)),
            ("util_ici".to_string(), ArgValue::Float(m.busy.ici)),
            ("hbm_bytes_per_s".to_string(), ArgValue::Int(hbm_bytes_per_s as i64)),
            (
                "ici_bytes_per_s".to_string(),
                ArgValue::Int(graph.ici_bytes_per_s as i64),
            ),
        ],
        tag: Some(SpanTag {
            unit: TagUnit::MeasuredWindow,
            stage: None,
            step: None,
            kernel: None,
        }),
    });
}

/// The thread holding the critical path in the trace and the figures.
pub const CRITICAL_THREAD: &str = "critical path";

/// The critical path of the measured window as spans on their own thread, one per segment: named
/// by what the time is charged to, with the stage (`stage`) and the stage of the task it lies in
/// (`row`, where a figure draws it). The bottleneck sentence's figures are these spans summed per
/// stage over the steady steps.
fn add_critical_spans(graph: &graph::StepGraph, m: &mut measure::Measured) {
    for seg in &m.critical_segments {
        m.recorder.span(Span {
            track: sim_core::recorder::Track {
                process: graph.chip_process.clone(),
                thread: CRITICAL_THREAD.to_string(),
            },
            name: seg.stage.describe().to_string(),
            category: "critical".into(),
            start: sim_core::time::SimTime(seg.start),
            end: sim_core::time::SimTime(seg.end),
            args: vec![
                (graph::STAGE_ARG.to_string(), ArgValue::Text(seg.stage.key().into())),
                ("row".to_string(), ArgValue::Text(seg.task_stage.key().into())),
                ("steady_steps".to_string(), ArgValue::Int(m.steady_steps as i64)),
            ],
            tag: Some(SpanTag {
                unit: TagUnit::CriticalPath(seg.task_stage),
                stage: Some(seg.stage),
                step: None,
                kernel: None,
            }),
        });
    }
}

/// Flow arrows: in pipelined mode, SC backward of step i feeds SC forward of step i+2.
fn add_staleness_flows(rec: &mut Recorder, w: &Workload, steps: usize) {
    if w.pipelining != Pipelining::Pipelined {
        return;
    }
    // The first span of each (direction, step) on SparseCore 0, in one pass over the spans.
    let mut first: HashMap<(bool, i64), usize> = HashMap::new();
    for (k, s) in rec.spans.iter().enumerate() {
        if let Some(SpanTag {
            unit: TagUnit::SparseCore(0),
            stage: Some(st),
            step: Some(step),
            ..
        }) = s.tag
        {
            if st.is_sparsecore() {
                first.entry((st == Stage::ScForward, step as i64)).or_insert(k);
            }
        }
    }
    for i in 0..steps as i64 - 2 {
        if let (Some(&a), Some(&b)) = (first.get(&(false, i)), first.get(&(true, i + 2))) {
            rec.flow(
                sim_core::recorder::SpanId(a),
                sim_core::recorder::SpanId(b),
                sim_core::summary::STALENESS,
            );
        }
    }
}

/// The step time's band when the TensorCore program is a user's HLO: the step time with the program's kernels
/// at either end of their band, each cycle moved on or off the critical path (an outer bound: kernels off the
/// critical path move the step less).
fn with_hlo_band(mut s: RunSummary, dense: &dense::DenseProgram, clock_hz: f64) -> RunSummary {
    if let Some(b) = dense.hlo_band {
        let us = |cycles: u64| cycles as f64 / clock_hz.max(1.0) * 1e6;
        s.step_time_low_us = Some((s.step_time_us - us(b.cycles.saturating_sub(b.cycles_low))).max(0.0));
        s.step_time_high_us = Some(s.step_time_us + us(b.cycles_high.saturating_sub(b.cycles)));
        s.dense_out_of_domain_fraction = Some(b.out_of_domain_fraction);
    }
    s
}
