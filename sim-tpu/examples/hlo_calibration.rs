//! Prints `tpusim hlo`'s errors against the compiler on the calibration programs (testdata/hlo/programs.json),
//! separately for the records constants may be fitted on (`fit`) and the held-out ones.
//!
//! `cargo run --release -p sim-tpu --example hlo_calibration [-- --params FILE] [-- --verbose]` (`--params`: constants
//! from a file in calibration.json's format instead of the installed ones, for the sample as for the corpus)
//!
//! With `--corpus`, the same against the compiler corpus (testdata/hlo/corpus/) under its three splits, per chip:
//! random held-out, size extrapolation (the largest fifth of each family) and per family (a leave-one-family-out
//! figure when the constants were fitted without that family, as the embedded ones, fitted on
//! testdata/hlo/programs.json only, were for every corpus family). `--split random|size|family:NAME` prints one
//! split's check set; `--params FILE` costs with constants from a file in calibration.json's format (hlo_fit's
//! output for that split).
//!
//! `cargo run --release -p sim-tpu --example hlo_calibration -- --corpus [--split S] [--params FILE] [--verbose]`

use std::collections::BTreeMap;
use std::path::PathBuf;

use sim_tpu::hlo::corpus::Split;
use sim_tpu::hlo::score::quantile;
use sim_tpu::hlo::{hlo_params, HloParams};

#[allow(dead_code)]
mod common;
#[path = "../tests/support/records.rs"]
mod records;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let verbose = args.iter().any(|a| a == "--verbose");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let params: Vec<HloParams> = match value("--params") {
        Some(f) => serde_json::from_str(&std::fs::read_to_string(&f).expect("--params file")).expect("params"),
        None => hlo_params(),
    };
    if args.iter().any(|a| a == "--corpus") {
        let split = value("--split").map(|s| Split::parse(&s).expect("--split"));
        corpus_report(&params, split, verbose);
        return;
    }
    sample_report(&params, verbose);
}

/// Errors on the reference sample (testdata/hlo/programs.json), per split and chip, costed with `params`.
fn sample_report(params: &[HloParams], verbose: bool) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let errs = records::sample_errors(&root, params).expect("reference sample");
    // (split, chip) -> cycle errors, temp errors
    let mut cyc: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut tmp: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut bytes_bad = 0;
    for e in &errs {
        if !e.bytes_exact {
            bytes_bad += 1;
            println!("BYTES {}: argument or output bytes differ", e.id);
        }
        for key in [(e.split.clone(), e.chip.clone()), (e.split.clone(), "all".to_string())] {
            tmp.entry(key.clone()).or_default().push(e.temp);
            if let Some(c) = e.cycles {
                cyc.entry(key).or_default().push(c);
            }
        }
        if verbose {
            let cycles = match e.cycles {
                Some(_) => format!(
                    "pred {:>11} est {:>11.0} {:+7.1}%",
                    e.predicted_cycles,
                    e.compiler_cycles,
                    (e.predicted_cycles as f64 / e.compiler_cycles - 1.0) * 100.0
                ),
                None => "(cycles not scored)".to_string(),
            };
            println!(
                "{:6} {:62} {cycles}  temp {:>11} vs {:>11}  kernels {}",
                e.split, e.id, e.predicted_temp_bytes, e.compiler_temp_bytes, e.kernels
            );
        }
    }
    println!("argument/output bytes mismatches: {bytes_bad} of {}", errs.len());
    println!(
        "{:8} {:6} {:>4} {:>9} {:>9} {:>10}",
        "split", "chip", "n", "cyc med", "cyc p90", "temp med"
    );
    for ((split, ch), v) in &cyc {
        let t = &tmp[&(split.clone(), ch.clone())];
        println!(
            "{:8} {:6} {:>4} {:>8.1}% {:>8.1}% {:>9.1}%",
            split,
            ch,
            v.len(),
            quantile(v, 0.5) * 100.0,
            quantile(v, 0.9) * 100.0,
            quantile(t, 0.5) * 100.0
        );
    }
}

/// One line of a table: n, median and p90 of the cycle errors, median temp error.
fn row(label: &str, cyc: &[f64], tmp: &[f64]) {
    println!(
        "{:28} {:>5} {:>8.1}% {:>8.1}% {:>9.1}%",
        label,
        cyc.len(),
        quantile(cyc, 0.5) * 100.0,
        quantile(cyc, 0.9) * 100.0,
        quantile(tmp, 0.5) * 100.0
    );
}

/// Errors on the corpus's check sets, per chip (and per family for the family splits).
fn corpus_report(params: &[HloParams], only: Option<Split>, verbose: bool) {
    let loaded = common::corpus::load(&common::corpus::default_dir());
    let mut errs = Vec::new();
    let mut bytes_bad = 0;
    for l in &loaded {
        let Some(hp) = params.iter().find(|h| h.name == l.rec.chip) else {
            continue;
        };
        let e = common::corpus::errors(l, hp);
        if !e.bytes_exact {
            bytes_bad += 1;
        }
        if verbose {
            println!(
                "{:36} {:8} {:7} pred {:>12} est {:>12} {}",
                l.rec.id,
                format!("{:?}", l.rec.split),
                format!("{:?}", l.rec.size_split),
                e.predicted,
                l.rec.total_estimated_cycles,
                e.cycles
                    .map(|_| format!(
                        "{:+.1}%",
                        (e.predicted as f64 / l.rec.total_estimated_cycles as f64 - 1.0) * 100.0
                    ))
                    .unwrap_or("not scored".into())
            );
        }
        errs.push((l, e));
    }
    println!(
        "corpus: {} records; argument/output bytes mismatches: {bytes_bad}",
        errs.len()
    );
    let mut families: Vec<String> = errs.iter().map(|(l, _)| l.rec.family.clone()).collect();
    families.dedup();
    families.sort();
    families.dedup();
    let splits: Vec<Split> = match only {
        Some(s) => vec![s],
        None => [Split::Random, Split::SizeExtrapolation]
            .into_iter()
            .chain(families.iter().map(|f| Split::LeaveFamilyOut(f.clone())))
            .collect(),
    };
    let mut chips: Vec<String> = errs.iter().map(|(l, _)| l.rec.chip.clone()).collect();
    chips.sort();
    chips.dedup();
    println!(
        "{:28} {:>5} {:>9} {:>9} {:>10}",
        "check set / chip", "n", "cyc med", "cyc p90", "temp med"
    );
    for split in &splits {
        if *split == Split::Random {
            // The records the random split's constants are fitted on (a check of the fit, not evidence of
            // accuracy), and every scored record (fit and held-out).
            for (label, fit_only) in [("random fit side", true), ("all records", false)] {
                for chip in chips.iter().map(String::as_str).chain(["all"]) {
                    let sel: Vec<_> = errs
                        .iter()
                        .filter(|(l, _)| (!fit_only || split.fits_on(&l.rec)) && (chip == "all" || l.rec.chip == chip))
                        .collect();
                    let cyc: Vec<f64> = sel.iter().filter_map(|(_, e)| e.cycles).collect();
                    let tmp: Vec<f64> = sel.iter().map(|(_, e)| e.temp).collect();
                    row(&format!("{label} {chip}"), &cyc, &tmp);
                }
            }
        }
        let label = match split {
            Split::Random => "random held-out".to_string(),
            Split::SizeExtrapolation => "size: largest fifth".to_string(),
            Split::LeaveFamilyOut(f) => format!("family {f}"),
        };
        for chip in chips.iter().map(String::as_str).chain(["all"]) {
            let sel: Vec<_> = errs
                .iter()
                .filter(|(l, _)| split.checks(&l.rec) && (chip == "all" || l.rec.chip == chip))
                .collect();
            let cyc: Vec<f64> = sel.iter().filter_map(|(_, e)| e.cycles).collect();
            let tmp: Vec<f64> = sel.iter().map(|(_, e)| e.temp).collect();
            row(&format!("{label} {chip}"), &cyc, &tmp);
        }
    }
}
