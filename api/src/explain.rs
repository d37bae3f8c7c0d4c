//! `tpusim explain --json`: the numbers behind the teaching views.

use serde_json::{json, Value};
use sim_sparsecore::preprocess::{build_stacks, preprocess, BatchIds, Options, PreprocessSpec};
use workloads::{simulate, Pipelining, RunOptions, RunResult, Workload};

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
