//! `tpusim limits` as a user runs it (the README's examples).

mod common;

use common::tpusim;

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/spec.json");
const IDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/ids.npz");
const HOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/ids_hot.npz");

#[test]
fn compile_check_verdicts_and_exit_codes() {
    let (code, out, _) = tpusim(&[
        "limits",
        "compile-check",
        "--chip",
        "v6e",
        "--json",
        r#"{"kind": "grad_sgd", "vocab": 100000, "dim": 128, "batch": 256, "max_ids": 16384, "max_unique": 16384}"#,
    ]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["compiles"], false);
    assert_eq!(v["class"], "spmem_replica_count");
    assert!(v["message"]
        .as_str()
        .unwrap()
        .contains("fixed_size_allocation_bytes = 590848"));
    let (code, _, _) = tpusim(&[
        "limits",
        "compile-check",
        "--chip",
        "v5p",
        r#"{"kind": "fwd", "vocab": 100000, "dim": 128, "batch": 256, "max_ids": 114688, "max_unique": 114688}"#,
    ]);
    assert_eq!(code, 0);
    let (code, _, err) = tpusim(&[
        "limits",
        "compile-check",
        "--chip",
        "v5p",
        r#"{"kind": "fwd", "vocab": 10}"#,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("missing field `dim`"), "{err}");
    let (code, _, err) = tpusim(&[
        "limits",
        "compile-check",
        "--chip",
        "v5e",
        r#"{"kind": "fwd", "vocab": 10, "dim": 8, "batch": 8, "max_ids": 8, "max_unique": 8}"#,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no SparseCores"), "{err}");
}

#[test]
fn estimate_then_validate() {
    let dir = std::env::temp_dir().join(format!("tpusim-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let limits = dir.join("limits.json");
    let fdo = dir.join("fdo");
    let (code, out, err) = tpusim(&[
        "limits",
        "estimate",
        "--spec",
        SPEC,
        "--ids",
        IDS,
        HOT,
        "-o",
        limits.to_str().unwrap(),
        "--fdo-out",
        fdo.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("country"), "{out}");
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&limits).unwrap()).unwrap();
    // Observed 16 ids in a partition on the hot batch, + 10 % headroom, rounded up to 8.
    assert_eq!(file["stacks"]["country"]["max_ids_per_partition"], 24);
    assert!(fdo.join("fdo_stats_0_0.npz").exists());
    // The spec's own limits fail on the hot batch; the estimated ones pass.
    let (code, out, _) = tpusim(&["limits", "validate", "--spec", SPEC, "--chip", "v5p", "--ids", IDS, HOT]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("would abort"), "{out}");
    let (code, out, _) = tpusim(&[
        "limits",
        "validate",
        "--spec",
        SPEC,
        "--chip",
        "v5p",
        "--limits",
        limits.to_str().unwrap(),
        "--ids",
        IDS,
        HOT,
        "--json",
    ]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true);
    let (code, _, _) = tpusim(&[
        "limits",
        "validate",
        "--spec",
        SPEC,
        "--chip",
        "v5p",
        "--fdo",
        fdo.to_str().unwrap(),
        "--ids",
        HOT,
    ]);
    assert_eq!(code, 0);
    // A v6e device has 2 SparseCores: the spec (4) does not match.
    let (code, _, err) = tpusim(&["limits", "validate", "--spec", SPEC, "--chip", "v6e"]);
    assert_eq!(code, 2);
    assert!(err.contains("num_sc_per_device"), "{err}");
}
