//! Loading the compiler corpus (testdata/hlo/corpus/) for the calibration and fit examples: records, their
//! parsed input modules, and the per-record errors of a set of constants.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sim_tpu::hlo::corpus::{parse_records, CorpusRecord};
use sim_tpu::hlo::score::{ratio_error, temp_error};
use sim_tpu::hlo::{cost_module_with, HloModule, HloParams};
use sim_tpu::tensorcore::ChipModel;

/// A corpus record with its parsed input module.
pub struct Loaded {
    /// The record.
    pub rec: CorpusRecord,
    /// Its input HLO.
    pub module: HloModule,
}

/// The corpus directory in the repository.
pub fn default_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/hlo/corpus")
}

fn gunzip(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text
}

/// Every record of the corpus in `dir` whose chip has hlo constants, with its module parsed once per program.
pub fn load(dir: &Path) -> Vec<Loaded> {
    let recs = parse_records(&gunzip(&dir.join("records.jsonl.gz"))).expect("corpus records parse");
    let mut modules: BTreeMap<String, HloModule> = BTreeMap::new();
    recs.into_iter()
        .map(|rec| {
            let module = modules
                .entry(rec.hlo.clone())
                .or_insert_with(|| {
                    HloModule::parse(&gunzip(&dir.join("hlo").join(&rec.hlo)))
                        .unwrap_or_else(|e| panic!("{}: {e}", rec.hlo))
                })
                .clone();
            Loaded { rec, module }
        })
        .collect()
}

/// The errors of one record under one set of constants.
pub struct Errors {
    /// Cycle error (None when the record is not scored on cycles).
    pub cycles: Option<f64>,
    /// Signed log ratio of predicted over compiler cycles (None when not scored).
    pub log_ratio: Option<f64>,
    /// Temp bytes error.
    pub temp: f64,
    /// Whether argument and output bytes match exactly.
    pub bytes_exact: bool,
    /// Predicted cycles.
    pub predicted: u64,
}

/// Costs `l` with `hp` on its chip.
pub fn errors(l: &Loaded, hp: &HloParams) -> Errors {
    let chip = ChipModel::preset(&l.rec.chip).expect("corpus chip is a preset");
    let c = cost_module_with(&l.module, &chip, hp).unwrap_or_else(|e| panic!("{}: {e}", l.rec.id));
    let est = l.rec.total_estimated_cycles as f64;
    let scored = l.rec.estimate_complete && l.rec.total_estimated_cycles > 0;
    Errors {
        cycles: scored.then(|| ratio_error(c.total_cycles as f64, est)),
        log_ratio: scored.then(|| (c.total_cycles.max(1) as f64 / est).ln()),
        temp: temp_error(c.temp_bytes, l.rec.temp_bytes),
        bytes_exact: c.argument_bytes == l.rec.argument_bytes && c.output_bytes == l.rec.output_bytes,
        predicted: c.total_cycles,
    }
}
