//! Regenerates the error band of `tpusim hlo` and `tpusim op` (`sim-tpu/src/band/band.json`) from the
//! calibration records' fit/held-out split, and prints its measured coverage. Run it after any refit.
//!
//! `cargo run --release -p sim-tpu --example band_fit [-- --write]`

#[path = "../tests/support/records.rs"]
mod records;

use sim_tpu::band::{BandData, BAND_LEVEL};

/// The command that regenerates the band data.
const COMMAND: &str = "cargo run --release -p sim-tpu --example band_fit -- --write";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let write = std::env::args().any(|a| a == "--write");
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let data: BandData = records::band_data(&root, COMMAND)?;
    for (name, b) in [("hlo", &data.hlo), ("op", &data.op)] {
        println!("{name}: {}", b.source);
        for (c, cb) in &b.classes {
            println!(
                "  {:<24} records {:>4} weight {:>7.2}  band x{:.3}..x{:.3}  median error {:.1}%",
                c.as_str(),
                cb.records,
                cb.weight,
                cb.low_ratio,
                cb.high_ratio,
                cb.median_error * 100.0
            );
        }
        println!(
            "  fallback band x{:.3}..x{:.3}; {} domain cells; coverage of the {:.0}% band {}/{} = {:.1}%",
            b.fallback.low_ratio,
            b.fallback.high_ratio,
            b.domain.len(),
            BAND_LEVEL * 100.0,
            b.coverage.inside,
            b.coverage.records,
            b.coverage.share * 100.0
        );
    }
    if write {
        let out = root.join("sim-tpu/src/band/band.json");
        std::fs::write(&out, serde_json::to_string_pretty(&data)? + "\n")?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
