//! `tpusim explain --json`: the numbers behind the teaching views.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{json, Value};
use sim_sparsecore::preprocess::{build_stacks, preprocess, BatchIds, Options, PreprocessSpec};
use workloads::{simulate, Pipelining, RunOptions, RunResult, Workload};

/// What pipelined embeddings are, in words (`explain pipelining`, the lesson page).
pub use sim_core::summary::STALENESS;

/// One workload run sequential and pipelined (the pipelining lesson).
pub struct PipeliningRuns {
    /// The workload (pipelining as last run).
    pub workload: Workload,
    /// Sequential schedule.
    pub sequential: RunResult,
    /// Pipelined schedule.
    pub pipelined: RunResult,
}

/// Runs a preset sequential and pipelined for `steps` steps (at least 3, so a steady state shows).
pub fn pipelining_runs(preset: &str, steps: u32) -> crate::Result<PipeliningRuns> {
    let mut w = Workload::preset(preset).map_err(anyhow::Error::from)?;
    w.steps = steps.max(3);
    w.pipelining = Pipelining::Sequential;
    let sequential = simulate(&w, &RunOptions::default()).map_err(anyhow::Error::from)?;
    w.pipelining = Pipelining::Pipelined;
    let pipelined = simulate(&w, &RunOptions::default()).map_err(anyhow::Error::from)?;
    Ok(PipeliningRuns {
        workload: w,
        sequential,
        pipelined,
    })
}

/// `explain pipelining --json`: `{"workload", "steps", "sequential_step_time_us",
/// "pipelined_step_time_us", "speedup", "gradient_staleness_steps"}`.
pub fn pipelining_json(r: &PipeliningRuns) -> Value {
    let (seq, pip) = (r.sequential.summary.step_time_us, r.pipelined.summary.step_time_us);
    json!({
        "workload": r.workload.name,
        "steps": r.workload.steps,
        "sequential_step_time_us": seq,
        "pipelined_step_time_us": pip,
        "speedup": if pip > 0.0 { seq / pip } else { 0.0 },
        // Pipelined: SC forward of step i+1 runs before SC backward of step i lands.
        "gradient_staleness_steps": 2,
    })
}

/// `explain limits --json`: per stack, its limits and per partition the maxima one batch reaches
/// (limits lifted so nothing aborts): `{"num_scs", "stacks": [{"stack", "max_ids_per_partition",
/// "max_unique_ids_per_partition", "partitions": [{"partition", "max_ids", "max_unique_ids",
/// "over_limit"}], "ids_per_sc", "required_buffer_sizes"}]}`.
pub fn limits_json(spec: &PreprocessSpec, ids: &BatchIds) -> crate::Result<Value> {
    sim_sparsecore::crosscheck::check_vocabulary(spec, ids).map_err(anyhow::Error::from)?;
    let mut open = spec.clone();
    open.allow_id_dropping = true;
    open.enable_minibatching = false;
    let out = preprocess(&open, ids, Options { stats_only: true }).map_err(anyhow::Error::from)?;
    let built = build_stacks(spec);
    let mut stacks = Vec::new();
    for (stack, o) in &out.stacks {
        let st = built.iter().find(|s| &s.name == stack);
        let (lim, ulim) = st.map_or((0, 0), |s| (s.max_ids_per_partition, s.max_unique_ids_per_partition));
        let partitions: Vec<Value> = o
            .max_ids_per_partition
            .iter()
            .zip(&o.max_unique_ids_per_partition)
            .enumerate()
            .map(|(p, (a, b))| {
                json!({"partition": p, "max_ids": a, "max_unique_ids": b, "over_limit": *a > lim || *b > ulim})
            })
            .collect();
        stacks.push(json!({
            "stack": stack,
            "max_ids_per_partition": lim,
            "max_unique_ids_per_partition": ulim,
            "partitions": partitions,
            "ids_per_sc": o.ids_per_sc,
            "required_buffer_sizes": o.required_buffer_sizes,
        }));
    }
    Ok(json!({"num_scs": spec.num_scs(), "stacks": stacks}))
}

/// `demo --json`: the headline numbers of the demo's two runs and the files it wrote.
pub fn demo_json(w: &Workload, sequential: &RunResult, pipelined: &RunResult, files: &[std::path::PathBuf]) -> Value {
    let (seq, pip) = (&sequential.summary, &pipelined.summary);
    json!({
        "workload": w.name,
        "chip": w.chip,
        "chips": w.chips,
        "global_batch": w.global_batch,
        "steps": w.steps,
        "sequential_step_time_us": seq.step_time_us,
        "pipelined_step_time_us": pip.step_time_us,
        "speedup": if pip.step_time_us > 0.0 { seq.step_time_us / pip.step_time_us } else { 0.0 },
        "samples_per_s": pip.samples_per_s,
        "overlap_fraction": pip.overlap_fraction,
        "loss_sequential": seq.loss,
        "loss_pipelined": pip.loss,
        "fits": pip.fits,
        "fit_reasons": pip.fit_reasons,
        "bottleneck": pipelined.bottleneck,
        "files": files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
    })
}

/// The demo's two runs of `dlrm-small` and the files written.
pub struct Demo {
    /// The workload (pipelined, as last run).
    pub workload: Workload,
    /// Sequential schedule.
    pub sequential: RunResult,
    /// Pipelined schedule.
    pub pipelined: RunResult,
    /// The files written: report.html, report.md, summary.json, gantt.svg, trace.json.
    pub files: Vec<PathBuf>,
}

/// `tpusim demo`: runs `dlrm-small` sequential and pipelined with the functional model and writes the
/// report and the pipelined run's trace into `out` (checked before the runs).
pub fn demo(out: &Path) -> crate::Result<Demo> {
    let mut names: Vec<&str> = reports::REPORT_FILES.to_vec();
    names.push("trace.json");
    sim_core::output::check_dir(out, &names).with_context(|| format!("--out {}", out.display()))?;
    let mut w = Workload::preset("dlrm-small").map_err(anyhow::Error::from)?;
    w.pipelining = Pipelining::Sequential;
    let opts = RunOptions {
        functional: true,
        record: true,
        chip_overrides: None,
        cache: None,
        bounds: Default::default(),
        simulate_every_step: false,
    };
    let sequential = crate::run::simulate(&w, &opts)?;
    w.pipelining = Pipelining::Pipelined;
    let pipelined = crate::run::simulate(&w, &opts)?;
    sim_core::output::create_dir_all(out).with_context(|| out.display().to_string())?;
    let trace = out.join("trace.json");
    crate::run::write_trace(&pipelined, &trace)?;
    let runs = [("sequential", &sequential), ("pipelined", &pipelined)];
    let paths = crate::run::write_report(out, &w, &runs, &pipelined)?;
    let files = vec![paths.html, paths.markdown, paths.summary, paths.gantt, trace];
    Ok(Demo {
        workload: w,
        sequential,
        pipelined,
        files,
    })
}

/// The pipelining lesson page (`explain pipelining --html`): the default slider grid run on the
/// engine, embedded as JSON.
pub fn lesson_page() -> crate::Result<String> {
    let grid = workloads::lesson::run_grid(&workloads::lesson::LessonAxes::default()).map_err(anyhow::Error::from)?;
    let grid = serde_json::to_string(&grid).map_err(anyhow::Error::from)?;
    Ok(reports::lesson_html(&grid))
}

/// Draws the two schedules of [`pipelining_runs`] as one Gantt figure: the SVG at `svg` (its
/// extension made `.svg`) and the PNG beside it; returns both paths.
pub fn write_pipelining_figure(r: &PipeliningRuns, svg: &Path) -> crate::Result<(PathBuf, PathBuf)> {
    let (seq, pip) = (&r.sequential, &r.pipelined);
    let title = format!(
        "{}: sequential vs pipelined ({:.2}x)",
        r.workload.name,
        seq.summary.step_time_us / pip.summary.step_time_us
    );
    let gantt = reports::Gantt {
        title,
        panels: vec![
            ("sequential", &seq.recorder, seq.summary.step_time_us),
            ("pipelined", &pip.recorder, pip.summary.step_time_us),
        ],
    };
    let svg = svg.with_extension("svg");
    let png = reports::plot::png_path(&svg);
    reports::plot::write_figure(&svg, &gantt).with_context(|| svg.display().to_string())?;
    Ok((svg, png))
}

/// One stack in `explain limits`: its limits and the counts one batch reaches.
pub struct StackWalk {
    /// The stack's name.
    pub stack: String,
    /// Its `max_ids_per_partition` (0 when the spec builds no such stack).
    pub max_ids_per_partition: u32,
    /// Its `max_unique_ids_per_partition`.
    pub max_unique_ids_per_partition: u32,
    /// The batch's preprocessing statistics for it (limits lifted so nothing aborts).
    pub output: crate::preprocess::StackOutput,
}

/// `explain limits`: one batch walked through COO conversion, sharding, dedup and counting.
pub struct LimitsWalk {
    /// SparseCores in all.
    pub num_scs: u32,
    /// SparseCores per device.
    pub num_sc_per_device: u32,
    /// Per stack, in the output's order.
    pub stacks: Vec<StackWalk>,
}

/// Reads the id batch at `path` for `explain limits` (shapes checked against the spec first) and
/// counts it per partition with the limits lifted.
pub fn limits_walk(spec: &PreprocessSpec, ids_path: &Path) -> crate::Result<LimitsWalk> {
    sim_sparsecore::crosscheck::check_npz_shapes(spec, ids_path).map_err(anyhow::Error::from)?;
    let ids = sim_sparsecore::preprocess::read_npz(ids_path).with_context(|| ids_path.display().to_string())?;
    sim_sparsecore::crosscheck::check_vocabulary(spec, &ids).with_context(|| ids_path.display().to_string())?;
    let mut open = spec.clone();
    open.allow_id_dropping = true;
    open.enable_minibatching = false;
    let out = preprocess(&open, &ids, Options { stats_only: true }).map_err(anyhow::Error::from)?;
    let built = build_stacks(spec);
    let stacks = out
        .stacks
        .into_iter()
        .map(|(stack, output)| {
            let st = built.iter().find(|s| s.name == stack);
            let (lim, ulim) = st.map_or((0, 0), |s| (s.max_ids_per_partition, s.max_unique_ids_per_partition));
            StackWalk {
                stack,
                max_ids_per_partition: lim,
                max_unique_ids_per_partition: ulim,
                output,
            }
        })
        .collect();
    Ok(LimitsWalk {
        num_scs: spec.num_scs(),
        num_sc_per_device: spec.num_sc_per_device,
        stacks,
    })
}

/// `explain limits --json` for the id batch in the NPZ file at `ids_path`.
pub fn limits_json_file(spec: &PreprocessSpec, ids_path: &Path) -> crate::Result<Value> {
    let ids = sim_sparsecore::preprocess::read_npz(ids_path).with_context(|| ids_path.display().to_string())?;
    limits_json(spec, &ids)
}
