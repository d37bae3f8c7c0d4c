//! The slice model against the XLA TPU compiler's latency-hiding scheduler (`testdata/shard/collectives.jsonl.gz`,
//! made by `tools/shard-probe/`): the bandwidth term of each collective of 1 MiB per device or more, by chip
//! family, on the topologies and sizes held out (`spmd::oracle::Part`).

use std::collections::BTreeMap;
use std::io::Read;

use sim_tpu::chips::Chip;
use sim_tpu::hlo::spmd::oracle::{error_quantiles, Part, ProbeRecord};

fn records() -> Vec<ProbeRecord> {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/shard/collectives.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&std::fs::read(p).unwrap()[..])
        .read_to_string(&mut text)
        .unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn held_out_errors_by_chip_family() {
    let mut errs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in records() {
        if !r.priced() || r.bytes_per_device < 1 << 20 || r.part() == Part::Fit {
            continue;
        }
        let chip = Chip::preset(&r.chip).unwrap();
        let c = r.predict(&chip).unwrap();
        let us = c.bandwidth_cycles as f64 / chip.spec.model_clock_mhz as f64;
        errs.entry(r.chip.clone())
            .or_default()
            .push(us / r.scheduler_us.unwrap() - 1.0);
    }
    assert_eq!(errs.len(), 5, "every chip family has held-out records");
    for (chip, e) in &errs {
        let (median, p90) = error_quantiles(e);
        assert!(median <= 0.20, "{chip}: median {median}");
        // Every family, v4 included (its all-reduce over one device per chip runs as one ring).
        assert!(p90 <= 0.50, "{chip}: p90 {p90}");
    }
}

#[test]
fn unpriced_kinds_are_recognised() {
    // The scheduler leaves reduce-scatter (and async permutes) at one cycle: they are not compared.
    let rs = records();
    assert!(rs.iter().any(|r| r.kind == "reduce-scatter" && !r.priced()));
    assert!(rs.iter().filter(|r| r.priced()).all(|r| r.scheduler_us.unwrap() > 0.01));
}
