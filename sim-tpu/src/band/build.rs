//! Building the band from calibration records: the domain from the records the model was fitted on, each
//! class's quantiles from the held-out records' residuals (weighted by the class's share of each record's
//! cycles), and the coverage measured by leaving one group of records out at a time (the band checked on a
//! group is built from the other groups only).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::{BandKernel, ClassBand, Coverage, KernelClass, ModelBand, ShapeCell, BAND_LEVEL};
use crate::hlo::{cost_module, HloError, HloModule};
use crate::tensorcore::calibration::CalibRecord;
use crate::tensorcore::{cost, ChipModel, OpError};

/// A class needs held-out residuals worth this many whole records to get a band of its own.
pub const MIN_CLASS_WEIGHT: f64 = 3.0;

/// One held-out record as the band sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The group it is left out with when coverage is measured (a program on every chip, an op case).
    pub group: String,
    /// The model's kernels.
    pub kernels: Vec<BandKernel>,
    /// The compiler's total, cycles.
    pub estimate: f64,
}

impl Sample {
    fn predicted(&self) -> u64 {
        self.kernels.iter().map(|k| k.cycles).sum()
    }

    /// `ln(compiler / model)`, or `None` when either side is not positive.
    fn residual(&self) -> Option<f64> {
        let p = self.predicted() as f64;
        (p > 0.0 && self.estimate > 0.0).then(|| (self.estimate / p).ln())
    }

    /// Each class's share of the model's cycles.
    fn class_weights(&self) -> BTreeMap<KernelClass, f64> {
        let total = self.predicted().max(1) as f64;
        let mut w = BTreeMap::new();
        for k in &self.kernels {
            *w.entry(k.class.clone()).or_insert(0.0) += k.cycles as f64 / total;
        }
        w
    }
}

/// The `q` quantile of weighted values: the smallest value whose cumulative weight reaches `q` of the total
/// (values sorted ascending); `None` without positive weight.
pub fn weighted_quantile(values: &[(f64, f64)], q: f64) -> Option<f64> {
    let mut v: Vec<(f64, f64)> = values.iter().copied().filter(|(_, w)| *w > 0.0).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = v.iter().map(|(_, w)| w).sum();
    if total <= 0.0 {
        return None;
    }
    let mut cum = 0.0;
    for (x, w) in &v {
        cum += w;
        if cum >= q * total - 1e-12 * total {
            return Some(*x);
        }
    }
    v.last().map(|(x, _)| *x)
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// The quantile levels of the band's ends for `n` (effective) residuals: the 10th and 90th percentiles
/// widened by the split-conformal finite-sample factor `(n + 1) / n` (a new record's residual is one more draw:
/// the 90th percentile of `n` draws covers it less than 90% of the time), capped at the extremes.
pub fn band_levels(n: f64) -> (f64, f64) {
    let hi = if n > 0.0 {
        ((1.0 - (1.0 - BAND_LEVEL) / 2.0) * (n + 1.0) / n).min(1.0)
    } else {
        1.0
    };
    (1.0 - hi, hi)
}

fn class_band(residuals: &[(f64, f64)]) -> Option<ClassBand> {
    let weight: f64 = residuals.iter().map(|(_, w)| w).sum();
    // Kish's effective sample size of weighted draws: each record is one draw of a residual, whatever its weight.
    let squares: f64 = residuals.iter().map(|(_, w)| w * w).sum();
    let (lo, hi) = band_levels(if squares > 0.0 { weight * weight / squares } else { 0.0 });
    let errors: Vec<(f64, f64)> = residuals.iter().map(|(r, w)| (r.abs().exp() - 1.0, *w)).collect();
    Some(ClassBand {
        records: residuals.iter().filter(|(_, w)| *w > 0.0).count() as u64,
        weight: round4(weight),
        low_ratio: round4(weighted_quantile(residuals, lo)?.exp()),
        high_ratio: round4(weighted_quantile(residuals, hi)?.exp()),
        median_error: round4(weighted_quantile(&errors, 0.5)?),
    })
}

/// Per-class bands of the samples (classes with at least [`MIN_CLASS_WEIGHT`]) and the fallback: the lowest
/// low and highest high of the classes and of all samples pooled (each weight 1).
pub fn class_bands(samples: &[&Sample]) -> (BTreeMap<KernelClass, ClassBand>, ClassBand) {
    let mut per: BTreeMap<KernelClass, Vec<(f64, f64)>> = BTreeMap::new();
    let mut pooled = Vec::new();
    for s in samples {
        let Some(r) = s.residual() else { continue };
        pooled.push((r, 1.0));
        for (c, w) in s.class_weights() {
            per.entry(c).or_default().push((r, w));
        }
    }
    let classes: BTreeMap<KernelClass, ClassBand> = per
        .into_iter()
        .filter(|(_, v)| v.iter().map(|(_, w)| w).sum::<f64>() >= MIN_CLASS_WEIGHT)
        .filter_map(|(c, v)| Some((c, class_band(&v)?)))
        .collect();
    let mut fallback = class_band(&pooled).unwrap_or(ClassBand {
        records: 0,
        weight: 0.0,
        low_ratio: 1.0,
        high_ratio: 1.0,
        median_error: 0.0,
    });
    for b in classes.values() {
        fallback.low_ratio = fallback.low_ratio.min(b.low_ratio);
        fallback.high_ratio = fallback.high_ratio.max(b.high_ratio);
    }
    (classes, fallback)
}

/// The coverage of the band on `samples`: each group checked against the band built from the other groups.
pub fn coverage(domain: &BTreeSet<(KernelClass, ShapeCell)>, samples: &[Sample]) -> Coverage {
    let groups: BTreeSet<&str> = samples.iter().map(|s| s.group.as_str()).collect();
    let (mut records, mut inside) = (0u64, 0u64);
    for g in groups {
        let rest: Vec<&Sample> = samples.iter().filter(|s| s.group != g).collect();
        let (classes, fallback) = class_bands(&rest);
        let band = ModelBand {
            source: String::new(),
            classes,
            fallback,
            domain: domain.clone(),
            coverage: Coverage {
                records: 0,
                inside: 0,
                share: 0.0,
            },
        };
        for s in samples.iter().filter(|s| s.group == g && s.residual().is_some()) {
            let t = band.total(&s.kernels);
            records += 1;
            if (t.total_cycles_low as f64..=t.total_cycles_high as f64).contains(&s.estimate) {
                inside += 1;
            }
        }
    }
    Coverage {
        records,
        inside,
        share: if records == 0 {
            0.0
        } else {
            round4(inside as f64 / records as f64)
        },
    }
}

/// The band of a model: `fit` kernels give the domain, `heldout` samples the class bands and the coverage.
pub fn model_band(source: String, fit: &[BandKernel], heldout: &[Sample]) -> ModelBand {
    let domain: BTreeSet<(KernelClass, ShapeCell)> = fit.iter().map(|k| (k.class.clone(), k.cell)).collect();
    let all: Vec<&Sample> = heldout.iter().collect();
    let (classes, fallback) = class_bands(&all);
    let coverage = coverage(&domain, heldout);
    ModelBand {
        source,
        classes,
        fallback,
        domain,
        coverage,
    }
}

/// One record of `testdata/hlo/programs.json` (the fields the band reads).
#[derive(Clone, Debug, Deserialize)]
pub struct ProgramRecord {
    /// `program@chip`.
    pub id: String,
    /// The program (one HLO file, compiled for every chip).
    pub program: String,
    /// The HLO file, relative to the records.
    pub hlo: String,
    /// Chip preset.
    pub chip: String,
    /// `fit` or `heldout`.
    pub split: String,
    /// Whether the compiler's estimate covers every instruction (cycles are scored only then).
    pub estimate_complete: bool,
    /// The compiler's total.
    pub total_estimated_cycles: f64,
}

/// `tpusim hlo`'s band from the program records; `text` gives an HLO file's text by its name.
pub fn hlo_band_from_records(
    records: &[ProgramRecord],
    text: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelBand, HloError> {
    let (mut fit, mut heldout) = (Vec::new(), Vec::new());
    let mut modules: BTreeMap<String, HloModule> = BTreeMap::new();
    for r in records.iter().filter(|r| r.estimate_complete) {
        if !modules.contains_key(&r.hlo) {
            let t = text(&r.hlo).ok_or_else(|| HloError::Unsupported(format!("{}: HLO file not found", r.hlo)))?;
            modules.insert(r.hlo.clone(), HloModule::parse(&t)?);
        }
        let chip = ChipModel::preset(&r.chip).map_err(|e| HloError::Unsupported(e.to_string()))?;
        let kernels = super::hlo_kernels(&cost_module(&modules[&r.hlo], &chip)?);
        match r.split.as_str() {
            "fit" => fit.extend(kernels),
            _ => heldout.push(Sample {
                group: r.program.clone(),
                kernels,
                estimate: r.total_estimated_cycles,
            }),
        }
    }
    let source = format!(
        "testdata/hlo/programs.json and the compiler corpus (testdata/hlo/corpus): domain from the {} kernels of \
         the fit split, residuals from {} held-out records (estimate complete); coverage leaving one program out \
         at a time",
        fit.len(),
        heldout.len()
    );
    Ok(model_band(source, &fit, &heldout))
}

/// `tpusim op`'s band from the op records: the held-out split is `held_out(heldout_percent)`.
pub fn op_band_from_records(records: &[CalibRecord], heldout_percent: u64) -> Result<ModelBand, OpError> {
    let (mut fit, mut heldout) = (Vec::new(), Vec::new());
    for r in records.iter().filter(|r| r.total_estimated_cycles > 0) {
        let c = cost(&r.op, &ChipModel::preset(&r.chip)?)?;
        let k = BandKernel {
            class: KernelClass::of_op(r.op.name()),
            cell: ShapeCell::of(c.hbm_bytes, c.flops),
            cycles: c.cycles,
        };
        if r.held_out(heldout_percent) {
            heldout.push(Sample {
                group: r.case_key(),
                kernels: vec![k],
                estimate: r.total_estimated_cycles as f64,
            });
        } else {
            fit.push(k);
        }
    }
    let source = format!(
        "testdata/ops/tc_records.jsonl.gz: domain from the {} fit records, residuals from the {} held-out records \
         ({heldout_percent}% of cases by hash); coverage leaving one op case out at a time",
        fit.len(),
        heldout.len()
    );
    Ok(model_band(source, &fit, &heldout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_quantiles_by_hand() {
        let v = [(3.0, 1.0), (1.0, 1.0), (2.0, 2.0)];
        // Sorted 1 (w 1), 2 (w 2), 3 (w 1); total 4: 10% -> 1, 50% -> 2 (cum 3 >= 2), 90% -> 3 (cum 4 >= 3.6).
        assert_eq!(weighted_quantile(&v, 0.1), Some(1.0));
        assert_eq!(weighted_quantile(&v, 0.5), Some(2.0));
        assert_eq!(weighted_quantile(&v, 0.9), Some(3.0));
        assert_eq!(weighted_quantile(&[(1.0, 0.0)], 0.5), None);
    }

    #[test]
    fn conformal_levels_by_hand() {
        // 9 draws: 0.9 x 10/9 = 1, the extremes; 18 draws: 0.9 x 19/18 = 0.95.
        assert_eq!(band_levels(9.0), (0.0, 1.0));
        let (lo, hi) = band_levels(18.0);
        assert!((hi - 0.95).abs() < 1e-12 && (lo - 0.05).abs() < 1e-12);
        assert_eq!(band_levels(0.0), (0.0, 1.0));
    }
}
