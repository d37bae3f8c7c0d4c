//! Prints the TensorCore model's error against the XLA TPU compiler's own estimates, per chip and per op kind,
//! for all records and for the held-out split.
//!
//! `cargo run --release -p sim-tpu --example tensorcore_calibration [-- RECORDS.jsonl[.gz]] [--worst N] [--plans]
//! [--held-out] [--kernels]`: `--held-out` lists only the cases held out of the fit (`HELDOUT_PERCENT`),
//! `--kernels` each listed record's kernels with their cycles.

use std::io::Read;

use sim_tpu::tensorcore::calibration::{compare, parse_records, report, HELDOUT_PERCENT};
use sim_tpu::tensorcore::cost::plan_mxu;
use sim_tpu::tensorcore::lower::Work;
use sim_tpu::tensorcore::{cost, kernels, Calibration, CHIP_NAMES};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/ops/tc_records.jsonl.gz").to_string();
    let mut worst = 0usize;
    let mut plans = false;
    let mut held_only = false;
    let mut show_kernels = false;
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--plans" {
            plans = true;
            i += 1;
        } else if args[i] == "--held-out" {
            held_only = true;
            i += 1;
        } else if args[i] == "--kernels" {
            show_kernels = true;
            i += 1;
        } else if args[i] == "--worst" {
            worst = args.get(i + 1).ok_or("--worst needs a number")?.parse()?;
            i += 2;
        } else {
            path = args[i].clone();
            i += 1;
        }
    }
    let text = read_text(&path)?;
    let records = parse_records(&text)?;
    let chips = Calibration::embedded().models()?;
    let cmp = compare(&records, &chips)?;
    println!("{} records from {path}; chips {}", cmp.len(), CHIP_NAMES.join(", "));
    print!("{}", report(&cmp, 30));
    if worst > 0 {
        let mut w: Vec<_> = cmp
            .iter()
            .filter(|c| !held_only || c.record.held_out(HELDOUT_PERCENT))
            .cloned()
            .collect();
        w.sort_by(|a, b| b.error.total_cmp(&a.error));
        println!();
        for c in w.iter().take(worst) {
            println!(
                "{:>7.1}% {:<6} pred {:>9} est {:>9} {}",
                100.0 * c.error,
                c.record.chip,
                c.predicted_cycles,
                c.record.total_estimated_cycles,
                c.record.case_key()
            );
            let chip = chips.iter().find(|x| x.name == c.record.chip).ok_or("chip")?;
            if show_kernels {
                for k in cost(&c.record.op, chip)?.kernels {
                    println!("          kernel {:<20} {:>9} {:?}", k.name, k.cycles, k.bound);
                }
            }
            if plans {
                for k in kernels(&c.record.op, chip)? {
                    if let Work::Mxu(w) = &k.work {
                        let p = plan_mxu(w, chip);
                        println!(
                            "          plan tm {} tn {} tkb {} iters {} vmem {} body {:.0} mxu {:.0} {:?}",
                            p.tm, p.tn, p.tkb, p.iterations, p.vmem_bytes, p.body_cycles, p.mxu_cycles, p.bound
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

fn read_text(path: &str) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    let mut text = String::new();
    if path.ends_with(".gz") {
        flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut text)?;
    } else {
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    Ok(text)
}
