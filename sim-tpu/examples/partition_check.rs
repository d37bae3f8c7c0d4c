//! The partitioner against the compiler's records (`testdata/shard/partition/records.jsonl.gz`): per case,
//! the collectives by kind (count, bytes per device, group) of tpusim's partition and of the compiler's
//! per-device module, per-device compute, and memory.
//!
//! `cargo run --release -p sim-tpu --example partition_check [RECORDS.jsonl.gz]`

use std::io::Read;

use sim_tpu::hlo::partition_oracle::Record;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/shard/partition/records.jsonl.gz"
        )
        .into()
    });
    // Held-out compute errors: GSPMD-annotated programs, then shard_map programs.
    let (mut held_out_errors, mut smap_errors) = (Vec::new(), Vec::new());
    let mut text = String::new();
    flate2::read::GzDecoder::new(&std::fs::read(&path)?[..]).read_to_string(&mut text)?;
    for line in text.lines() {
        let r: Record = serde_json::from_str(line)?;
        let c = r.compare()?;
        if c.held_out {
            let e = (c.compute_cycles as f64 / c.compiler_estimated_cycles as f64 - 1.0).abs();
            if c.case.starts_with("smap.") {
                smap_errors.push(e);
            } else {
                held_out_errors.push(e);
            }
        }
        let kinds = |m: &std::collections::BTreeMap<_, sim_tpu::hlo::partition_oracle::KindTotal>| {
            m.iter()
                .map(|(k, t): (&sim_tpu::hlo::collective::CollectiveKind, _)| {
                    format!(
                        "{}x{} {:.2}MiB g{}",
                        t.count,
                        k.name(),
                        t.bytes as f64 / 1048576.0,
                        t.group
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "{}{}{} warn {}\n  ours:     {}\n  compiler: {}\n  compute {} vs compiler module {} ({:+.1}%) vs estimates {} ({:+.1}%)\n  \
             memory arg/out/temp MiB {:.1}/{:.1}/{:.1} vs {:.1}/{:.1}/{:.1}",
            c.case,
            if c.held_out { "" } else { " (design)" },
            if c.compiler_windowed { " (compiler: windowed einsum)" } else { "" },
            c.warnings,
            kinds(&c.ours),
            kinds(&c.compiler),
            c.compute_cycles,
            c.compiler_module_compute_cycles,
            100.0 * (c.compute_cycles as f64 / c.compiler_module_compute_cycles.max(1) as f64 - 1.0),
            c.compiler_estimated_cycles,
            100.0 * (c.compute_cycles as f64 / c.compiler_estimated_cycles.max(1) as f64 - 1.0),
            c.memory.argument_size_in_bytes as f64 / 1048576.0,
            c.memory.output_size_in_bytes as f64 / 1048576.0,
            c.memory.temp_size_in_bytes as f64 / 1048576.0,
            c.compiler_memory.argument_size_in_bytes as f64 / 1048576.0,
            c.compiler_memory.output_size_in_bytes as f64 / 1048576.0,
            c.compiler_memory.temp_size_in_bytes as f64 / 1048576.0,
        );
    }
    for (what, mut errs) in [("annotated", held_out_errors), ("shard_map", smap_errors)] {
        errs.sort_by(f64::total_cmp);
        if let Some(max) = errs.last() {
            println!(
                "held out, {what}: {} records, compute against the compiler's estimates (loops counted per trip): \
                 median {:.1}%, max {:.1}%",
                errs.len(),
                100.0 * errs[errs.len() / 2],
                100.0 * max
            );
        }
    }
    Ok(())
}
