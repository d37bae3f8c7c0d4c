//! Checking the model against the compiler: records (compact copies of reference/tpu-compiler/ops.jsonl in
//! `testdata/ops/`), the error measure, a deterministic train/held-out split, and error tables.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{cost, ChipModel, OpError, OpSpec};

/// Percent of op cases held out of the fit (`CalibRecord::held_out(HELDOUT_PERCENT)`): the op model's test and
/// band read only these; `tensorcore_fit --holdout 30` fits on the rest.
pub const HELDOUT_PERCENT: u64 = 30;

/// Constants set from published facts or structural thresholds, never fitted (`tensorcore_fit` leaves them).
pub const FIXED_CONSTANTS: &[&str] = &[
    "resident_limit_bytes",
    "mxu_int8_speedup",
    "mxu_fp8_speedup",
    "mxu_f32_factor",
    // Read off the per-kernel estimates of fit records (`TcParams::vmem_copy_bytes_per_cycle`), not fitted to
    // totals: with few convolutions a joint refit trades it against the fusions' errors.
    "vmem_copy_bytes_per_cycle",
];

/// The compiler's modelled HBM bandwidth per cycle (reference/chips.md), the anchor for the fitted streaming rate.
fn modelled_hbm_bytes_per_cycle(chip: &str) -> f64 {
    match chip {
        "v4" => 491e9 / 1.045e9,
        "v5e" => 738e9 / 1.503e9,
        "v5p" => 2350e9 / 1.503e9,
        "v6e" => 1638e9 / 1.751e9,
        _ => 3686e9 / 1.9e9,
    }
}

/// Physical ranges `tensorcore_fit` may not leave (a constant the training records cannot pin down stays
/// plausible); the calibration ledger lists the constants that end on one.
pub fn fit_bounds(chip: &str, name: &str) -> (f64, f64) {
    match name {
        "mm_hbm_bytes_per_cycle" => {
            let b = modelled_hbm_bytes_per_cycle(chip);
            // No faster than the datasheet: the operand the compiler prefetches on chip is not streamed at all
            // (`cost::prefetched`), which is what pushed this rate above it before.
            (0.5 * b, b)
        }
        "mxu_efficiency" => (1.0, 2.0),
        "mxu_f32_factor" => (1.0, 6.0),
        "mm_epilogue_serial" => (0.0, 0.25),
        "mm_f32_byte_factor" => (0.4, 1.0),
        "conv_factor" => (0.5, 4.0),
        // At most a VPU pass of a few cycles per vreg (the slowest elementwise rate fitted is ~40).
        "mm_8bit_widen" | "mm_int8_retile" | "mm_int8_ragged" => (0.0, 16.0),
        // Relayout copies: at least a load and a store per vreg, at most the slowest VPU pass (~40 cycles per
        // vreg), so a rate no record constrains (a chip whose corpus lacks the copy) cannot run away.
        "conv_input_copy" | "conv_input_relayout" | "row_relayout" => (1.0, 40.0),
        // A local move inside VMEM: faster than any HBM stream (300-1,800 bytes per cycle), at most a few vregs'
        // load and store per cycle.
        "vmem_copy_bytes_per_cycle" => (2_000.0, 32_768.0),
        "mm_acc_32bit" => (0.0, 32.0),
        "mxu_weight_load_cycles" => (0.0, 256.0),
        // At most two weight loads' worth per block: a transpose of the block through the transpose unit.
        "mxu_weight_transpose_cycles" | "mxu_act_transpose_cycles" => (0.0, 256.0),
        "mxu_iter_cycles" => (0.0, 2000.0),
        "binary_16bit_factor" | "reduce_16bit_factor" => (0.25, 1.5),
        _ => (0.0, f64::INFINITY),
    }
}

/// One compiled program: an op on a chip and the compiler's estimate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibRecord {
    /// Record id in ops.jsonl.
    pub id: String,
    /// Chip preset name (`v4`, `v5e`, ...).
    pub chip: String,
    /// The op, in the record schema.
    #[serde(flatten)]
    pub op: OpSpec,
    /// The compiler's `total_estimated_cycles`.
    pub total_estimated_cycles: u64,
    /// Entry parameter shapes with the layouts the compiler chose.
    #[serde(default)]
    pub entry_params: Vec<String>,
    /// Entry result shape with its layout.
    #[serde(default)]
    pub entry_result: String,
    /// The compiler's padded parameter bytes (`memory_analysis().argument_size_in_bytes`).
    #[serde(default)]
    pub argument_bytes: u64,
    /// The compiler's padded result bytes.
    #[serde(default)]
    pub output_bytes: u64,
}

impl CalibRecord {
    /// A key naming the case independent of chip (op and params), used for the split.
    pub fn case_key(&self) -> String {
        serde_json::to_string(&self.op).unwrap_or_default()
    }

    /// Whether this case is in the held-out part of the split (about `percent` % of cases, the same cases on
    /// every chip, chosen by a hash of the case so the split never changes between runs).
    pub fn held_out(&self, percent: u64) -> bool {
        self.held_out_fold(percent, 0)
    }

    /// Like [`CalibRecord::held_out`] for another fold: the held-out window of the hash starts at `offset` %,
    /// so offsets 0, 30, 60 give disjoint 30 % folds.
    pub fn held_out_fold(&self, percent: u64, offset: u64) -> bool {
        // FNV-1a, stable across platforms and Rust versions.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.case_key().bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h % 100 + 100 - offset % 100) % 100 < percent
    }
}

/// Parses JSON lines of [`CalibRecord`]s.
pub fn parse_records(text: &str) -> Result<Vec<CalibRecord>, OpError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| OpError::Parse {
                reason: format!("record line {}: {e}", i + 1),
            })
        })
        .collect()
}

/// Relative error as the task defines it: max(pred/est, est/pred) - 1.
pub fn rel_error(pred: f64, est: f64) -> f64 {
    let (p, e) = (pred.max(1.0), est.max(1.0));
    (p / e).max(e / p) - 1.0
}

/// A model prediction next to the compiler's estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The record.
    pub record: CalibRecord,
    /// Predicted cycles.
    pub predicted_cycles: u64,
    /// [`rel_error`] of the prediction.
    pub error: f64,
}

/// Predicts every record whose compiler estimate is non-zero (the compiler gives no estimate to programs it
/// folds to copies, e.g. a 1x1x1 matmul).
pub fn compare(records: &[CalibRecord], chips: &[ChipModel]) -> Result<Vec<Comparison>, OpError> {
    let mut out = Vec::with_capacity(records.len());
    for r in records.iter().filter(|r| r.total_estimated_cycles > 0) {
        let chip = chips
            .iter()
            .find(|c| c.name == r.chip)
            .ok_or_else(|| OpError::UnknownChip { chip: r.chip.clone() })?;
        let c = cost(&r.op, chip)?;
        out.push(Comparison {
            record: r.clone(),
            predicted_cycles: c.cycles,
            error: rel_error(c.cycles as f64, r.total_estimated_cycles as f64),
        });
    }
    Ok(out)
}

/// Error statistics of a group of comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ErrorStats {
    /// Records.
    pub n: usize,
    /// Median error.
    pub median: f64,
    /// 90th percentile error (nearest rank).
    pub p90: f64,
    /// Largest error.
    pub max: f64,
}

/// Statistics of a list of errors (nearest-rank percentiles).
pub fn stats(errors: &[f64]) -> ErrorStats {
    let mut e: Vec<f64> = errors.to_vec();
    e.sort_by(f64::total_cmp);
    let pct = |q: f64| -> f64 {
        if e.is_empty() {
            return 0.0;
        }
        let rank = ((q * e.len() as f64).ceil() as usize).clamp(1, e.len());
        e[rank - 1]
    };
    ErrorStats {
        n: e.len(),
        median: pct(0.5),
        p90: pct(0.9),
        max: e.last().copied().unwrap_or(0.0),
    }
}

/// Groups comparisons by `key` and computes statistics per group.
pub fn grouped<F: Fn(&Comparison) -> String>(cmp: &[Comparison], key: F) -> BTreeMap<String, ErrorStats> {
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for c in cmp {
        groups.entry(key(c)).or_default().push(c.error);
    }
    groups.into_iter().map(|(k, v)| (k, stats(&v))).collect()
}

/// A text table of per-chip and per-op-kind errors, for all records and for the held-out split.
pub fn report(cmp: &[Comparison], holdout_percent: u64) -> String {
    report_fold(cmp, holdout_percent, 0)
}

/// [`report`] for the fold starting at `offset` %.
pub fn report_fold(cmp: &[Comparison], holdout_percent: u64, offset: u64) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    let held: Vec<Comparison> = cmp
        .iter()
        .filter(|c| c.record.held_out_fold(holdout_percent, offset))
        .cloned()
        .collect();
    let train: Vec<Comparison> = cmp
        .iter()
        .filter(|c| !c.record.held_out_fold(holdout_percent, offset))
        .cloned()
        .collect();
    let _ = writeln!(
        s,
        "error = max(pred/est, est/pred) - 1; held-out = {holdout_percent}% of cases by hash"
    );
    let _ = writeln!(
        s,
        "{:<8} {:>5} {:>8} {:>8} {:>8} | {:>5} {:>8} {:>8} | {:>5} {:>8} {:>8}",
        "chip", "n", "median", "p90", "max", "n_fit", "median", "p90", "n_out", "median", "p90"
    );
    let all = grouped(cmp, |c| c.record.chip.clone());
    let tr = grouped(&train, |c| c.record.chip.clone());
    let ho = grouped(&held, |c| c.record.chip.clone());
    let empty = ErrorStats {
        n: 0,
        median: 0.0,
        p90: 0.0,
        max: 0.0,
    };
    for (chip, a) in &all {
        let t = tr.get(chip).copied().unwrap_or(empty);
        let h = ho.get(chip).copied().unwrap_or(empty);
        let _ = writeln!(
            s,
            "{:<8} {:>5} {:>8} {:>8} {:>8} | {:>5} {:>8} {:>8} | {:>5} {:>8} {:>8}",
            chip,
            a.n,
            pct(a.median),
            pct(a.p90),
            pct(a.max),
            t.n,
            pct(t.median),
            pct(t.p90),
            h.n,
            pct(h.median),
            pct(h.p90)
        );
    }
    let a = stats(&cmp.iter().map(|c| c.error).collect::<Vec<_>>());
    let _ = writeln!(
        s,
        "{:<8} {:>5} {:>8} {:>8} {:>8}",
        "all",
        a.n,
        pct(a.median),
        pct(a.p90),
        pct(a.max)
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<24} {:>4} {:>8} {:>8} {:>8}   per chip median (v4 v5e v5p v6e tpu7x)",
        "op", "n", "median", "p90", "max"
    );
    let by_op = grouped(cmp, |c| c.record.op.name().to_string());
    let by_op_chip = grouped(cmp, |c| format!("{}|{}", c.record.op.name(), c.record.chip));
    for (op, st) in &by_op {
        let per_chip: Vec<String> = ["v4", "v5e", "v5p", "v6e", "tpu7x"]
            .iter()
            .map(|ch| {
                by_op_chip
                    .get(&format!("{op}|{ch}"))
                    .map(|x| pct(x.median))
                    .unwrap_or_else(|| "-".into())
            })
            .collect();
        let _ = writeln!(
            s,
            "{:<24} {:>4} {:>8} {:>8} {:>8}   {}",
            op,
            st.n,
            pct(st.median),
            pct(st.p90),
            pct(st.max),
            per_chip.join(" ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_and_stats() {
        assert!((rel_error(150.0, 100.0) - 0.5).abs() < 1e-12);
        assert!((rel_error(100.0, 150.0) - 0.5).abs() < 1e-12);
        let s = stats(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]);
        assert_eq!((s.median, s.p90, s.max), (0.5, 0.9, 1.0));
    }
}
