//! The compile-time verdict agrees with the XLA TPU compiler on every calibration record: same
//! verdict, same class, and the same numbers in the error text.

use sim_sparsecore::limits::{compile_check, CompileCase, ProgramKind, ScCompileParams, VerdictClass};

fn params(chip: &str) -> ScCompileParams {
    match chip.split(':').next().unwrap() {
        "v5p" => ScCompileParams {
            num_sc_per_device: 4,
            tilespmem_bytes: 524_128,
            spmem_fixed_overhead_bytes: 1024,
            simd_lanes_f32: 8,
        },
        "v6e" => ScCompileParams {
            num_sc_per_device: 2,
            tilespmem_bytes: 262_112,
            spmem_fixed_overhead_bytes: 1024,
            simd_lanes_f32: 8,
        },
        "tpu7x" => ScCompileParams {
            num_sc_per_device: 2,
            tilespmem_bytes: 524_032,
            spmem_fixed_overhead_bytes: 15_872,
            simd_lanes_f32: 16,
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
    // The window needs 32 x (pd + 1) B of TileSpmem - 32 - 8 x pd, i.e. 40 x pd + 64 <= TileSpmem.
    // v5p: (524128 - 64) / 40 = 13101.6 -> 13096; v6e: (262112 - 64) / 40 = 6551.2 -> 6544;
    // tpu7x: (524032 - 64) / 40 = 13099.2 -> 13096. Probed on libtpu 0.0.52: v5p 13096 compiles,
    // 13104 reports "scratchpad allocation size is 419264"; v6e 6544 / 6552 (209664).
    for (chip, largest, offered) in [
        ("v5p", 13_096u64, 419_264u64),
        ("v6e", 6_544, 209_664),
        ("tpu7x", 13_096, 419_168),
    ] {
        let p = params(chip);
        // Independent of max_unique and batch (the probe's budget did not move with them).
        for (batch, unique) in [(256, 256), (64, 8), (4096, 1024)] {
            let ok = compile_check(&wide(ProgramKind::GradSgd, largest, batch, unique), &p);
            assert!(ok.compiles, "{chip} {largest}: {}", ok.message);
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
    // Scatter from 32 x max_unique + 2 x sample_count + 880 x SCs + Spmem constant > TileSpmem.
    // v6e, batch 256 (sample_count 128): 32 x 8096 + 256 + 1760 + 1024 = 262112 (fused, compiles
    // at dim 4096); 32 x 8104 + ... = 262368 (scatter).
    let v6e = params("v6e");
    assert!(compile_check(&wide(ProgramKind::Fwd, 4_096, 256, 8_096), &v6e).compiles);
    assert_eq!(
        compile_check(&wide(ProgramKind::Fwd, 4_096, 256, 8_104), &v6e).class,
        VerdictClass::VmemWindow
    );
    // The scatter window: (2 x lanes + sample_count / 16) x pd x 4 + 8 x lanes <= TileSpmem + 32.
    // v6e batch 256: (16 + 8) x 4 x pd + 64 <= 262144 -> pd <= 2730 -> 2728 (probed 2728 / 2736).
    // v6e batch 1024: (16 + 32) x 4 x pd + 64 <= 262144 -> 1365 -> 1360 (probed 1360 / 1368).
    // v5p batch 256 (sample_count 64): (16 + 4) x 4 x pd + 64 <= 524160 -> 6551.2 -> 6544 (probed
    // 6544 / 6560). tpu7x batch 256: (32 + 8) x 4 x pd + 128 <= 524064 -> 3274.6 -> 3272 (probed
    // 3264 / 3280).
    for (chip, batch, unique, largest) in [
        ("v6e", 256, 8_192, 2_728u64),
        ("v6e", 1_024, 8_192, 1_360),
        ("v5p", 256, 16_384, 6_544),
        ("tpu7x", 256, 16_384, 3_272),
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
