//! Fits the TensorCore model's constants to the compiler's estimates, per chip, by coordinate descent on the
//! log of each constant minimising the mean absolute log error. The model's structure (padding, windows, MXU
//! passes) is fixed; only its per-generation rates move.
//!
//! `cargo run --release -p sim-tpu --example tensorcore_fit -- [--holdout PCT] [--fold-offset PCT] [--restarts N] [--from CALIBRATION.json] [--write]`
//! Records: testdata/ops/tc_records.jsonl.gz and the corpus's testdata/ops/corpus_records.jsonl.gz.
//! `--holdout 30` fits on the 70% training cases only (to estimate generalisation); `--write` rewrites
//! sim-tpu/src/tensorcore/calibration.json.

use std::io::Read;

use sim_tpu::tensorcore::calibration::{
    compare, fit_bounds as bounds, parse_records, report_fold, CalibRecord, FIXED_CONSTANTS as FIXED,
};
use sim_tpu::tensorcore::{cost, Calibration, ChipModel};

fn loss(records: &[&CalibRecord], chip: &ChipModel) -> f64 {
    let mut sum = 0.0;
    for r in records {
        let pred = cost(&r.op, chip).map(|c| c.cycles as f64).unwrap_or(1.0).max(1.0);
        let e = (pred / r.total_estimated_cycles as f64).ln().abs();
        // Errors beyond ~40% count less: the targets are a median and a 90th percentile.
        sum += if e < 0.35 { e } else { 0.35 + 0.5 * (e - 0.35) };
    }
    sum / records.len().max(1) as f64
}

fn descend(records: &[&CalibRecord], chip: &mut ChipModel) -> f64 {
    let steps = [2.0, 1.5, 1.25, 1.1, 1.05, 1.02, 1.01];
    let mut best = loss(records, chip);
    for &step in &steps {
        loop {
            let mut improved = false;
            let names: Vec<&'static str> = chip.params.fields_mut().into_iter().map(|(n, _)| n).collect();
            for name in names {
                if FIXED.contains(&name) {
                    continue;
                }
                for f in [step, 1.0 / step] {
                    let trial = with_param(chip, name, |v| v * f);
                    let l = loss(records, &trial);
                    if l < best - 1e-12 {
                        best = l;
                        *chip = trial;
                        improved = true;
                    }
                }
            }
            if !improved {
                break;
            }
        }
    }
    best
}

/// A copy of `chip` with one constant changed by `f`, kept inside its bounds.
fn with_param(chip: &ChipModel, name: &str, f: impl Fn(f64) -> f64) -> ChipModel {
    let mut trial = chip.clone();
    let chip_name = chip.name.clone();
    for (n, v) in trial.params.fields_mut() {
        if n == name {
            let (lo, hi) = bounds(&chip_name, n);
            let next = if *v == 0.0 { 0.01 } else { f(*v) };
            *v = next.clamp(lo, hi);
        }
    }
    // The fit is on presets: the op model's stream rate is the calibrated constant itself.
    trial.hbm.op_stream_bytes_per_cycle = trial.params.mm_hbm_bytes_per_cycle;
    trial
}

/// Coordinate descent, then `restarts` random perturbations of the best point (deterministic generator), each
/// descended again; keeps the best.
fn fit_chip(records: &[&CalibRecord], chip: &mut ChipModel, restarts: u32) {
    let mut best_loss = descend(records, chip);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    for _ in 0..restarts {
        let mut trial = chip.clone();
        let names: Vec<&'static str> = trial.params.fields_mut().into_iter().map(|(n, _)| n).collect();
        for name in names {
            if FIXED.contains(&name) {
                continue;
            }
            let f = (0.6 * (uniform() - 0.5)).exp();
            trial = with_param(&trial, name, |v| v * f);
        }
        let l = descend(records, &mut trial);
        if l < best_loss {
            best_loss = l;
            *chip = trial;
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let holdout: u64 = match args.iter().position(|a| a == "--holdout") {
        Some(i) => args.get(i + 1).ok_or("--holdout needs a percentage")?.parse()?,
        None => 0,
    };
    let write = args.iter().any(|a| a == "--write");
    let offset: u64 = match args.iter().position(|a| a == "--fold-offset") {
        Some(i) => args.get(i + 1).ok_or("--fold-offset needs a percentage")?.parse()?,
        None => 0,
    };
    let restarts: u32 = match args.iter().position(|a| a == "--restarts") {
        Some(i) => args.get(i + 1).ok_or("--restarts needs a count")?.parse()?,
        None => 0,
    };
    // The reference sample and the corpus's op records (skinny and decode matmuls, stride-2 convolutions).
    let mut records = Vec::new();
    // `--reference-only`: the reference sample alone (the corpus's skinny shapes pull the square ones off).
    let reference_only = args.iter().any(|a| a == "--reference-only");
    let files: &[&str] = if reference_only {
        &["tc_records.jsonl.gz"]
    } else {
        &["tc_records.jsonl.gz", "corpus_records.jsonl.gz"]
    };
    for name in files {
        let path = format!("{}/../testdata/ops/{name}", env!("CARGO_MANIFEST_DIR"));
        let mut text = String::new();
        flate2::read::GzDecoder::new(&std::fs::read(&path)?[..]).read_to_string(&mut text)?;
        records.extend(parse_records(&text)?);
    }
    let mut cal = match args.iter().position(|a| a == "--from") {
        Some(i) => serde_json::from_str(&std::fs::read_to_string(args.get(i + 1).ok_or("--from needs a file")?)?)?,
        None => Calibration::embedded(),
    };
    let mut models = cal.models()?;
    for chip in &mut models {
        let train: Vec<&CalibRecord> = records
            .iter()
            .filter(|r| r.chip == chip.name && r.total_estimated_cycles > 0 && !r.held_out_fold(holdout, offset))
            .collect();
        fit_chip(&train, chip, restarts);
        eprintln!(
            "{}: fitted on {} records, loss {:.4}",
            chip.name,
            train.len(),
            loss(&train, chip)
        );
    }
    let cmp = compare(&records, &models)?;
    cal.chips = models.iter().map(|m| m.calibrated()).collect();
    print!("{}", report_fold(&cmp, if holdout > 0 { holdout } else { 30 }, offset));
    if write {
        cal.source = format!(
            "fitted by `cargo run --release -p sim-tpu --example tensorcore_fit -- --holdout {holdout} --write` to \
             testdata/ops/tc_records.jsonl.gz (compiler estimates from reference/tpu-compiler/ops.jsonl) and \
             testdata/ops/corpus_records.jsonl.gz (tools/corpus/gen_ops.py, seed 25)"
        );
        let out = concat!(env!("CARGO_MANIFEST_DIR"), "/src/tensorcore/calibration.json");
        std::fs::write(out, serde_json::to_string_pretty(&cal)? + "\n")?;
        eprintln!("wrote {out}");
    }
    Ok(())
}
