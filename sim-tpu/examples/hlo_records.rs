//! Dumps, per corpus record, tpusim's total, temp and kernels beside the compiler's (JSON lines), for reading the
//! worst records of a family with `tools/corpus/compare_kernels.py`-style scripts.
//!
//! `[HLO_PARAMS=FILE] cargo run --release -p sim-tpu --example hlo_records -- [ID_PREFIX] > records.jsonl`

use sim_tpu::hlo::{cost_module_with, HloParams};
use sim_tpu::tensorcore::ChipModel;

#[allow(dead_code)]
mod common;

fn main() {
    let prefix = std::env::args().nth(1).unwrap_or_default();
    let params: Vec<HloParams> = match std::env::var("HLO_PARAMS") {
        Ok(f) => serde_json::from_str(&std::fs::read_to_string(f).expect("HLO_PARAMS file")).expect("params"),
        Err(_) => sim_tpu::hlo::hlo_params(),
    };
    for l in common::corpus::load(&common::corpus::default_dir()) {
        if !l.rec.id.starts_with(&prefix) || !params.iter().any(|h| h.name == l.rec.chip) {
            continue;
        }
        let chip = ChipModel::preset(&l.rec.chip).expect("preset");
        let mut hp = params
            .iter()
            .find(|h| h.name == l.rec.chip)
            .expect("chip params")
            .clone();
        hp.hbm_bytes_per_cycle = chip.hbm.hlo_stream_bytes_per_cycle;
        let c = cost_module_with(&l.module, &chip, &hp).expect("costs");
        let kernels: Vec<serde_json::Value> = c
            .kernels
            .iter()
            .map(|k| {
                serde_json::json!({"name": k.name, "kind": k.kind, "cycles": k.cycles, "hbm_bytes": k.hbm_bytes,
                                        "n": k.instructions.len()})
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"id": l.rec.id, "family": l.rec.family, "chip": l.rec.chip,
                "split": format!("{:?}", l.rec.split), "size_split": format!("{:?}", l.rec.size_split),
                "pred": c.total_cycles, "est": l.rec.total_estimated_cycles, "scored": l.rec.estimate_complete,
                "pred_temp": c.temp_bytes, "temp": l.rec.temp_bytes, "kernels": kernels})
        );
    }
}
