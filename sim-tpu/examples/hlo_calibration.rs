//! Prints `tpusim hlo`'s errors against the compiler on the calibration programs (testdata/hlo/programs.json),
//! separately for the records constants may be fitted on (`fit`) and the held-out ones.
//!
//! `cargo run --release -p sim-tpu --example hlo_calibration [-- --verbose]`

use std::collections::BTreeMap;
use std::path::PathBuf;

use sim_tpu::hlo::score::{quantile, ratio_error, temp_error};
use sim_tpu::hlo::{cost_module, HloModule};
use sim_tpu::tensorcore::ChipModel;

fn main() {
    let verbose = std::env::args().any(|a| a == "--verbose");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/hlo");
    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("programs.json")).unwrap()).unwrap();
    // (split, chip) -> cycle errors, temp errors
    let mut cyc: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut tmp: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut bytes_bad = 0;
    for r in &records {
        let text = std::fs::read_to_string(dir.join(r["hlo"].as_str().unwrap())).unwrap();
        let m = HloModule::parse(&text).unwrap();
        let chip = ChipModel::preset(r["chip"].as_str().unwrap()).unwrap();
        let c = cost_module(&m, &chip).unwrap();
        let split = r["split"].as_str().unwrap().to_string();
        let ch = r["chip"].as_str().unwrap().to_string();
        if c.argument_bytes != r["argument_bytes"].as_u64().unwrap()
            || c.output_bytes != r["output_bytes"].as_u64().unwrap()
        {
            bytes_bad += 1;
            println!(
                "BYTES {} arg {} vs {} out {} vs {}",
                r["id"], c.argument_bytes, r["argument_bytes"], c.output_bytes, r["output_bytes"]
            );
        }
        let te = temp_error(c.temp_bytes, r["temp_bytes"].as_u64().unwrap());
        for key in [(split.clone(), ch.clone()), (split.clone(), "all".to_string())] {
            tmp.entry(key).or_default().push(te);
        }
        if verbose && !r["estimate_complete"].as_bool().unwrap() {
            println!(
                "{:6} {:62} (cycles not scored)  temp {:>11} vs {:>11}",
                split,
                r["id"].as_str().unwrap(),
                c.temp_bytes,
                r["temp_bytes"]
            );
        }
        if r["estimate_complete"].as_bool().unwrap() {
            let est = r["total_estimated_cycles"].as_f64().unwrap();
            let e = ratio_error(c.total_cycles as f64, est);
            for key in [(split.clone(), ch.clone()), (split.clone(), "all".to_string())] {
                cyc.entry(key).or_default().push(e);
            }
            if verbose {
                println!(
                    "{:6} {:62} pred {:>11} est {:>11.0} {:+7.1}%  temp {:>11} vs {:>11}  kernels {}",
                    split,
                    r["id"].as_str().unwrap(),
                    c.total_cycles,
                    est,
                    (c.total_cycles as f64 / est - 1.0) * 100.0,
                    c.temp_bytes,
                    r["temp_bytes"],
                    c.kernels.len()
                );
            }
        }
    }
    println!("argument/output bytes mismatches: {bytes_bad} of {}", records.len());
    println!(
        "{:8} {:6} {:>4} {:>9} {:>9} {:>10}",
        "split", "chip", "n", "cyc med", "cyc p90", "temp med"
    );
    for ((split, ch), v) in &cyc {
        let t = &tmp[&(split.clone(), ch.clone())];
        println!(
            "{:8} {:6} {:>4} {:>8.1}% {:>8.1}% {:>9.1}%",
            split,
            ch,
            v.len(),
            quantile(v, 0.5) * 100.0,
            quantile(v, 0.9) * 100.0,
            quantile(t, 0.5) * 100.0
        );
    }
}
