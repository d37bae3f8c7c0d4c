//! The compile-time verdict agrees with the XLA TPU compiler (libtpu 0.0.52) on the SparseCore
//! probes in testdata/limits/window_probes.jsonl (made by tools/sc-window-probe/probe.py): the
//! wide-row window edges per chip and kind, the fwd lookup's switch to the activation scatter, and
//! a spread of ordinary cases. Where both fail, the class agrees too.

use std::collections::BTreeMap;

mod common;

use common::params;
use sim_sparsecore::limits::{compile_check, CompileCase, ProgramKind, VerdictClass};

/// Probes the rule is known to get wrong: ("chip kind vocab dim batch max_ids/max_unique", why).
const KNOWN: &[(&str, &str)] = &[
    (
        "tpu7x grad_sgd 10000 13096 256 4096/4096",
        "tpu7x aborts on grad_sgd widths not a multiple of 16",
    ),
    (
        "v6e grad_sgd 10000 100 256 1024/1024",
        "grad_sgd widths not a multiple of 8 fail E3001 (no split)",
    ),
    (
        "v5p fwd 10000 6552 256 16384/16384",
        "v5p takes 6552 (not a multiple of 16) with a one-row window",
    ),
    (
        "v6e fwd 10000 456 4096 8192/8192",
        "batch 4096: the scatter window is smaller than modelled",
    ),
    (
        "v6e fwd 10000 944 4096 8192/8192",
        "batch 4096: the scatter window is smaller than modelled",
    ),
    (
        "v6e fwd 10000 952 4096 8192/8192",
        "batch 4096: the scatter window is smaller than modelled",
    ),
    (
        "v6e fwd 10000 960 4096 8192/8192",
        "batch 4096: the scatter window is smaller than modelled",
    ),
    (
        "v6e fwd 10000 4096 32 8104/8104",
        "the fitted switch to the scatter is 8 ids early at batch 32",
    ),
    (
        "v5p fwd 10000 8192 256 15616/15616",
        "the switch to the scatter comes earlier at wide rows",
    ),
    (
        "v5p fwd 10000 8192 256 16232/16232",
        "the switch to the scatter comes earlier at wide rows",
    ),
    (
        "tpu7x fwd 10000 4096 256 15688/15688",
        "the switch to the scatter comes earlier at wide rows",
    ),
    (
        "tpu7x fwd 10000 4096 256 15808/15808",
        "the switch to the scatter comes earlier at wide rows",
    ),
    (
        "tpu7x fwd 10000 4096 256 15816/15816",
        "the switch to the scatter comes earlier at wide rows",
    ),
    (
        "v6e fwd 10000 4096 256 16384/8096",
        "max_ids above max_unique moves the switch to the scatter",
    ),
    (
        "v6e fwd 4194304 1024 256 256/256",
        "E1000: a 16 GiB table overflows v6e's HBM (not a SparseCore limit)",
    ),
];

#[test]
fn compile_check_agrees_with_the_compiler_on_every_probe() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/limits/window_probes.jsonl"
    ))
    .unwrap();
    let mut tally: BTreeMap<(String, String), (u32, u32)> = BTreeMap::new();
    let mut known_seen = 0;
    let mut wrong = Vec::new();
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let num = |k: &str| r[k].as_u64().unwrap();
        let (chip, kind) = (r["chip"].as_str().unwrap(), r["kind"].as_str().unwrap());
        let case = CompileCase {
            kind: if kind == "fwd" {
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
        let v = compile_check(&case, &params(chip));
        let compiled = r["status"] == "compiled";
        let class = match r["error_class"].as_str() {
            None => VerdictClass::Ok,
            Some("valid_window") => VerdictClass::VmemWindow,
            Some("e3001") => VerdictClass::SpmemReplicaCount,
            Some("hbm_per_tensor") => VerdictClass::HbmPerTensor,
            Some("tilespmem_row") => VerdictClass::TilespmemRow,
            Some(_) => VerdictClass::Other,
        };
        // Same verdict; where both fail for a reason we model, the same reason.
        let agrees = v.compiles == compiled && (compiled || class == VerdictClass::Other || v.class == class);
        let key = format!(
            "{chip} {kind} {} {} {} {}/{}",
            case.vocab, case.dim, case.batch, case.max_ids, case.max_unique
        );
        let known = KNOWN.iter().find(|k| k.0 == key);
        let t = tally.entry((chip.to_string(), kind.to_string())).or_default();
        t.1 += 1;
        if agrees {
            t.0 += 1;
            assert!(known.is_none(), "listed as known but agrees: {line}");
        } else if let Some(k) = known {
            known_seen += 1;
            println!("known disagreement ({}): {line}", k.1);
        } else {
            wrong.push(format!("{line}\n  ours: {:?} {}", v.class, v.message));
        }
    }
    let (agree, total) = tally.values().fold((0, 0), |(a, n), t| (a + t.0, n + t.1));
    for ((chip, kind), (a, n)) in &tally {
        println!("{chip} {kind}: {a}/{n} agree");
    }
    println!("all: {agree}/{total} agree, {known_seen} known disagreements");
    assert!(
        wrong.is_empty(),
        "disagreements with the compiler:\n{}",
        wrong.join("\n")
    );
    assert_eq!(known_seen, KNOWN.len());
    assert_eq!(total, 136);
    assert_eq!(agree + known_seen as u32, total);
}
