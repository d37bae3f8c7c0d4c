//! The calibration ledger (`ledger.json` beside this file): every fitted or calibrated constant set, what it
//! was fitted on, its held-out figures and the bounds it hit, and the README's agreement table ("What agrees
//! with what"), which is generated from it and quotes held-out figures only.
//!
//! Figures that come from the repository's records (the `tpusim hlo` and `tpusim op` held-out errors, the
//! band's coverage, the constants at a bound) are recomputed by
//! `cargo run --release -p sim-tpu --example ledger -- --write` ([`Ledger::refresh`]); a test checks the
//! ledger and the README table are current.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::band::BandData;
use crate::chips::Chip;
use crate::hlo::HloParams;
use crate::tensorcore::Calibration;

/// The embedded ledger text.
pub const LEDGER_JSON: &str = include_str!("ledger.json");

/// One figure: what was measured and the number.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// What was measured, on what.
    pub what: String,
    /// The figure.
    pub value: String,
}

/// A set of constants fitted or calibrated together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConstantSet {
    /// Stable key (`hlo`, `op`, `band`, `step`).
    pub id: String,
    /// What the constants are.
    pub name: String,
    /// Where they live.
    pub file: String,
    /// The command that fits or generates them.
    pub command: String,
    /// The data they were fitted or calibrated on.
    pub fitted_on: String,
    /// Figures on data they were not fitted on (empty when there is none).
    pub heldout: Vec<Figure>,
    /// Constants that sit at a bound of their physical range (`name on chip: value at bound`).
    pub bounds_hit: Vec<String>,
}

/// A row of the README's agreement table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgreementRow {
    /// Stable key; rows whose result is computed from records have the id of what computes them.
    pub id: String,
    /// What is checked (a command).
    pub what: String,
    /// Against what.
    pub checked_against: String,
    /// The result, held-out figures only.
    pub result: String,
}

/// The ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// The command that refreshes the computed figures and the README table.
    pub command: String,
    /// Constant sets.
    pub constant_sets: Vec<ConstantSet>,
    /// The README's agreement table, in order.
    pub agreement: Vec<AgreementRow>,
}

/// Held-out error quantiles of a model per chip (and `all`).
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorFigures {
    /// Chip (or `all`) -> (records, median error, 90th percentile error).
    pub per_chip: BTreeMap<String, (usize, f64, f64)>,
}

impl ErrorFigures {
    /// Quantiles of `errors` grouped by chip, plus `all`.
    pub fn of(errors: &[(String, f64)]) -> ErrorFigures {
        use crate::hlo::score::quantile;
        let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (chip, e) in errors {
            by.entry(chip.clone()).or_default().push(*e);
            by.entry("all".to_string()).or_default().push(*e);
        }
        ErrorFigures {
            per_chip: by
                .into_iter()
                .map(|(c, v)| (c, (v.len(), quantile(&v, 0.5), quantile(&v, 0.9))))
                .collect(),
        }
    }

    fn range(&self, at: impl Fn(&(usize, f64, f64)) -> f64) -> (f64, f64) {
        let v: Vec<f64> = self
            .per_chip
            .iter()
            .filter(|(c, _)| c.as_str() != "all")
            .map(|(_, f)| at(f))
            .collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    }

    /// `median a-b % per chip, p90 c-d %` (one decimal).
    pub fn summary(&self) -> String {
        let (m0, m1) = self.range(|f| f.1);
        let (p0, p1) = self.range(|f| f.2);
        format!(
            "median error {:.1}-{:.1} % per chip, p90 {:.1}-{:.1} %",
            m0 * 100.0,
            m1 * 100.0,
            p0 * 100.0,
            p1 * 100.0
        )
    }

    /// Figures per chip and `all`.
    pub fn figures(&self, what: &str) -> Vec<Figure> {
        self.per_chip
            .iter()
            .map(|(c, (n, m, p))| Figure {
                what: format!("{what}, {c} ({n} records)"),
                value: format!("median {:.1} %, p90 {:.1} %", m * 100.0, p * 100.0),
            })
            .collect()
    }

    /// Records over all chips.
    pub fn records(&self) -> usize {
        self.per_chip.get("all").map_or(0, |f| f.0)
    }
}

/// Everything the ledger computes from the repository's records.
#[derive(Clone, Debug, PartialEq)]
pub struct Computed {
    /// `tpusim hlo` cycles on the held-out program records.
    pub hlo: ErrorFigures,
    /// `tpusim hlo` cycles on the compiler corpus's random held-out records.
    pub hlo_corpus: ErrorFigures,
    /// `tpusim op` cycles on the held-out op records.
    pub op: ErrorFigures,
    /// The band data (its coverage).
    pub band: BandData,
}

/// Within a thousandth (relative) of a bound.
fn at(value: f64, bound: f64) -> bool {
    (value - bound).abs() <= 1e-3 * bound.abs().max(1e-9)
}

/// The `tpusim hlo` constants at a bound of the ranges the fit keeps (`hlo_programs` checks them): the HBM rate
/// at most the datasheet's; the VMEM budget at most VMEM; the epilogue factor in 0..=1; the launch factor in
/// 0.2..=1. A bound the constant is set to by its definition (the VMEM budget "VMEM less a scoped window") is
/// still listed.
pub fn hlo_bounds_hit(params: &[HloParams]) -> Vec<String> {
    let mut out = Vec::new();
    for h in params {
        let Ok(chip) = Chip::preset(&h.name) else { continue };
        let datasheet = chip.spec.hbm_bytes_per_s as f64 / (chip.spec.model_clock_mhz as f64 * 1e6);
        let mut hit = |name: &str, v: f64, b: f64, side: &str| {
            if at(v, b) {
                out.push(format!("{name} on {}: {v} at its {side} bound {b}", h.name));
            }
        };
        hit("hbm_bytes_per_cycle", h.hbm_bytes_per_cycle, datasheet, "upper");
        hit(
            "vmem_temp_bytes",
            h.vmem_temp_bytes as f64,
            chip.spec.vmem_bytes_per_tc as f64,
            "upper",
        );
        hit("mxu_epilogue_factor", h.mxu_epilogue_factor, 1.0, "upper");
        hit("mxu_epilogue_factor", h.mxu_epilogue_factor, 0.0, "lower");
        hit("launch_factor", h.launch_factor, 1.0, "upper");
        hit("launch_factor", h.launch_factor, 0.2, "lower");
    }
    out
}

/// The op model's constants at a bound of [`crate::tensorcore::calibration::fit_bounds`] (constants the fit
/// never moves excluded).
pub fn op_bounds_hit(cal: &Calibration) -> Vec<String> {
    use crate::tensorcore::calibration::{fit_bounds, FIXED_CONSTANTS};
    let mut out = Vec::new();
    let Ok(models) = cal.models() else {
        return out;
    };
    for mut m in models {
        let chip = m.name.clone();
        for (name, v) in m.params.fields_mut() {
            if FIXED_CONSTANTS.contains(&name) {
                continue;
            }
            let (lo, hi) = fit_bounds(&chip, name);
            for (b, side) in [(lo, "lower"), (hi, "upper")] {
                if b.is_finite() && (b != 0.0 || *v == 0.0) && at(*v, b) {
                    out.push(format!("{name} on {chip}: {v:.4} at its {side} bound {b:.4}"));
                }
            }
        }
    }
    out
}

impl Ledger {
    /// The embedded ledger.
    pub fn embedded() -> Result<Ledger, serde_json::Error> {
        serde_json::from_str(LEDGER_JSON)
    }

    fn set_mut(&mut self, id: &str) -> Option<&mut ConstantSet> {
        self.constant_sets.iter_mut().find(|s| s.id == id)
    }

    fn row_mut(&mut self, id: &str) -> Option<&mut AgreementRow> {
        self.agreement.iter_mut().find(|r| r.id == id)
    }

    /// Rewrites the computed figures (sets and rows with ids `hlo`, `op`, `band`) from `c`, and the bounds hit
    /// from the embedded constants.
    pub fn refresh(&mut self, c: &Computed) {
        let hlo_params = crate::hlo::hlo_params();
        if let Some(s) = self.set_mut("hlo") {
            s.heldout = c
                .hlo
                .figures("`tpusim hlo` total cycles against the compiler, held-out programs");
            s.bounds_hit = hlo_bounds_hit(&hlo_params);
        }
        if let Some(r) = self.row_mut("hlo") {
            r.result = format!(
                "held out from the fit ({} records): {}",
                c.hlo.records(),
                c.hlo.summary()
            );
        }
        if let Some(s) = self.set_mut("hlo") {
            s.heldout.extend(
                c.hlo_corpus
                    .figures("`tpusim hlo` total cycles against the compiler, the corpus's random held-out programs"),
            );
        }
        if let Some(r) = self.row_mut("hlo_corpus") {
            r.result = format!(
                "held out from the fit ({} records): {}",
                c.hlo_corpus.records(),
                c.hlo_corpus.summary()
            );
        }
        if let Some(s) = self.set_mut("op") {
            s.heldout =
                c.op.figures("`tpusim op` cycles against the compiler, held-out op cases");
            s.bounds_hit = op_bounds_hit(&Calibration::embedded());
        }
        if let Some(r) = self.row_mut("op") {
            r.result = format!("held out from the fit ({} records): {}", c.op.records(), c.op.summary());
        }
        let cov = |b: &crate::band::ModelBand| {
            format!(
                "{}/{} = {:.0} %",
                b.coverage.inside,
                b.coverage.records,
                b.coverage.share * 100.0
            )
        };
        if let Some(s) = self.set_mut("band") {
            s.heldout = vec![
                Figure {
                    what: "`tpusim hlo` band coverage: held-out programs inside the 80% band built without them".into(),
                    value: cov(&c.band.hlo),
                },
                Figure {
                    what: "`tpusim op` band coverage: held-out op cases inside the 80% band built without them".into(),
                    value: cov(&c.band.op),
                },
            ];
        }
        if let Some(r) = self.row_mut("band") {
            r.result = format!(
                "share of compiler totals inside the 80% band, each left out of the band it is checked on: \
                 `hlo` {}, `op` {} (honest: 70-90 %)",
                cov(&c.band.hlo),
                cov(&c.band.op)
            );
        }
    }

    /// The README's agreement table (Markdown).
    pub fn readme_table(&self) -> String {
        let mut s = String::from("| what | checked against | result |\n|---|---|---|\n");
        for r in &self.agreement {
            s.push_str(&format!("| {} | {} | {} |\n", r.what, r.checked_against, r.result));
        }
        s
    }
}

/// The marker lines around the generated table in README.md.
pub const README_BEGIN: &str = "<!-- agreement table: generated from sim-tpu/src/ledger.json by `cargo run --release -p sim-tpu --example ledger -- --write` -->";
/// The end marker.
pub const README_END: &str = "<!-- end of agreement table -->";

/// The generated table between the markers of `readme`, if both are there.
pub fn readme_block(readme: &str) -> Option<&str> {
    let start = readme.find(README_BEGIN)? + README_BEGIN.len();
    let end = readme[start..].find(README_END)? + start;
    Some(readme[start..end].trim_start_matches('\n'))
}

/// `readme` with the block between the markers replaced by `table`.
pub fn splice_readme(readme: &str, table: &str) -> Option<String> {
    let start = readme.find(README_BEGIN)? + README_BEGIN.len();
    let end = readme[start..].find(README_END)? + start;
    Some(format!("{}\n{}{}", &readme[..start], table, &readme[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_ledger_parses_and_names_every_constant_set() {
        let l = Ledger::embedded().unwrap();
        let ids: Vec<&str> = l.constant_sets.iter().map(|s| s.id.as_str()).collect();
        for id in ["hlo", "op", "band", "step"] {
            assert!(ids.contains(&id), "{id}");
        }
    }

    #[test]
    fn splice_and_read_back() {
        let readme = format!("a\n{README_BEGIN}\nold\n{README_END}\nb\n");
        let s = splice_readme(&readme, "| x |\n").unwrap();
        assert_eq!(readme_block(&s), Some("| x |\n"));
        assert!(s.starts_with("a\n") && s.ends_with(&format!("{README_END}\nb\n")));
    }

    #[test]
    fn figures_by_hand() {
        let e = ErrorFigures::of(&[("v4".into(), 0.1), ("v4".into(), 0.3), ("v5e".into(), 0.2)]);
        assert_eq!(e.per_chip["all"], (3, 0.2, 0.3));
        assert_eq!(e.per_chip["v4"], (2, 0.1, 0.3));
        assert_eq!(e.summary(), "median error 10.0-20.0 % per chip, p90 20.0-30.0 %");
    }
}
