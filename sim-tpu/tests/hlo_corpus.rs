//! `tpusim hlo` against the compiler corpus (testdata/hlo/corpus/, tools/corpus/): argument and output bytes
//! exact on every record, and the random held-out cycle errors within a stated regression bound.

use std::io::Read;
use std::path::PathBuf;

use sim_tpu::hlo::corpus::{parse_records, Split};
use sim_tpu::hlo::score::{quantile, ratio_error};
use sim_tpu::hlo::{cost_module, HloModule};
use sim_tpu::tensorcore::ChipModel;

fn gunzip(path: &PathBuf) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(&std::fs::read(path).unwrap()[..])
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// The random held-out median over all chips with the embedded constants (36.5 % on 326 records; README
/// "Generalization"), with a little room for the corpus to grow: a rule change that makes unseen programs
/// worse fails here. (The goal is 15 %.)
const HELDOUT_MEDIAN_MAX: f64 = 0.40;

#[test]
fn corpus_bytes_exact_and_heldout_within_bound() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/hlo/corpus");
    let recs = parse_records(&gunzip(&dir.join("records.jsonl.gz"))).unwrap();
    assert!(recs.len() >= 300, "{}", recs.len());
    let mut heldout = Vec::new();
    let mut modules = std::collections::BTreeMap::new();
    for r in &recs {
        let m = modules
            .entry(r.hlo.clone())
            .or_insert_with(|| HloModule::parse(&gunzip(&dir.join("hlo").join(&r.hlo))).unwrap());
        let c = cost_module(m, &ChipModel::preset(&r.chip).unwrap()).unwrap();
        assert_eq!(c.argument_bytes, r.argument_bytes, "{} argument bytes", r.id);
        assert_eq!(c.output_bytes, r.output_bytes, "{} output bytes", r.id);
        if Split::Random.checks(r) && r.estimate_complete {
            heldout.push(ratio_error(c.total_cycles as f64, r.total_estimated_cycles as f64));
        }
    }
    assert!(heldout.len() >= 50, "{}", heldout.len());
    let med = quantile(&heldout, 0.5);
    assert!(med <= HELDOUT_MEDIAN_MAX, "random held-out median {med:.3}");
}
