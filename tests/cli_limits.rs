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

/// Runs `tpusim limits compile-check --stdin` on the example cases file.
fn compile_check_stdin(chip: &str, input: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["limits", "compile-check", "--chip", chip, "--json", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn compile_check_example_cases_on_stdin() {
    let cases = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/limits/example/cases.jsonl"
    ))
    .unwrap();
    let (code, out, err) = compile_check_stdin("v6e", &cases);
    assert_eq!(code, 1, "{err}");
    let classes: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["class"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        classes,
        [
            "ok",
            "tilespmem_row",
            "spmem_replica_count",
            "ok",
            "hbm_per_tensor",
            "vmem_window",
            "ok"
        ]
    );
    // The row check reports the compiler's numbers and the largest limit that fits.
    let row: serde_json::Value = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    assert!(row["message"].as_str().unwrap().contains("Row bytes: 5283840"));
    assert_eq!(row["tilespmem_bytes_available"], 262_072);
    // grad_sgd dim 8192 needs a 262176 B gradient window, v6e offers 196544 (the compiler's number).
    let window: serde_json::Value = serde_json::from_str(out.lines().nth(5).unwrap()).unwrap();
    assert!(window["message"]
        .as_str()
        .unwrap()
        .contains("scratchpad allocation size is 196544"));
    // On v5p (twice the TileSpmem) the wide rows and the rows of 81920 ids fit; grad_sgd at 16384
    // (fixed Spmem 590848 B > 524128 B) and the 25 GiB table do not.
    let (code, out, _) = compile_check_stdin("v5p", &cases);
    assert_eq!(code, 1);
    let failing: Vec<usize> = out
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("\"compiles\":false"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(failing, [2, 4]);
    // Garbage and absurd values are bad input (exit 2), never a panic.
    let (code, _, err) = compile_check_stdin(
        "v5p",
        "not json\n{\"kind\": \"fwd\", \"vocab\": 18446744073709551615, \"dim\": 8, \"batch\": 8, \"max_ids\": 8, \"max_unique\": 8}\n",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("must be at most"), "{err}");
}

#[test]
fn validate_example_limits_files_and_fdo_dir() {
    let ex = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/limits/example");
    let tight = format!("{ex}/tight.toml");
    let (code, out, err) = tpusim(&[
        "limits", "validate", "--spec", SPEC, "--chip", "v5p", "--limits", &tight, "--ids", HOT, "--json",
    ]);
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], false);
    let user = v["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stack"] == "user_item")
        .unwrap();
    let runtime = user["runtime"][0].as_str().unwrap();
    assert!(
        runtime.contains(
            "Observed max ids per partition: 46 for table: user_item is greater than the set max ids per partition: 16"
        ),
        "{runtime}"
    );
    assert!(runtime.contains("needs 8 minibatches with minibatching"), "{runtime}");
    // Observed 46 and 27, + 10 % headroom (as `limits estimate`), rounded up to 8.
    assert_eq!(user["suggested"]["max_ids_per_partition"], 56);
    assert_eq!(user["suggested"]["max_unique_ids_per_partition"], 32);
    // The FDO directory (NPZ from `estimate --fdo-out` plus a CSV) gives limits that fit the data.
    let fdo = format!("{ex}/fdo");
    let (code, out, err) = tpusim(&[
        "limits", "validate", "--spec", SPEC, "--chip", "v5p", "--fdo", &fdo, "--ids", HOT,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("verdict: OK"), "{out}");
    // The limits file written by `estimate` validates too.
    let json = format!("{ex}/limits.json");
    let (code, _, err) = tpusim(&[
        "limits", "validate", "--spec", SPEC, "--chip", "v5p", "--limits", &json, "--ids", IDS, HOT,
    ]);
    assert_eq!(code, 0, "{err}");
}
