//! Reading the calibration records from the repository (shared by the examples that regenerate generated
//! data and the tests that check it is current).

#![allow(dead_code)]

use std::io::Read;
use std::path::Path;

use sim_tpu::band::build::{hlo_band_from_records, op_band_from_records, ProgramRecord};
use sim_tpu::band::{BandData, BAND_LEVEL};
use sim_tpu::tensorcore::calibration::{parse_records, CalibRecord, HELDOUT_PERCENT};

/// `testdata/hlo/programs.json`.
pub fn program_records(root: &Path) -> Result<Vec<ProgramRecord>, Box<dyn std::error::Error>> {
    let p = root.join("testdata/hlo/programs.json");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?)
}

/// The compiler corpus's records (`testdata/hlo/corpus/records.jsonl.gz`) as program records, their HLO files
/// named relative to `testdata/hlo` (`corpus/hlo/<program>.hlo.txt.gz`); the random split is their split.
pub fn corpus_program_records(root: &Path) -> Result<Vec<ProgramRecord>, Box<dyn std::error::Error>> {
    use sim_tpu::hlo::corpus::{parse_records, RandomSide};
    let p = root.join("testdata/hlo/corpus/records.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?[..])
        .read_to_string(&mut text)?;
    let recs = parse_records(&text).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(recs
        .into_iter()
        .map(|r| ProgramRecord {
            id: r.id,
            program: r.program,
            hlo: format!("corpus/hlo/{}", r.hlo),
            chip: r.chip,
            split: match r.split {
                RandomSide::Fit => "fit".to_string(),
                RandomSide::Heldout => "heldout".to_string(),
            },
            estimate_complete: r.estimate_complete && r.total_estimated_cycles > 0,
            total_estimated_cycles: r.total_estimated_cycles as f64,
        })
        .collect())
}

/// The text of an HLO file of `testdata/hlo` (gzip-compressed when its name ends in `.gz`).
pub fn hlo_text(root: &Path, name: &str) -> Option<String> {
    let p = root.join("testdata/hlo").join(name);
    if name.ends_with(".gz") {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&std::fs::read(&p).ok()?[..])
            .read_to_string(&mut text)
            .ok()?;
        return Some(text);
    }
    std::fs::read_to_string(p).ok()
}

/// The op records: the op sample (`testdata/ops/tc_records.jsonl.gz`) and the corpus's op records
/// (`testdata/ops/corpus_records.jsonl.gz`); the op constants are fitted on both files' random fit part.
pub fn op_records(root: &Path) -> Result<Vec<CalibRecord>, Box<dyn std::error::Error>> {
    let mut out = op_sample_records(root)?;
    out.extend(op_corpus_records(root)?);
    Ok(out)
}

/// The op sample alone (`testdata/ops/tc_records.jsonl.gz`).
pub fn op_sample_records(root: &Path) -> Result<Vec<CalibRecord>, Box<dyn std::error::Error>> {
    read_op_records(root, "testdata/ops/tc_records.jsonl.gz")
}

/// The corpus's op records alone (`testdata/ops/corpus_records.jsonl.gz`).
pub fn op_corpus_records(root: &Path) -> Result<Vec<CalibRecord>, Box<dyn std::error::Error>> {
    read_op_records(root, "testdata/ops/corpus_records.jsonl.gz")
}

fn read_op_records(root: &Path, name: &str) -> Result<Vec<CalibRecord>, Box<dyn std::error::Error>> {
    let p = root.join(name);
    let mut text = String::new();
    flate2::read::GzDecoder::new(&std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?[..])
        .read_to_string(&mut text)?;
    Ok(parse_records(&text).map_err(|e| format!("{}: {e}", p.display()))?)
}

/// The band data, built from the records as `band_fit` writes it.
pub fn band_data(root: &Path, command: &str) -> Result<BandData, Box<dyn std::error::Error>> {
    let mut programs = program_records(root)?;
    programs.extend(corpus_program_records(root)?);
    let hlo = hlo_band_from_records(&programs, &|name| hlo_text(root, name))?;
    let op = op_band_from_records(&op_records(root)?, HELDOUT_PERCENT)?;
    Ok(BandData {
        command: command.to_string(),
        level: BAND_LEVEL,
        hlo,
        op,
    })
}

/// `tpusim hlo`'s cycle errors on the held-out program records (estimate complete), by chip.
pub fn hlo_heldout_errors(root: &Path) -> Result<Vec<(String, f64)>, Box<dyn std::error::Error>> {
    heldout_errors(root, program_records(root)?)
}

/// `tpusim hlo`'s cycle errors on the compiler corpus's random held-out records (estimate complete), by chip.
pub fn corpus_heldout_errors(root: &Path) -> Result<Vec<(String, f64)>, Box<dyn std::error::Error>> {
    heldout_errors(root, corpus_program_records(root)?)
}

fn heldout_errors(root: &Path, records: Vec<ProgramRecord>) -> Result<Vec<(String, f64)>, Box<dyn std::error::Error>> {
    use sim_tpu::hlo::score::ratio_error;
    use sim_tpu::hlo::{cost_module, HloModule};
    let mut out = Vec::new();
    for r in records {
        if r.split != "heldout" || !r.estimate_complete {
            continue;
        }
        let text = hlo_text(root, &r.hlo).ok_or_else(|| format!("{}: missing", r.hlo))?;
        let m = HloModule::parse(&text)?;
        let c = cost_module(&m, &sim_tpu::tensorcore::ChipModel::preset(&r.chip)?)?;
        out.push((
            r.chip.clone(),
            ratio_error(c.total_cycles as f64, r.total_estimated_cycles),
        ));
    }
    Ok(out)
}

/// One reference-sample record (`testdata/hlo/programs.json`) costed with a given set of constants.
pub struct SampleError {
    /// `program@chip`.
    pub id: String,
    /// Chip preset.
    pub chip: String,
    /// `fit` or `heldout`.
    pub split: String,
    /// Predicted cycles.
    pub predicted_cycles: u64,
    /// The compiler's total.
    pub compiler_cycles: f64,
    /// Cycle error (None when the compiler's estimate is incomplete: not scored).
    pub cycles: Option<f64>,
    /// Predicted temp bytes.
    pub predicted_temp_bytes: u64,
    /// The compiler's temp bytes.
    pub compiler_temp_bytes: u64,
    /// Temp bytes error.
    pub temp: f64,
    /// Whether argument and output bytes match exactly.
    pub bytes_exact: bool,
    /// Kernels tpusim costs.
    pub kernels: usize,
}

/// A record of `testdata/hlo/programs.json` (the fields the sample report reads).
#[derive(serde::Deserialize)]
struct SampleRecord {
    id: String,
    chip: String,
    split: String,
    hlo: String,
    estimate_complete: bool,
    total_estimated_cycles: f64,
    argument_bytes: u64,
    output_bytes: u64,
    temp_bytes: u64,
}

/// Every reference-sample record whose chip `params` has, costed with `params` (not the installed constants).
pub fn sample_errors(
    root: &Path,
    params: &[sim_tpu::hlo::HloParams],
) -> Result<Vec<SampleError>, Box<dyn std::error::Error>> {
    use sim_tpu::hlo::score::{ratio_error, temp_error};
    use sim_tpu::hlo::{cost_module_with, HloModule};
    let p = root.join("testdata/hlo/programs.json");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let recs: Vec<SampleRecord> = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut out = Vec::new();
    for r in recs {
        let Some(hp) = params.iter().find(|h| h.name == r.chip) else {
            continue;
        };
        let text = hlo_text(root, &r.hlo).ok_or_else(|| format!("{}: missing", r.hlo))?;
        let m = HloModule::parse(&text).map_err(|e| format!("{}: {e}", r.hlo))?;
        let c = cost_module_with(&m, &sim_tpu::tensorcore::ChipModel::preset(&r.chip)?, hp)?;
        out.push(SampleError {
            cycles: r
                .estimate_complete
                .then(|| ratio_error(c.total_cycles as f64, r.total_estimated_cycles)),
            temp: temp_error(c.temp_bytes, r.temp_bytes),
            bytes_exact: c.argument_bytes == r.argument_bytes && c.output_bytes == r.output_bytes,
            predicted_cycles: c.total_cycles,
            compiler_cycles: r.total_estimated_cycles,
            predicted_temp_bytes: c.temp_bytes,
            compiler_temp_bytes: r.temp_bytes,
            kernels: c.kernels.len(),
            id: r.id,
            chip: r.chip,
            split: r.split,
        });
    }
    Ok(out)
}

/// `tpusim op`'s cycle errors on the held-out op records (sample and corpus), by chip.
pub fn op_heldout_errors(root: &Path) -> Result<Vec<(String, f64)>, Box<dyn std::error::Error>> {
    use sim_tpu::tensorcore::calibration::compare;
    let recs: Vec<CalibRecord> = op_records(root)?
        .into_iter()
        .filter(|r| r.total_estimated_cycles > 0 && r.held_out(HELDOUT_PERCENT))
        .collect();
    let cmp = compare(&recs, &sim_tpu::tensorcore::Calibration::embedded().models()?)?;
    Ok(cmp.iter().map(|c| (c.record.chip.clone(), c.error)).collect())
}

/// Everything the ledger computes.
pub fn ledger_computed(
    root: &Path,
    band_command: &str,
) -> Result<sim_tpu::ledger::Computed, Box<dyn std::error::Error>> {
    use sim_tpu::ledger::{Computed, ErrorFigures};
    Ok(Computed {
        hlo: ErrorFigures::of(&hlo_heldout_errors(root)?),
        hlo_corpus: ErrorFigures::of(&corpus_heldout_errors(root)?),
        op: ErrorFigures::of(&op_heldout_errors(root)?),
        band: band_data(root, band_command)?,
    })
}
