//! The compile-time verdict agrees with the XLA TPU compiler (libtpu 0.0.52) on the SparseCore
//! probes in testdata/limits/window_probes.jsonl (made by tools/sc-window-probe/probe.py): the
//! wide-row window edges per chip and kind, the fwd lookup's switch to the activation scatter, the
//! E3001 and abort edges found with them, and a spread of ordinary cases. Where both fail, the
//! class agrees too. The file holds three blocks in order (window_probes.md): `base` (the first
//! probes), `fit-2` (the cases the wide-row rules were read off) and `fresh-2` (cases whose edges
//! the rules predicted before the compiler was asked); agreement is reported per block.
//!
//! testdata/limits/fwd_lowering.jsonl adds, for the fwd cases of fit-2 and fresh-2, which lookup
//! the compiler lowered to and the activation scatter's scratchpad size when it compiled one.

use std::collections::BTreeMap;

mod common;

use common::params;
use sim_sparsecore::limits::{compile_check, CompileCase, CompileVerdict, ProgramKind, VerdictClass};

/// The blocks of window_probes.jsonl in file order: (probe.py --set name, records).
const BLOCKS: &[(&str, usize)] = &[("base", 136), ("fit-2", 326), ("fresh-2", 76)];

/// Probes the rule is known to get wrong: ("chip kind vocab dim batch max_ids/max_unique", why).
const KNOWN: &[(&str, &str)] = &[(
    "v6e fwd 4194304 1024 256 256/256",
    "E1000: a 16 GiB table overflows v6e's HBM (not a SparseCore limit)",
)];

/// Lowerings the rule is known to get wrong (same keys as KNOWN).
const KNOWN_LOWERINGS: &[(&str, &str)] = &[];

fn key(r: &serde_json::Value) -> String {
    let num = |k: &str| r[k].as_u64().unwrap();
    format!(
        "{} {} {} {} {} {}/{}",
        r["chip"].as_str().unwrap(),
        r["kind"].as_str().unwrap(),
        num("vocab"),
        num("dim"),
        num("batch"),
        num("max_ids"),
        num("max_unique")
    )
}

fn verdict(r: &serde_json::Value) -> CompileVerdict {
    let num = |k: &str| r[k].as_u64().unwrap();
    let case = CompileCase {
        kind: if r["kind"] == "fwd" {
            ProgramKind::Fwd
        } else {
            ProgramKind::GradSgd
        },
        vocab: num("vocab"),
        dim: num("dim"),
        batch: num("batch"),
        max_ids: num("max_ids"),
        max_unique: num("max_unique"),
    };
    compile_check(&case, &params(r["chip"].as_str().unwrap()))
}

fn records(file: &str) -> Vec<serde_json::Value> {
    let path = format!("{}/../testdata/limits/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn compile_check_agrees_with_the_compiler_on_every_probe() {
    let records = records("window_probes.jsonl");
    assert_eq!(
        records.len(),
        BLOCKS.iter().map(|b| b.1).sum::<usize>(),
        "window_probes.jsonl and BLOCKS disagree on the number of records"
    );
    let block_of = |i: usize| {
        let mut end = 0;
        BLOCKS
            .iter()
            .find(|b| {
                end += b.1;
                i < end
            })
            .unwrap()
            .0
    };
    // (block, chip, kind) -> (agree, total)
    let mut tally: BTreeMap<(&str, String, String), (u32, u32)> = BTreeMap::new();
    let mut known_seen = Vec::new();
    let mut wrong = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let v = verdict(r);
        let compiled = r["status"] == "compiled";
        let class = match r["error_class"].as_str() {
            None => VerdictClass::Ok,
            Some("valid_window") => VerdictClass::VmemWindow,
            Some("e3001") => VerdictClass::SpmemReplicaCount,
            Some("hbm_per_tensor") => VerdictClass::HbmPerTensor,
            Some("tilespmem_row") => VerdictClass::TilespmemRow,
            Some(_) => VerdictClass::Other,
        };
        // Same verdict and, where both fail, the same reason.
        let agrees = v.compiles == compiled && v.class == class;
        let k = key(r);
        let known = KNOWN.iter().find(|known| known.0 == k);
        let t = tally
            .entry((
                block_of(i),
                r["chip"].as_str().unwrap().to_string(),
                r["kind"].as_str().unwrap().to_string(),
            ))
            .or_default();
        t.1 += 1;
        if agrees {
            t.0 += 1;
            assert!(known.is_none(), "listed as known but agrees: {r}");
        } else if let Some(known) = known {
            known_seen.push(k.clone());
            println!("known disagreement ({}): {r}", known.1);
        } else {
            wrong.push(format!("{r}\n  ours: {:?} {}", v.class, v.message));
        }
    }
    for ((block, chip, kind), (a, n)) in &tally {
        println!("{block} {chip} {kind}: {a}/{n} agree");
    }
    for (block, n) in BLOCKS {
        let a: u32 = tally.iter().filter(|t| t.0 .0 == *block).map(|t| t.1 .0).sum();
        println!("{block}: {a}/{n} agree");
    }
    assert!(wrong.is_empty(), "disagreements with the compiler:\n{}", wrong.join("\n"));
    // Every known disagreement is still one (the test fails when a known one starts to agree).
    for known in KNOWN {
        assert!(known_seen.contains(&known.0.to_string()), "no probe {}", known.0);
    }
}

#[test]
fn compile_check_lowers_the_lookup_as_the_compiler_does() {
    let records = records("fwd_lowering.jsonl");
    let mut tally: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut windows = 0;
    let mut wrong = Vec::new();
    let mut known_seen = Vec::new();
    for r in &records {
        let Some(lowering) = r["lowering"].as_str() else {
            continue;
        };
        let v = verdict(r);
        // A fwd verdict has a row window exactly when the compiler scatters into the activations.
        let scatters = v.row_window_bytes > 0;
        let k = key(r);
        let known = KNOWN_LOWERINGS.iter().find(|known| known.0 == k);
        let t = tally.entry(r["chip"].as_str().unwrap().to_string()).or_default();
        t.1 += 1;
        if scatters == (lowering == "scatter") {
            t.0 += 1;
            assert!(known.is_none(), "listed as known but agrees: {r}");
        } else if let Some(known) = known {
            known_seen.push(k.clone());
            println!("known disagreement ({}): {r}", known.1);
        } else {
            wrong.push(format!("{r}\n  ours: window {} B: {}", v.row_window_bytes, v.message));
        }
        // Where the compiler took the smallest window (the lanes, or the one-row fallback), its
        // scratchpad size is the bytes the verdict says the window needs.
        let lanes = params(r["chip"].as_str().unwrap()).simd_lanes_f32;
        if let (Some(rows), Some(bytes)) = (r["window_rows"].as_u64(), r["scratchpad_bytes"].as_u64()) {
            if scatters && (rows == lanes || rows == 1) {
                assert_eq!(v.row_window_bytes, bytes, "{r}: {}", v.message);
                windows += 1;
            }
        }
    }
    for (chip, (a, n)) in &tally {
        println!("{chip} fwd lowering: {a}/{n} agree");
    }
    println!("{windows} compiled windows of the smallest size match to the byte");
    assert!(wrong.is_empty(), "lowerings unlike the compiler's:\n{}", wrong.join("\n"));
    for known in KNOWN_LOWERINGS {
        assert!(known_seen.contains(&known.0.to_string()), "no probe {}", known.0);
    }
    assert!(windows > 0);
}
