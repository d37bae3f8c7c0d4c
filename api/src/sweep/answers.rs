//! The answers a sweep gives a planner: per configuration the best throughput that fits and the
//! batch it needs (the largest fitting batch is not it: a larger batch can be slower, through
//! minibatching or stragglers), the cheapest configuration reaching the target with the limits it
//! ran with, and the prices behind every cost with their currency and source.

use std::fmt::Write as _;

use serde::Serialize;
use sim_core::summary::RuntimeVerdict;

use super::prices::{Price, CURRENCY};
use super::{SweepPlan, SweepPoint};

/// The best fitting point of one (chip, chip count) row of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BestFit {
    /// Chip preset.
    pub chip: String,
    /// Chip count.
    pub chips: u32,
    /// The batch with the highest samples/s among those that fit (None: none fits).
    pub batch: Option<u64>,
    /// Samples/s at that batch.
    pub samples_per_s: Option<f64>,
    /// Step time at that batch, µs.
    pub step_time_us: Option<f64>,
    /// The largest batch that fits (it may be slower than `batch`).
    pub largest_fitting_batch: Option<u64>,
    /// Why the smallest batch of the row does not fit, when none does.
    pub fit_reasons: Vec<sim_core::summary::FitReason>,
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
    /// Per chip and chip count, in the plan's order: the best throughput that fits.
    pub best_throughput_that_fits: Vec<BestFit>,
    /// Per chip and chip count, in the plan's order: the largest batch that fits.
    pub largest_batch_that_fits: Vec<LargestFit>,
    /// The target samples/s, when one was given.
    pub target: Option<f64>,
    /// The cheapest fitting configuration reaching the target (None without a target or when none
    /// reaches it); its `limits` are the ones it ran with.
    pub cheapest: Option<SweepPoint>,
    /// The prices of the sweep's chips, per chip-hour.
    pub prices: Vec<Price>,
    /// Configurations that fit.
    pub fitting: usize,
    /// Configurations in all.
    pub configurations: usize,
}

/// The answers of a sweep's points.
pub fn answers(plan: &SweepPlan, points: &[SweepPoint]) -> SweepAnswers {
    let mut best = Vec::new();
    let mut largest = Vec::new();
    for c in &plan.chip {
        for &n in &plan.chips {
            let row: Vec<&SweepPoint> = points.iter().filter(|p| &p.chip == c && p.chips == n).collect();
            let fitting = || row.iter().filter(|p| p.fits);
            // Highest throughput; on a tie the smaller batch (less memory, fresher gradients).
            let top = fitting().max_by(|a, b| a.samples_per_s.total_cmp(&b.samples_per_s).then(b.batch.cmp(&a.batch)));
            let big = fitting().max_by_key(|p| p.batch);
            let why = match (big, row.iter().min_by_key(|p| p.batch)) {
                (None, Some(p)) => p.fit_reasons.clone(),
                _ => Vec::new(),
            };
            best.push(BestFit {
                chip: c.clone(),
                chips: n,
                batch: top.map(|p| p.batch),
                samples_per_s: top.map(|p| p.samples_per_s),
                step_time_us: top.map(|p| p.step_time_us),
                largest_fitting_batch: big.map(|p| p.batch),
                fit_reasons: why.clone(),
            });
            largest.push(LargestFit {
                chip: c.clone(),
                chips: n,
                batch: big.map(|p| p.batch),
                samples_per_s: big.map(|p| p.samples_per_s),
                fit_reasons: why,
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
    let prices = plan
        .prices
        .iter()
        .filter(|p| {
            plan.chip
                .iter()
                .any(|c| sim_tpu::chips::preset_name(c).ok() == Some(p.chip.as_str()))
        })
        .cloned()
        .collect();
    SweepAnswers {
        best_throughput_that_fits: best,
        largest_batch_that_fits: largest,
        target: plan.target,
        cheapest,
        prices,
        fitting: points.iter().filter(|p| p.fits).count(),
        configurations: points.len(),
    }
}

/// The limits a fitting point ran with, in words: the values in force (once when every stack has
/// the same), then what they did: minibatches (and the limit that would avoid them), dropped ids, or
/// the largest counts observed.
pub fn limits_text(p: &SweepPoint) -> String {
    let mut s = String::new();
    let mut pairs: Vec<(u64, u64)> = p
        .limits
        .iter()
        .map(|l| (l.max_ids_per_partition, l.max_unique_ids_per_partition))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    match pairs.as_slice() {
        [] => s.push_str("no SparseCore limits"),
        [(ids, unique)] => {
            let _ = write!(
                s,
                "max_ids_per_partition = {ids}, max_unique_ids_per_partition = {unique}"
            );
        }
        _ => {
            let each: Vec<String> = p
                .limits
                .iter()
                .map(|l| {
                    format!(
                        "{} {}/{}",
                        l.stack, l.max_ids_per_partition, l.max_unique_ids_per_partition
                    )
                })
                .collect();
            let _ = write!(s, "per stack (max_ids/max_unique): {}", each.join(", "));
        }
    }
    let drops = p.limits.iter().any(|l| l.runtime == RuntimeVerdict::DropsIds);
    // Name only the limits below what was observed: those are the ones to raise.
    let lowest = |f: fn(&reports::sweep::PointLimits) -> u64| p.limits.iter().map(f).min().unwrap_or(0);
    let mut raise = Vec::new();
    if p.needed_max_ids > lowest(|l| l.max_ids_per_partition) {
        raise.push(format!("max_ids_per_partition >= {}", p.needed_max_ids));
    }
    if p.needed_max_unique_ids > lowest(|l| l.max_unique_ids_per_partition) {
        raise.push(format!("max_unique_ids_per_partition >= {}", p.needed_max_unique_ids));
    }
    let avoid = if raise.is_empty() {
        "higher per-table limits".to_string()
    } else {
        raise.join(", ")
    };
    if p.minibatches_per_step > 1 {
        let _ = write!(
            s,
            "; fits through minibatching (up to {} minibatches per step; {avoid} would avoid them)",
            p.minibatches_per_step
        );
    } else if drops {
        let _ = write!(s, "; drops ids over them ({avoid} would keep every id)");
    } else if !p.limits.is_empty() {
        let _ = write!(
            s,
            "; at most {} ids, {} unique per partition observed",
            p.needed_max_ids, p.needed_max_unique_ids
        );
    }
    s
}

/// The answers printed after a sweep: per configuration the best throughput that fits and its
/// batch (and, where none fits, why not), the prices, and the cheapest configuration reaching the
/// target with its limits.
pub fn summary_text(plan: &SweepPlan, points: &[SweepPoint]) -> String {
    use sim_core::units::rate;
    let a = answers(plan, points);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} {:>6} {:>28} {:>10} {:>24}",
        "chip", "chips", "best samples/s that fits", "at batch", "largest batch that fits"
    );
    for b in &a.best_throughput_that_fits {
        match (b.batch, b.samples_per_s, b.largest_fitting_batch) {
            (Some(batch), Some(x), Some(big)) => {
                let _ = writeln!(
                    s,
                    "{:<8} {:>6} {:>28} {:>10} {:>24}",
                    b.chip,
                    b.chips,
                    rate(x, "samples/s"),
                    batch,
                    big
                );
            }
            _ => {
                let why = if b.fit_reasons.is_empty() {
                    String::new()
                } else {
                    let kinds: Vec<&str> = b.fit_reasons.iter().map(|f| f.kind.label()).collect();
                    format!("   smallest batch: {}", kinds.join(", "))
                };
                let _ = writeln!(
                    s,
                    "{:<8} {:>6} {:>28} {:>10} {:>24}{why}",
                    b.chip, b.chips, "none fits", "-", "-"
                );
            }
        }
    }
    let listed: Vec<String> = a
        .prices
        .iter()
        .map(|p| format!("{} {:.2} ({})", p.chip, p.per_chip_hour, p.source.as_str()))
        .collect();
    if !listed.is_empty() {
        let _ = writeln!(
            s,
            "\nprices per chip-hour ({CURRENCY}): {}; assumed ones are tpusim's defaults for ranking, not quotes (set with --price CHIP=PRICE)",
            listed.join(", ")
        );
    }
    if let Some(t) = a.target {
        let target = rate(t, "samples/s");
        match &a.cheapest {
            Some(p) => {
                let _ = writeln!(
                    s,
                    "\ncheapest configuration reaching {target}: {} x {} at batch {} ({}, {:.2} {}/h at {:.2} per chip-hour, {})\n  limits: {}",
                    p.chips,
                    p.chip,
                    p.batch,
                    rate(p.samples_per_s, "samples/s"),
                    p.cost_per_hour,
                    p.currency,
                    p.price_per_chip_hour,
                    p.price_source.as_str(),
                    limits_text(p)
                );
            }
            None => {
                let _ = writeln!(s, "\nno configuration that fits reaches {target}");
            }
        }
    }
    s
}
