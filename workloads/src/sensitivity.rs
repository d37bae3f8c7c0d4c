//! How much a run's step time hangs on the assumed constants: the workload run again with each
//! assumed value halved and doubled (within physical bounds), and with all of them at once.

use rayon::prelude::*;
use serde::Serialize;
use sim_tpu::chips::Chip;

use crate::cache::RunCache;
use crate::contention::{grown, overlaps, Overlaps};
use crate::program::{simulate, RunOptions};
use crate::spec::{Workload, WorkloadError};

/// One assumption's effect.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AssumptionEffect {
    /// The chip field or step parameter.
    pub name: String,
    /// Its value in the run.
    pub value: serde_json::Value,
    /// Its source: an assumption, or a calibration on another chip.
    pub source: String,
    /// Step time with the value halved, us.
    pub halved_step_time_us: f64,
    /// Step time with the value doubled (or at its physical bound), us.
    pub doubled_step_time_us: f64,
    /// Largest relative change of the step time either way.
    pub swing: f64,
    /// When halving and doubling both move the step time the same way: the shared bandwidth whose
    /// contention grew most in the variant that runs against the trend (none otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contention: Option<ContentionNote>,
}

/// Why a step got slower when an assumed value changed the "wrong" way: two stages share a bandwidth
/// at once for longer than with the value as given.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContentionNote {
    /// Which run: `halved` or `doubled`.
    pub variant: String,
    /// The bandwidth they share (`HBM`, `ICI links (same dimension and direction)`).
    pub resource: String,
    /// The two stages (`all_to_all`, `all_reduce`, ...).
    pub stages: [String; 2],
    /// How much longer they share it than with the value as given, us per step.
    pub extra_overlap_us_per_step: f64,
    /// The same for a person.
    pub note: String,
}

/// The sensitivity of a run (the JSON of `tpusim run --sensitivity --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sensitivity {
    /// Step time with every value as given, us.
    pub step_time_us: f64,
    /// Step time with every assumed value halved, and doubled, us (min, max of the two).
    pub range_us: [f64; 2],
    /// Per assumption, largest swing first.
    pub assumptions: Vec<AssumptionEffect>,
    /// The assumptions the answer hangs on: those that move the step time by 5% or more.
    pub dominant: Vec<String>,
}

/// The chip's uncertain numeric values: assumed, or calibrated on another chip
/// ([`Chip::uncertain`]), each with its source as text.
pub fn assumed_values(chip: &Chip) -> Vec<(String, serde_json::Value, String)> {
    let json = chip.to_json();
    chip.uncertain()
        .into_iter()
        .filter_map(|(k, source)| {
            let v = json.get(k)?.get("value")?;
            v.is_number().then(|| (k.to_string(), v.clone(), source.to_string()))
        })
        .collect()
}

/// The value scaled by `factor`, kept within physical bounds (a share stays at most 1; integers at
/// least 1 when they were).
fn scaled(name: &str, v: &serde_json::Value, factor: f64) -> serde_json::Value {
    if let Some(u) = v.as_u64() {
        let x = (u as f64 * factor).round() as u64;
        serde_json::Value::from(if u > 0 { x.max(1) } else { 0 })
    } else {
        let f = v.as_f64().unwrap_or(0.0) * factor;
        let bounded = if name.ends_with("_share") { f.min(1.0) } else { f };
        serde_json::json!(bounded)
    }
}

fn merged(base: Option<&serde_json::Value>, extra: serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    let mut m = base.and_then(|b| b.as_object().cloned()).unwrap_or_default();
    m.extend(extra);
    serde_json::Value::Object(m)
}

fn step_us(w: &Workload, overrides: serde_json::Value, cache: &RunCache) -> Result<f64, WorkloadError> {
    Ok(step_run(w, overrides, cache)?.0)
}

/// The step time, us, and where stages shared a bandwidth, of the workload with `overrides`.
fn step_run(w: &Workload, overrides: serde_json::Value, cache: &RunCache) -> Result<(f64, Overlaps), WorkloadError> {
    // Assumed constants change timing, not ids or preprocessing: the runs share both.
    let o = RunOptions {
        chip_overrides: Some(overrides),
        cache: Some(cache.clone()),
        ..Default::default()
    };
    let r = simulate(w, &o)?;
    let shared = overlaps(&r.recorder, r.summary.steady_steps);
    Ok((r.summary.step_time_us, shared))
}

/// Relative change below which a step time counts as unchanged.
const UNCHANGED: f64 = 0.005;

/// With halving and doubling both slowing the step: for each, the pair of stages whose shared
/// bandwidth time grew most, when it grew by at least [`UNCHANGED`] of the step.
fn contention(base: (f64, &Overlaps), halved: (f64, &Overlaps), doubled: (f64, &Overlaps)) -> Option<ContentionNote> {
    let d = |t: f64| (t - base.0) / base.0.max(1e-9);
    if !(d(halved.0) > UNCHANGED && d(doubled.0) > UNCHANGED) {
        return None;
    }
    [("halved", halved), ("doubled", doubled)]
        .into_iter()
        .filter_map(|(variant, (_, o))| {
            let ((res, a, b), ps) = grown(base.1, o)?;
            let us = ps as f64 / 1e6;
            (us >= UNCHANGED * base.0).then(|| ContentionNote {
                variant: variant.into(),
                resource: res.describe().into(),
                stages: [a.key().into(), b.key().into()],
                extra_overlap_us_per_step: us,
                note: format!(
                    "{variant}, the step is slower: the {} and the {} share {} at once {us:.1} µs longer per step",
                    a.describe(),
                    b.describe(),
                    res.describe()
                ),
            })
        })
        .max_by(|x, y| x.extra_overlap_us_per_step.total_cmp(&y.extra_overlap_us_per_step))
}

fn chip_of(w: &Workload, opts: &RunOptions) -> Result<Chip, WorkloadError> {
    let chip = Chip::preset(&w.chip).map_err(|e| WorkloadError::Spec(e.to_string()))?;
    match &opts.chip_overrides {
        Some(o) => chip.with_overrides(o).map_err(|e| WorkloadError::Spec(e.to_string())),
        None => Ok(chip),
    }
}

/// Share of a run's critical path held by stages that rest on assumed constants only (kernel
/// launches, collective latency).
pub fn assumed_share(r: &crate::RunResult) -> f64 {
    let total: f64 = r.summary.critical_path.iter().map(|c| c.us_per_step).sum();
    let assumed: f64 = r
        .summary
        .critical_path
        .iter()
        .filter(|c| c.stage == "kernel_launch" || c.stage == "collective_latency")
        .map(|c| c.us_per_step)
        .sum();
    assumed / total.max(1e-9)
}

/// Step times with every assumed value halved and with every one doubled, us (lower, higher).
pub fn assumption_range(w: &Workload, opts: &RunOptions) -> Result<[f64; 2], WorkloadError> {
    let chip = chip_of(w, opts)?;
    let values = assumed_values(&chip);
    let cache = opts.cache.clone().unwrap_or_default();
    let all = |factor: f64| {
        values
            .iter()
            .map(|(k, v, _)| (k.clone(), scaled(k, v, factor)))
            .collect::<serde_json::Map<_, _>>()
    };
    let (a, b) = rayon::join(
        || step_us(w, merged(opts.chip_overrides.as_ref(), all(0.5)), &cache),
        || step_us(w, merged(opts.chip_overrides.as_ref(), all(2.0)), &cache),
    );
    let (a, b) = (a?, b?);
    Ok([a.min(b), a.max(b)])
}

/// Runs the workload with each assumed value halved and doubled.
pub fn sensitivity(w: &Workload, opts: &RunOptions) -> Result<Sensitivity, WorkloadError> {
    let chip = chip_of(w, opts)?;
    let cache = opts.cache.clone().unwrap_or_default();
    let (base, base_shared) = step_run(w, merged(opts.chip_overrides.as_ref(), Default::default()), &cache)?;
    let values = assumed_values(&chip);
    let mut assumptions = values
        .par_iter()
        .map(|(k, v, source)| {
            let one = |factor: f64| {
                let mut m = serde_json::Map::new();
                m.insert(k.clone(), scaled(k, v, factor));
                step_run(w, merged(opts.chip_overrides.as_ref(), m), &cache)
            };
            let ((lo, lo_shared), (hi, hi_shared)) = (one(0.5)?, one(2.0)?);
            let swing = ((lo - base).abs().max((hi - base).abs())) / base.max(1e-9);
            Ok(AssumptionEffect {
                name: k.clone(),
                value: v.clone(),
                source: source.clone(),
                halved_step_time_us: lo,
                doubled_step_time_us: hi,
                swing,
                contention: contention((base, &base_shared), (lo, &lo_shared), (hi, &hi_shared)),
            })
        })
        .collect::<Result<Vec<_>, WorkloadError>>()?;
    assumptions.sort_by(|a, b| b.swing.total_cmp(&a.swing).then(a.name.cmp(&b.name)));
    let dominant = assumptions
        .iter()
        .filter(|a| a.swing >= 0.05)
        .map(|a| a.name.clone())
        .collect();
    Ok(Sensitivity {
        step_time_us: base,
        range_us: assumption_range(
            w,
            &RunOptions {
                cache: Some(cache.clone()),
                ..opts.clone()
            },
        )?,
        assumptions,
        dominant,
    })
}
