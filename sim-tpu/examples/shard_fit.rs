//! The slice model's collective costs against the compiler's scheduler (`testdata/shard/collectives.jsonl.gz`,
//! or a probe output given as the argument): per chip family and part of the split, the median and 90th
//! percentile of the bandwidth term's relative error, at 1 MiB per device and more.
//!
//! `cargo run --release -p sim-tpu --example shard_fit [-- FILE.jsonl[.gz]] [--rows]`

use std::collections::BTreeMap;
use std::io::Read;

use sim_tpu::chips::Chip;
use sim_tpu::hlo::spmd::oracle::{error_quantiles, Part, ProbeRecord};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rows = args.iter().any(|a| a == "--rows");
    let path = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/shard/collectives.jsonl.gz").into());
    let raw = std::fs::read(&path)?;
    let mut text = String::new();
    if path.ends_with(".gz") {
        flate2::read::GzDecoder::new(&raw[..]).read_to_string(&mut text)?;
    } else {
        text = String::from_utf8(raw)?;
    }
    let mut errs: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for line in text.lines() {
        let Ok(r) = serde_json::from_str::<ProbeRecord>(line) else {
            continue;
        };
        if !r.priced() || r.bytes_per_device < 1 << 20 {
            continue;
        }
        let chip = Chip::preset(&r.chip)?;
        let c = match r.predict(&chip) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{} {} {:?}: {e}", r.topology, r.kind, r.axes);
                continue;
            }
        };
        let model_us = c.bandwidth_cycles as f64 * 1e6 / (chip.spec.model_clock_mhz as f64 * 1e6);
        let sched = r.scheduler_us.unwrap_or(0.0);
        let e = model_us / sched - 1.0;
        if rows {
            println!(
                "{:<12} {:<14} {:<6} {:>4} {:>10} {:>10.2} {:>10.2} {:>+7.1}% {:?} {}",
                r.topology,
                r.kind,
                r.axes.join(""),
                r.group_size,
                r.bytes_per_device,
                sched,
                model_us,
                e * 100.0,
                c.algorithm,
                r.algorithm.clone().unwrap_or_default()
            );
        }
        let part = match r.part() {
            Part::Fit => "fit",
            Part::HeldOutSize => "held-out size",
            Part::HeldOutTopology => "held-out topology",
        };
        errs.entry((r.chip.clone(), part.to_string())).or_default().push(e);
    }
    println!("{:<6} {:<18} {:>5} {:>8} {:>8}", "chip", "part", "n", "median", "p90");
    for ((chip, part), e) in &errs {
        let (m, p) = error_quantiles(e);
        println!(
            "{chip:<6} {part:<18} {:>5} {:>7.1}% {:>7.1}%",
            e.len(),
            m * 100.0,
            p * 100.0
        );
    }
    published()
}

/// The published measurements (`testdata/shard/published.json`) against the model, bandwidth and latency.
fn published() -> Result<(), Box<dyn std::error::Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/shard/published.json");
    let file = sim_tpu::hlo::spmd::published::parse(&std::fs::read_to_string(path)?)?;
    println!(
        "\n{:<40} {:>10} {:>10} {:>10} {:>7} role",
        "published", "measured", "model", "latency", "ratio"
    );
    for p in &file.points {
        let chip = Chip::preset(&p.chip)?;
        let m = p.predict(&chip)?;
        println!(
            "{:<40} {:>10.1} {:>10.1} {:>10.1} {:>7.2} {:?}",
            p.id,
            p.measured_us,
            m.total_us(),
            m.latency_us,
            p.measured_us / m.total_us(),
            p.role
        );
    }
    Ok(())
}
