//! `tpusim sweep`: capacity sweeps over chips, chip counts and batch sizes. A sweep is a [`SweepPlan`]
//! (the base workload and the configurations, in a fixed order); each configuration runs on its own
//! ([`run_config`]), so the configurations can be spread over threads, Ray tasks or batch-scheduler
//! shards and merged back into the same outputs.

use std::path::{Path, PathBuf};

use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use workloads::cache::RunCache;
use workloads::{RunOptions, Workload};

pub use reports::sweep::{SweepPoint, SWEEP_FILES};

use crate::run::{load_workload, RunRequest};

/// What to sweep.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepRequest {
    /// Workload file (TOML or JSON); exclusive with `preset`.
    pub workload: Option<PathBuf>,
    /// A built-in workload.
    pub preset: Option<String>,
    /// Chips (v4, v5p, v6e, tpu7x).
    pub chip: Vec<String>,
    /// Chip counts (powers of two).
    pub chips: Vec<u32>,
    /// Global batches.
    pub batches: Vec<u64>,
    /// A limits file or FDO directory applied to every configuration.
    pub limits: Option<PathBuf>,
    /// Steps per configuration.
    pub steps: u32,
    /// Target samples/s for the cheapest-configuration answer (finite, above 0).
    pub target: Option<f64>,
    /// Price overrides, `CHIP=PRICE` (CHIP one of [`DEFAULT_PRICES`], PRICE finite and >= 0).
    pub prices: Vec<String>,
    /// `KEY=VALUE` workload overrides for every configuration.
    pub set: Vec<String>,
    /// Steps and ids each configuration may take on.
    pub bounds: workloads::spec::RunBounds,
    /// Largest number of configurations (0: the default, 100,000).
    pub max_configs: u64,
}

/// Configurations a sweep runs unless raised with `--max-configs`.
pub const DEFAULT_MAX_CONFIGS: u64 = 100_000;

/// One configuration of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Chip preset.
    pub chip: String,
    /// Chip count.
    pub chips: u32,
    /// Global batch.
    pub batch: u64,
}

/// A sweep ready to run: everything a worker on another machine needs (paths in it are absolute).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPlan {
    /// The workload every configuration starts from.
    pub base: Workload,
    /// Chips, in the order given (the summary's row order).
    pub chip: Vec<String>,
    /// Chip counts, in the order given.
    pub chips: Vec<u32>,
    /// The configurations: chip, then chip count, then batch, nested in that order.
    pub configs: Vec<Config>,
    /// Price per chip-hour of every priced chip preset, with currency and source.
    pub prices: Vec<Price>,
    /// Target samples/s.
    pub target: Option<f64>,
    /// Chip preset and step-parameter overrides for every chip (`--set chip.FIELD=VALUE`).
    pub chip_overrides: Option<serde_json::Value>,
    /// Steps and ids each configuration may take on.
    #[serde(default)]
    pub bounds: workloads::spec::RunBounds,
}

/// Parses "4096,8192" or "4096..65536x2" (FROM..TOxFACTOR, geometric).
pub fn parse_batches(text: &str) -> crate::Result<Vec<u64>> {
    Ok(parse_batches_inner(text)?)
}

fn parse_batches_inner(text: &str) -> anyhow::Result<Vec<u64>> {
    if let Some((from, rest)) = text.split_once("..") {
        let (to, factor) = rest.split_once('x').unwrap_or((rest, "2"));
        let num = |s: &str| -> anyhow::Result<u64> {
            s.trim()
                .parse()
                .with_context(|| format!("--batch {text}: '{}' is not a number", s.trim()))
        };
        let (from, to, factor) = (num(from)?, num(to)?, num(factor)?);
        if from == 0 || factor < 2 || to < from {
            anyhow::bail!("--batch {text}: need 0 < FROM <= TO and FACTOR >= 2");
        }
        let mut v = Vec::new();
        let mut b = from;
        while b <= to {
            v.push(b);
            b = match b.checked_mul(factor) {
                Some(n) => n,
                None => break,
            };
        }
        Ok(v)
    } else {
        text.split(',')
            .map(|x| {
                x.trim()
                    .parse::<u64>()
                    .with_context(|| format!("--batch: '{x}' is not a number"))
            })
            .collect()
    }
}

/// Refuses a batch no workload can have (0, or more samples per step than a workload may name),
/// naming `--batch`: a bound of the flag, not a point that failed.
fn check_batches(batches: &[u64]) -> anyhow::Result<()> {
    let max = workloads::spec::MAX_GLOBAL_BATCH;
    if let Some(b) = batches.iter().find(|&&b| b == 0 || b > max) {
        anyhow::bail!("--batch {b}: global_batch must be 1 to {max} samples per step");
    }
    Ok(())
}

/// Builds the plan of a request: loads and checks the workload, chips and prices.
pub fn plan(req: &SweepRequest) -> crate::Result<SweepPlan> {
    Ok(plan_inner(req)?)
}

fn plan_inner(req: &SweepRequest) -> anyhow::Result<SweepPlan> {
    // Absolute paths, so a worker with another working directory reads the same files.
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let run_req = RunRequest {
        workload: req.workload.as_deref().map(absolute),
        preset: req.preset.clone(),
        steps: Some(req.steps),
        set: req.set.clone(),
        ..Default::default()
    };
    let mut base = load_workload(&run_req)?;
    // `--set chip.FIELD=VALUE` applies to every chip of the sweep.
    let chip_overrides = crate::run::run_options(&run_req, None, false)?.chip_overrides;
    if let Some(file) = &req.limits {
        if !file.exists() {
            anyhow::bail!("--limits {}: no such file or directory", file.display());
        }
        base.limits.file = Some(absolute(file));
    }
    let prices = prices::prices(&req.prices)?;
    prices::check_target(req.target)?;
    for c in &req.chip {
        sim_tpu::chips::preset_name(c)?;
    }
    if req.chip.is_empty() || req.chips.is_empty() || req.batches.is_empty() {
        anyhow::bail!("a sweep needs at least one chip, one chip count and one batch");
    }
    let max_configs = if req.max_configs == 0 {
        DEFAULT_MAX_CONFIGS
    } else {
        req.max_configs
    };
    let count = (req.chip.len() as u128) * (req.chips.len() as u128) * (req.batches.len() as u128);
    if count > max_configs as u128 {
        anyhow::bail!(
            "--chip x --chips x --batch make {count} configurations, more than the {max_configs} a sweep runs; raise the bound with --max-configs"
        );
    }
    check_batches(&req.batches)?;
    // Stated bounds first: steps and ids of every configuration, before any id is generated.
    base.check_bounds(&req.bounds)?;
    let mut configs = Vec::new();
    for c in &req.chip {
        for &n in &req.chips {
            for &b in &req.batches {
                configs.push(Config {
                    chip: c.clone(),
                    chips: n,
                    batch: b,
                });
            }
        }
    }
    for c in &configs {
        if c.chips == 0 {
            continue; // refused per configuration by the workload's own checks
        }
        let mut w = base.clone();
        if w.chips != c.chips {
            w.topology = None;
        }
        (w.chip, w.chips, w.global_batch) = (c.chip.clone(), c.chips, c.batch);
        if w.validate().is_err() {
            continue; // an invalid configuration is a point with its error, not a bound
        }
        w.check_bounds(&req.bounds)
            .with_context(|| format!("{} x {} at batch {}", c.chips, c.chip, c.batch))?;
    }
    Ok(SweepPlan {
        base,
        chip: req.chip.clone(),
        chips: req.chips.clone(),
        configs,
        prices,
        target: req.target,
        chip_overrides,
        bounds: req.bounds,
    })
}

/// Simulates configuration `index` of a plan. A configuration that cannot run is a point with its
/// error; an index outside the plan is an error.
pub fn run_config(plan: &SweepPlan, index: usize) -> crate::Result<SweepPoint> {
    run_config_shared(plan, index, &RunCache::new())
}

/// [`run_config`] sharing generated ids and step work with the other configurations that use
/// `cache` (the results are the same without it).
pub fn run_config_shared(plan: &SweepPlan, index: usize, cache: &RunCache) -> crate::Result<SweepPoint> {
    let cfg = plan.configs.get(index).ok_or_else(|| {
        anyhow::anyhow!(
            "configuration {index} does not exist: the sweep has {}",
            plan.configs.len()
        )
    })?;
    let mut w: Workload = plan.base.clone();
    w.chip = cfg.chip.clone();
    if w.chips != cfg.chips {
        w.topology = None;
    }
    w.chips = cfg.chips;
    w.global_batch = cfg.batch;
    let mut p = SweepPoint {
        chip: cfg.chip.clone(),
        chips: cfg.chips,
        batch: cfg.batch,
        step_time_us: 0.0,
        samples_per_s: 0.0,
        fits: false,
        fit_reasons: Vec::new(),
        bottleneck: String::new(),
        needed_max_ids: 0,
        needed_max_unique_ids: 0,
        cost_per_hour: 0.0,
        error: None,
        minibatches_per_step: 0,
        limits: Vec::new(),
        price_per_chip_hour: 0.0,
        currency: String::new(),
        price_source: PriceSource::Assumed,
    };
    price_point(&mut p, &plan.prices);
    match w.validate().map_err(anyhow::Error::from).and_then(|_| {
        Ok(workloads::simulate(
            &w,
            &RunOptions {
                chip_overrides: plan.chip_overrides.clone(),
                cache: Some(cache.clone()),
                bounds: plan.bounds,
                ..Default::default()
            },
        )?)
    }) {
        Ok(r) => {
            let needed = |f: fn(&sim_core::summary::StackVerdict) -> u64| {
                r.summary.limits.iter().map(f).max().unwrap_or(0).div_ceil(8) * 8
            };
            p.step_time_us = r.summary.step_time_us;
            p.samples_per_s = r.summary.samples_per_s;
            p.fits = r.summary.fits;
            p.fit_reasons = r.summary.fit_reasons.clone();
            p.needed_max_ids = needed(|l| l.observed_max_ids);
            p.needed_max_unique_ids = needed(|l| l.observed_max_unique_ids);
            p.minibatches_per_step = r.summary.minibatches_per_step;
            p.limits = r
                .summary
                .limits
                .iter()
                .map(|l| reports::sweep::PointLimits {
                    stack: l.stack.clone(),
                    max_ids_per_partition: l.max_ids_per_partition,
                    max_unique_ids_per_partition: l.max_unique_ids_per_partition,
                    runtime: l.runtime,
                })
                .collect();
            p.bottleneck = r.bottleneck;
        }
        Err(e) => p.error = Some(format!("{e:#}")),
    }
    Ok(p)
}

/// Simulates the configurations `indices` of a plan on `jobs` threads (None: all cores), in the
/// order given; `on_done` is called after each (a progress bar).
pub fn run_configs(
    plan: &SweepPlan,
    indices: &[usize],
    jobs: Option<usize>,
    on_done: &(dyn Fn() + Sync),
) -> crate::Result<Vec<SweepPoint>> {
    let pool = threads::pool(jobs)?;
    let cache = RunCache::new();
    warm_cache(plan, indices, &cache);
    pool.install(|| {
        indices
            .par_iter()
            .map(|&i| {
                let p = run_config_shared(plan, i, &cache);
                on_done();
                p
            })
            .collect()
    })
}

/// Generates each step's ids once, at the largest batch per chip among `indices`: every other
/// configuration slices them.
fn warm_cache(plan: &SweepPlan, indices: &[usize], cache: &RunCache) {
    let largest = indices
        .iter()
        .filter_map(|&i| plan.configs.get(i))
        .max_by_key(|c| c.batch / (c.chips).max(1) as u64);
    if let Some(c) = largest {
        let mut w = plan.base.clone();
        if w.chips != c.chips {
            w.topology = None;
        }
        (w.chip, w.chips, w.global_batch) = (c.chip.clone(), c.chips, c.batch);
        if c.chips > 0 && w.validate().is_ok() && w.check_bounds(&plan.bounds).is_ok() {
            for step in 0..w.steps {
                // A failure here shows again, per configuration.
                let _ = cache.batch_for_step(&w, step);
            }
        }
    }
}

/// The points as the list `sweep.json` holds.
pub fn points_json(points: &[SweepPoint]) -> crate::Result<serde_json::Value> {
    Ok(serde_json::to_value(points).map_err(anyhow::Error::from)?)
}

/// `sweep --json`: `{"answers": {...}, "points": [the rows of sweep.json]}`.
pub fn sweep_json(plan: &SweepPlan, points: &[SweepPoint]) -> crate::Result<serde_json::Value> {
    Ok(serde_json::json!({
        "answers": serde_json::to_value(answers(plan, points)).map_err(anyhow::Error::from)?,
        "points": points_json(points)?,
    }))
}

/// Writes `sweep.csv`, `sweep.json`, `sweep.svg`, `step_time.svg` and `fit_map.svg` (each figure
/// also as PNG) into `dir`, with the plan's `--target` drawn on the samples/s chart.
pub fn write_plan_outputs(dir: &Path, plan: &SweepPlan, points: &[SweepPoint]) -> crate::Result<()> {
    reports::sweep::write_sweep_with_target(dir, points, plan.target).with_context(|| dir.display().to_string())?;
    Ok(())
}

/// Replaces a plan's target and prices (`sweep --merge` with `--target`/`--price`: the answers and
/// costs of shards already run, without running them again) and reprices its points. `None` and an
/// empty list keep the plan's own.
pub fn set_target_and_prices(
    plan: &mut SweepPlan,
    points: &mut [SweepPoint],
    target: Option<f64>,
    price_overrides: &[String],
) -> crate::Result<()> {
    prices::check_target(target)?;
    if target.is_some() {
        plan.target = target;
    }
    if !price_overrides.is_empty() {
        // Overrides apply to tpusim's defaults, as in an unsharded sweep given the same flags.
        plan.prices = prices::prices(price_overrides)?;
        for p in points.iter_mut() {
            price_point(p, &plan.prices);
        }
    }
    Ok(())
}

/// Sets a point's price, currency, source and cost per hour from `prices`.
fn price_point(p: &mut SweepPoint, prices: &[Price]) {
    match prices::price_of(prices, &p.chip) {
        Some(price) => {
            p.price_per_chip_hour = price.per_chip_hour;
            p.currency = price.currency.clone();
            p.price_source = price.source;
        }
        None => {
            p.price_per_chip_hour = 0.0;
            p.currency = prices::CURRENCY.into();
            p.price_source = PriceSource::Assumed;
        }
    }
    p.cost_per_hour = p.price_per_chip_hour * p.chips as f64;
}

mod answers;
pub mod prices;
mod threads;

pub use answers::{answers, limits_text, summary_text, BestFit, LargestFit, SweepAnswers};
pub use prices::{check_target, Price, PriceSource, CURRENCY, DEFAULT_PRICES};
pub use threads::thread_limit;

pub mod shard;
