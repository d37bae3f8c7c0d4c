//! Refreshes the calibration ledger (`sim-tpu/src/ledger.json`: held-out figures, band coverage, constants at a
//! bound) from the repository's records and regenerates the README's agreement table from it. Run it after
//! any refit and after `band_fit`.
//!
//! `cargo run --release -p sim-tpu --example ledger [-- --write]`

#[path = "../tests/support/records.rs"]
mod records;

use sim_tpu::ledger::{splice_readme, Ledger};

/// The command `band_fit` records in the band data.
const BAND_COMMAND: &str = "cargo run --release -p sim-tpu --example band_fit -- --write";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let write = std::env::args().any(|a| a == "--write");
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut ledger = Ledger::embedded()?;
    ledger.refresh(&records::ledger_computed(&root, BAND_COMMAND)?);
    for s in &ledger.constant_sets {
        println!("{} ({})", s.id, s.file);
        for f in &s.heldout {
            println!("  {}: {}", f.what, f.value);
        }
        for b in &s.bounds_hit {
            println!("  at a bound: {b}");
        }
    }
    let table = ledger.readme_table();
    print!("\n{table}");
    if write {
        let out = root.join("sim-tpu/src/ledger.json");
        std::fs::write(&out, serde_json::to_string_pretty(&ledger)? + "\n")?;
        let readme_path = root.join("README.md");
        let readme = std::fs::read_to_string(&readme_path)?;
        let spliced = splice_readme(&readme, &table).ok_or("README.md lacks the agreement table markers")?;
        std::fs::write(&readme_path, spliced)?;
        eprintln!("wrote {} and {}", out.display(), readme_path.display());
    }
    Ok(())
}
