//! Fits the TensorCore model's constants to the compiler's estimates, per chip, by coordinate descent on the
//! log of each constant minimising the mean absolute log error. The model's structure (padding, windows, MXU
//! passes) is fixed; only its per-generation rates move.
//!
//! `cargo run --release -p sim-tpu --example tensorcore_fit -- [--holdout PCT] [--write]`
//! `--holdout 30` fits on the 70% training cases only (to estimate generalisation); `--write` rewrites
//! sim-tpu/src/tensorcore/calibration.json.

use std::io::Read;

use sim_tpu::tensorcore::calibration::{compare, parse_records, report, CalibRecord};
use sim_tpu::tensorcore::{cost, Calibration, ChipModel};

/// Constants set from published facts or structural thresholds, never fitted.
const FIXED: &[&str] = &["resident_limit_bytes", "mxu_int8_speedup", "mxu_fp8_speedup"];

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

/// Physical ranges the fit may not leave (a constant the training records cannot pin down stays plausible).
fn bounds(chip: &str, name: &str) -> (f64, f64) {
    match name {
        "mm_hbm_bytes_per_cycle" => {
            let b = modelled_hbm_bytes_per_cycle(chip);
            (0.5 * b, 2.5 * b)
        }
        "mxu_efficiency" => (1.0, 2.0),
        "mxu_f32_factor" => (1.0, 6.0),
        "mm_epilogue_serial" => (0.0, 1.0),
        "conv_factor" => (0.5, 4.0),
        "mm_acc_32bit" => (0.0, 16.0),
        "mxu_weight_load_cycles" => (0.0, 256.0),
        "mxu_iter_cycles" => (0.0, 2000.0),
        "binary_16bit_factor" | "reduce_16bit_factor" => (0.25, 1.5),
        _ => (0.0, f64::INFINITY),
    }
}

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

fn fit_chip(records: &[&CalibRecord], chip: &mut ChipModel) {
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
                    let chip_name = chip.name.clone();
                    let mut trial = chip.clone();
                    for (n, v) in trial.params.fields_mut() {
                        if n == name {
                            let (lo, hi) = bounds(&chip_name, n);
                            let next = if *v == 0.0 { 0.01 } else { *v * f };
                            *v = next.clamp(lo, hi);
                        }
                    }
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
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let holdout: u64 = match args.iter().position(|a| a == "--holdout") {
        Some(i) => args.get(i + 1).ok_or("--holdout needs a percentage")?.parse()?,
        None => 0,
    };
    let write = args.iter().any(|a| a == "--write");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/ops/tc_records.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&std::fs::read(path)?[..]).read_to_string(&mut text)?;
    let records = parse_records(&text)?;
    let mut cal = Calibration::embedded();
    for chip in &mut cal.chips {
        let train: Vec<&CalibRecord> = records
            .iter()
            .filter(|r| r.chip == chip.name && r.total_estimated_cycles > 0 && !r.held_out(holdout))
            .collect();
        fit_chip(&train, chip);
        eprintln!(
            "{}: fitted on {} records, loss {:.4}",
            chip.name,
            train.len(),
            loss(&train, chip)
        );
    }
    let cmp = compare(&records, &cal.chips)?;
    print!("{}", report(&cmp, if holdout > 0 { holdout } else { 30 }));
    if write {
        cal.source = format!(
            "fitted by `cargo run --release -p sim-tpu --example tensorcore_fit -- --holdout {holdout} --write` to \
             testdata/ops/tc_records.jsonl.gz (compiler estimates from reference/tpu-compiler/ops.jsonl)"
        );
        let out = concat!(env!("CARGO_MANIFEST_DIR"), "/src/tensorcore/calibration.json");
        std::fs::write(out, serde_json::to_string_pretty(&cal)? + "\n")?;
        eprintln!("wrote {out}");
    }
    Ok(())
}
