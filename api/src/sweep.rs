//! `tpusim sweep`: capacity sweeps over chips, chip counts and batch sizes. A sweep is a [`SweepPlan`]
//! (the base workload and the configurations, in a fixed order); each configuration runs on its own
//! ([`run_config`]), so the configurations can be spread over threads, Ray tasks or batch-scheduler
//! shards and merged back into the same outputs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use workloads::cache::RunCache;
use workloads::{RunOptions, Workload};

pub use reports::sweep::SweepPoint;

use crate::run::{load_workload, RunRequest};

/// Assumed on-demand price per chip-hour (USD), for ranking configurations only; override with prices.
pub const DEFAULT_PRICES: &[(&str, f64)] = &[
    ("v4", 3.22),
    ("v5e", 1.20),
    ("v5p", 4.20),
    ("v6e", 2.70),
    ("tpu7x", 6.00),
];

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
    /// Target samples/s for the cheapest-configuration answer.
    pub target: Option<f64>,
    /// Price overrides, `CHIP=PRICE`.
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
    /// Price per chip-hour by chip preset.
    pub prices: Vec<(String, f64)>,
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
    let mut prices: Vec<(String, f64)> = DEFAULT_PRICES.iter().map(|(c, p)| (c.to_string(), *p)).collect();
    for p in &req.prices {
        let (c, v) = p
            .split_once('=')
            .with_context(|| format!("--price {p}: expected CHIP=PRICE"))?;
        let v: f64 = v.parse().with_context(|| format!("--price {p}"))?;
        prices.retain(|x| x.0 != c);
        prices.push((c.to_string(), v));
    }
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
    let price = plan
        .prices
        .iter()
        .find(|p| p.0 == sim_tpu::chips::preset_name(&cfg.chip).unwrap_or(""))
        .map_or(1.0, |p| p.1);
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
        cost_per_hour: price * cfg.chips as f64,
        error: None,
    };
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
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.unwrap_or(0))
        .build()
        .map_err(anyhow::Error::from)?;
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

/// The largest fitting batch of one (chip, chip count) row of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LargestFit {
    /// Chip preset.
    pub chip: String,
    /// Chip count.
    pub chips: u32,
    /// The largest batch that fits (None: no batch of the sweep fits).
    pub batch: Option<u64>,
    /// Samples/s at that batch.
    pub samples_per_s: Option<f64>,
    /// Why the smallest batch of the row does not fit, when none does.
    pub fit_reasons: Vec<sim_core::summary::FitReason>,
}

/// The answers a sweep gives planners.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepAnswers {
    /// Per chip and chip count, in the plan's order.
    pub largest_batch_that_fits: Vec<LargestFit>,
    /// The target samples/s, when one was given.
    pub target: Option<f64>,
    /// The cheapest fitting configuration reaching the target (None without a target or when none
    /// reaches it).
    pub cheapest: Option<SweepPoint>,
    /// Configurations that fit, and in all.
    pub fitting: usize,
    /// Configurations in all.
    pub configurations: usize,
}

/// The answers of a sweep's points.
pub fn answers(plan: &SweepPlan, points: &[SweepPoint]) -> SweepAnswers {
    let mut largest = Vec::new();
    for c in &plan.chip {
        for &n in &plan.chips {
            let row: Vec<&SweepPoint> = points.iter().filter(|p| &p.chip == c && p.chips == n).collect();
            let best = row.iter().filter(|p| p.fits).max_by_key(|p| p.batch);
            let smallest = row.iter().min_by_key(|p| p.batch);
            largest.push(LargestFit {
                chip: c.clone(),
                chips: n,
                batch: best.map(|p| p.batch),
                samples_per_s: best.map(|p| p.samples_per_s),
                fit_reasons: match (best, smallest) {
                    (None, Some(p)) => p.fit_reasons.clone(),
                    _ => Vec::new(),
                },
            });
        }
    }
    let cheapest = plan.target.and_then(|t| {
        points
            .iter()
            .filter(|p| p.fits && p.samples_per_s >= t)
            .min_by(|a, b| {
                a.cost_per_hour
                    .total_cmp(&b.cost_per_hour)
                    .then(b.samples_per_s.total_cmp(&a.samples_per_s))
            })
            .cloned()
    });
    SweepAnswers {
        largest_batch_that_fits: largest,
        target: plan.target,
        cheapest,
        fitting: points.iter().filter(|p| p.fits).count(),
        configurations: points.len(),
    }
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

/// The answers printed after a sweep: the largest batch that fits each configuration (and, where
/// none fits, why not) and the cheapest configuration reaching the target.
pub fn summary_text(plan: &SweepPlan, points: &[SweepPoint]) -> String {
    use sim_core::units::rate;
    let a = answers(plan, points);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} {:>6} {:>22} {:>20}",
        "chip", "chips", "largest batch that fits", "samples/s there"
    );
    for l in &a.largest_batch_that_fits {
        match (l.batch, l.samples_per_s) {
            (Some(b), Some(x)) => {
                let _ = writeln!(s, "{:<8} {:>6} {:>22} {:>20}", l.chip, l.chips, b, rate(x, "samples/s"));
            }
            _ => {
                let why = if l.fit_reasons.is_empty() {
                    String::new()
                } else {
                    let kinds: Vec<&str> = l.fit_reasons.iter().map(|f| f.kind.label()).collect();
                    format!("   smallest batch: {}", kinds.join(", "))
                };
                let _ = writeln!(s, "{:<8} {:>6} {:>22} {:>20}{why}", l.chip, l.chips, "none", "-");
            }
        }
    }
    if let Some(t) = a.target {
        let target = rate(t, "samples/s");
        match &a.cheapest {
            Some(p) => {
                let _ = writeln!(s, "\ncheapest configuration reaching {target}: {} x {} at batch {} ({}, {:.2}/h; needs max_ids_per_partition >= {}, max_unique >= {})", p.chips, p.chip, p.batch, rate(p.samples_per_s, "samples/s"), p.cost_per_hour, p.needed_max_ids, p.needed_max_unique_ids);
            }
            None => {
                let _ = writeln!(s, "\nno configuration reaches {target}");
            }
        }
    }
    s
}

pub mod shard;
