//! `tpusim hlo` against the compiler corpus (testdata/hlo/corpus/, tools/corpus/): argument and output bytes
//! exact on every record, and the random held-out cycle errors within a stated regression bound.

use std::io::Read;
use std::path::PathBuf;

use sim_tpu::hlo::corpus::{parse_records, Split};
use sim_tpu::hlo::score::{quantile, ratio_error, temp_error};
use sim_tpu::hlo::{cost_module, HloModule};
use sim_tpu::tensorcore::ChipModel;

fn gunzip(path: &PathBuf) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(&std::fs::read(path).unwrap()[..])
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// The random held-out median and p90 over all chips with the embedded constants (cycle constants fitted on the
/// corpus's random fit split and the reference sample's with `hlo::fit`'s objective; README "Generalization"):
/// 8.9 % median and 36.8 % p90 on 366 records, from 9.7 % and 40.8 % at the stop before (this stop: `hlo::fit`,
/// `loop_convert`, `narrow_reduce`, `epilogue_sweep`, `prologue`, the small-tile copies and the 1x1 kernel
/// gradient), 9.7 % and 42.6 %, 14.2 % and 60.0 % and 17.4 % and 71.1 % at the stops before that; a little room
/// for the corpus to grow: a rule or constant change that makes unseen programs worse fails here. (The issue's
/// goals are 15 % and 40 % per chip; the p90 is not met on v6e, 53.1 %.)
const HELDOUT_MEDIAN_MAX: f64 = 0.10;
const HELDOUT_P90_MAX: f64 = 0.39;
/// The goal for temp bytes, per chip, on the random held-out records; met on every chip (v5p 16.4 %, from
/// 27.7 % before `hlo::temp`'s rules: scalar reductions before their epilogue, v5p's relaid-out matrix-vector
/// vectors, gathered rows and narrow tables' copies).
const HELDOUT_TEMP_MEDIAN_MAX: f64 = 0.25;

#[test]
fn corpus_bytes_exact_and_heldout_within_bound() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/hlo/corpus");
    let recs = parse_records(&gunzip(&dir.join("records.jsonl.gz"))).unwrap();
    assert!(recs.len() >= 1800, "{}", recs.len());
    let mut heldout = Vec::new();
    let mut temps: std::collections::BTreeMap<String, Vec<f64>> = std::collections::BTreeMap::new();
    let mut modules = std::collections::BTreeMap::new();
    for r in &recs {
        let m = modules
            .entry(r.hlo.clone())
            .or_insert_with(|| HloModule::parse(&gunzip(&dir.join("hlo").join(&r.hlo))).unwrap());
        let c = cost_module(m, &ChipModel::preset(&r.chip).unwrap()).unwrap();
        assert_eq!(c.argument_bytes, r.argument_bytes, "{} argument bytes", r.id);
        assert_eq!(c.output_bytes, r.output_bytes, "{} output bytes", r.id);
        if Split::Random.checks(r) {
            temps
                .entry(r.chip.clone())
                .or_default()
                .push(temp_error(c.temp_bytes, r.temp_bytes));
            if r.estimate_complete && r.total_estimated_cycles > 0 {
                heldout.push(ratio_error(c.total_cycles as f64, r.total_estimated_cycles as f64));
            }
        }
    }
    assert!(heldout.len() >= 100, "{}", heldout.len());
    let med = quantile(&heldout, 0.5);
    assert!(med <= HELDOUT_MEDIAN_MAX, "random held-out median {med:.3}");
    let p90 = quantile(&heldout, 0.9);
    assert!(p90 <= HELDOUT_P90_MAX, "random held-out p90 {p90:.3}");
    assert_eq!(temps.len(), 5);
    for (chip, t) in &temps {
        let m = quantile(t, 0.5);
        assert!(
            m <= HELDOUT_TEMP_MEDIAN_MAX,
            "{chip}: random held-out temp median {m:.3}"
        );
    }
}
