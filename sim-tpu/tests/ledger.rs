//! The calibration ledger is current: its computed figures (held-out errors of `tpusim hlo` and `tpusim op`, the
//! band's coverage, constants at a bound) match what the records give today, and the README's agreement table
//! is the one generated from it.

mod support;

use sim_tpu::ledger::{readme_block, Ledger};

const COMMAND: &str = "cargo run --release -p sim-tpu --example ledger -- --write";
const BAND_COMMAND: &str = "cargo run --release -p sim-tpu --example band_fit -- --write";

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn ledger_figures_are_current() {
    let embedded = Ledger::embedded().unwrap();
    let mut fresh = embedded.clone();
    fresh.refresh(&support::records::ledger_computed(&root(), BAND_COMMAND).unwrap());
    assert_eq!(fresh, embedded, "sim-tpu/src/ledger.json is stale: run `{COMMAND}`");
}

#[test]
fn readme_agreement_table_is_generated_from_the_ledger() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme_block(&readme).expect("README.md has the agreement table markers");
    assert_eq!(
        block,
        Ledger::embedded().unwrap().readme_table(),
        "README's agreement table differs from the ledger: run `{COMMAND}`"
    );
}

/// Every constant set names what it was fitted on and where it lives, and every row of the table that quotes
/// a model's agreement says it is held out, or says there is no held-out figure.
#[test]
fn every_set_has_a_provenance_and_rows_quote_heldout_figures_only() {
    let l = Ledger::embedded().unwrap();
    for s in &l.constant_sets {
        assert!(
            !s.fitted_on.is_empty() && !s.file.is_empty() && !s.command.is_empty(),
            "{}",
            s.id
        );
        assert!(root().join(&s.file).exists(), "{}: {}", s.id, s.file);
    }
    for id in ["op", "hlo", "hlo_corpus", "band"] {
        let r = l.agreement.iter().find(|r| r.id == id).unwrap();
        assert!(
            r.result.contains("held out") || r.result.contains("left out"),
            "{id}: {}",
            r.result
        );
    }
    let g = l.agreement.iter().find(|r| r.id == "sc_gather").unwrap();
    // The SparseCore gather is calibrated on its one published figure (said so, never "agrees"); the
    // TensorCore take's constants come from the compiler, so its published figure is a held-out check.
    assert!(
        g.result.contains("calibrated on it") && g.result.contains("held out"),
        "{}",
        g.result
    );
}
