//! The compile-time verdict agrees with the XLA TPU compiler on every calibration record: same
//! verdict, same class, and the same numbers in the error text.

use sim_sparsecore::limits::{compile_check, CompileCase, ProgramKind, ScCompileParams, VerdictClass};

fn params(chip: &str) -> ScCompileParams {
    match chip.split(':').next().unwrap() {
        "v5p" => ScCompileParams {
            num_sc_per_device: 4,
            tilespmem_bytes: 524_128,
            spmem_fixed_overhead_bytes: 1024,
        },
        "v6e" => ScCompileParams {
            num_sc_per_device: 2,
            tilespmem_bytes: 262_112,
            spmem_fixed_overhead_bytes: 1024,
        },
        "tpu7x" => ScCompileParams {
            num_sc_per_device: 2,
            tilespmem_bytes: 524_032,
            spmem_fixed_overhead_bytes: 15_872,
        },
        other => panic!("{other}"),
    }
}

#[test]
fn every_record_gets_the_compilers_verdict() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/limits/sparsecore_records.jsonl"
    ))
    .unwrap();
    let mut n = 0;
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let case = CompileCase {
            kind: if r["kind"] == "fwd" {
                ProgramKind::Fwd
            } else {
                ProgramKind::GradSgd
            },
            vocab: r["vocab"].as_u64().unwrap(),
            dim: r["dim"].as_u64().unwrap(),
            batch: r["batch"].as_u64().unwrap(),
            max_ids: r["max_ids"].as_u64().unwrap(),
            max_unique: r["max_unique"].as_u64().unwrap(),
        };
        let v = compile_check(&case, &params(r["chip"].as_str().unwrap()));
        let err = r["error"].as_str().unwrap();
        let want = if r["status"] == "compiled" {
            VerdictClass::Ok
        } else if err.contains("16 GiB of HBM per tensor") {
            VerdictClass::HbmPerTensor
        } else if err.contains("E3001") {
            VerdictClass::SpmemReplicaCount
        } else if err.contains("Can't fit a single row") {
            VerdictClass::TilespmemRow
        } else {
            VerdictClass::Other
        };
        assert_eq!(v.class, want, "{}: {}", r["id"], v.message);
        // The facts in the compiler's text are in ours.
        for fact in [
            "got ",
            "fixed_size_allocation_bytes = ",
            "row_dependent_size_allocation_bytes = ",
            "Row bytes: ",
            "Available bytes: ",
        ] {
            if let Some(pos) = err.find(fact) {
                let num: String = err[pos + fact.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                assert!(
                    v.message.contains(&format!("{fact}{num}")),
                    "{}: '{fact}{num}' not in '{}'",
                    r["id"],
                    v.message
                );
            }
        }
        n += 1;
    }
    assert_eq!(n, 98);
}

#[test]
fn largest_limits_that_compile_match_the_probe() {
    // reference/chips.md: largest that compile at dim 128, batch 256.
    let case = |kind, m| CompileCase {
        kind,
        vocab: 100_000,
        dim: 128,
        batch: 256,
        max_ids: m,
        max_unique: m,
    };
    for (chip, fwd, grad) in [
        ("v5p", 114_688u64, 12_288u64),
        ("v6e", 32_768, 4_096),
        ("tpu7x", 114_688, 12_288),
    ] {
        let p = params(chip);
        assert!(
            compile_check(&case(ProgramKind::Fwd, fwd), &p).compiles,
            "{chip} fwd {fwd}"
        );
        assert!(
            compile_check(&case(ProgramKind::GradSgd, grad), &p).compiles,
            "{chip} grad {grad}"
        );
        assert!(
            !compile_check(&case(ProgramKind::GradSgd, grad * 2), &p).compiles,
            "{chip} grad {}",
            grad * 2
        );
    }
}
