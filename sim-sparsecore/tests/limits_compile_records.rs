//! The compile-time verdict agrees with the XLA TPU compiler on every calibration record: same
//! verdict, same class, and the same numbers in the error text.

mod common;

use common::params;
use sim_sparsecore::limits::{compile_check, CompileCase, ProgramKind, VerdictClass};

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
            "last tried split factor for vector splitting = ",
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

fn wide(kind: ProgramKind, dim: u64, batch: u64, unique: u64) -> CompileCase {
    CompileCase {
        kind,
        vocab: 10_000,
        dim,
        batch,
        max_ids: unique,
        max_unique: unique,
    }
}

#[test]
fn grad_sgd_rows_need_a_whole_row_window() {
    // Probed on libtpu 0.0.52 (window_probes.jsonl): v5p 13096 compiles, 13104 reports
    // "scratchpad allocation size is 419264"; v6e 6544 / 6552 (209664); tpu7x 13104 (419072),
    // 13088 compiles (13096 is not a multiple of 16, which tpu7x aborts on).
    for (chip, largest, offered) in [
        ("v5p", 13_096u64, 419_264u64),
        ("v6e", 6_544, 209_664),
        ("tpu7x", 13_096, 419_072),
    ] {
        let p = params(chip);
        // Independent of max_unique and batch (the probe's budget did not move with them).
        for (batch, unique) in [(256, 256), (64, 8), (4096, 1024)] {
            // tpu7x's widest that compiles is 13088, a multiple of its 16 lanes.
            let ok_dim = if chip == "tpu7x" { largest - 8 } else { largest };
            let ok = compile_check(&wide(ProgramKind::GradSgd, ok_dim, batch, unique), &p);
            assert!(ok.compiles, "{chip} {ok_dim}: {}", ok.message);
            let v = compile_check(&wide(ProgramKind::GradSgd, largest + 8, batch, unique), &p);
            assert_eq!(v.class, VerdictClass::VmemWindow, "{chip}: {}", v.message);
            assert_eq!(v.row_window_bytes, 32 * (largest + 9));
            assert_eq!(v.row_window_bytes_available, offered);
            assert!(
                v.message.contains(&format!("scratchpad allocation size is {offered}")),
                "{}",
                v.message
            );
            assert!(
                v.message
                    .contains(&format!("Lower the embedding dim to at most {largest}")),
                "{}",
                v.message
            );
        }
    }
    // Probed: 16384 fails on all three chips, 8192 on v6e; v5p compiles 12288.
    assert!(compile_check(&wide(ProgramKind::GradSgd, 12_288, 256, 256), &params("v5p")).compiles);
    for chip in ["v5p", "v6e", "tpu7x"] {
        assert!(!compile_check(&wide(ProgramKind::GradSgd, 16_384, 256, 256), &params(chip)).compiles);
    }
    assert!(!compile_check(&wide(ProgramKind::GradSgd, 8_192, 256, 256), &params("v6e")).compiles);
}

#[test]
fn the_fused_lookup_has_no_width_limit() {
    // The lookup's gather splits rows into column windows: v6e (the smallest TileSpmem) compiles
    // dim 32768 and, with a small vocabulary, 262144 (probed).
    for dim in [32_768, 262_144] {
        let v = compile_check(&wide(ProgramKind::Fwd, dim, 256, 256), &params("v6e"));
        assert!(v.compiles, "{}", v.message);
        assert_eq!(v.row_window_bytes, 0);
    }
}

#[test]
fn the_activation_scatter_needs_whole_rows() {
    // Probed: v6e, batch 256, dim 4096 keeps the fused lookup at max_unique 8096 and scatters
    // (and fails) at 8104.
    let v6e = params("v6e");
    assert!(compile_check(&wide(ProgramKind::Fwd, 4_096, 256, 8_096), &v6e).compiles);
    assert_eq!(
        compile_check(&wide(ProgramKind::Fwd, 4_096, 256, 8_104), &v6e).class,
        VerdictClass::VmemWindow
    );
    // The widest scatter that compiles, probed: v6e 2728 / 2736 at batch 256, 1360 / 1368 at
    // 1024, 960 / 968 at 4096 and 16384; v5p 6552 (a one-row window) / 6560 at 256, 1920 / 1928
    // at 16384; tpu7x 3272 / 3280 at 256, 1296 / 1304 at 4096.
    for (chip, batch, unique, largest) in [
        ("v6e", 256, 8_192, 2_728u64),
        ("v6e", 1_024, 8_192, 1_360),
        ("v6e", 4_096, 8_192, 960),
        ("v6e", 16_384, 8_192, 960),
        ("v5p", 256, 16_384, 6_552),
        ("v5p", 16_384, 16_384, 1_920),
        ("tpu7x", 256, 16_384, 3_272),
        ("tpu7x", 4_096, 16_384, 1_296),
    ] {
        let p = params(chip);
        let ok = compile_check(&wide(ProgramKind::Fwd, largest, batch, unique), &p);
        assert!(ok.compiles, "{chip} {largest}: {}", ok.message);
        let v = compile_check(&wide(ProgramKind::Fwd, largest + 8, batch, unique), &p);
        assert_eq!(v.class, VerdictClass::VmemWindow, "{chip}: {}", v.message);
        assert!(
            v.message
                .contains(&format!("or the embedding dim to at most {largest}")),
            "{}",
            v.message
        );
        // Lowering max_unique back to the fused lookup is the other way out.
        assert!(
            v.largest_max_unique > 0 && v.largest_max_unique < unique,
            "{}",
            v.message
        );
        assert!(compile_check(&wide(ProgramKind::Fwd, largest + 8, batch, v.largest_max_unique), &p).compiles);
    }
    // At max_unique 8192 v5p and tpu7x keep the fused lookup (probed: dim 8192 compiles).
    for chip in ["v5p", "tpu7x"] {
        assert!(compile_check(&wide(ProgramKind::Fwd, 8_192, 256, 8_192), &params(chip)).compiles);
    }
}
