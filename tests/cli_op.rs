//! `tpusim op`: output schema, stdin batches, and exit code 2 with a message naming the field for bad input.

use std::io::Write;
use std::process::{Command, Stdio};

fn tpusim(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tpusim");
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

const MATMUL: &str = r#"{"op":"matmul","params":{"M":4096,"K":4096,"N":4096,"dtype":"bfloat16"}}"#;

#[test]
fn json_output_has_the_schema() {
    let (code, out, err) = tpusim(&["op", "--chip", "v5e", "--json", MATMUL], None);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    let mut want = vec![
        "bound",
        "cycles",
        "flops",
        "hbm_bytes",
        "hbm_bytes_unpadded",
        "time_ns",
        "vmem_bytes",
        "total_cycles_low",
        "total_cycles_high",
        "out_of_domain_fraction",
        "domain",
    ];
    want.sort();
    let mut got = keys.clone();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(v["flops"].as_u64(), Some(2 * 4096u64.pow(3)));
    assert_eq!(v["bound"].as_str(), Some("MXU"));
    // 3 bf16 arrays of 4096x4096, no padding.
    assert_eq!(v["hbm_bytes"].as_u64(), Some(3 * 4096 * 4096 * 2));
    let cycles = v["cycles"].as_u64().unwrap();
    // Ideal: 4096 rows x 32 x 32 weight blocks / 4 MXUs = 1,048,576 cycles; the compiler estimates the same-shape
    // fp8 matmul (run at the bf16 rate on v5e) at 1,088,675 cycles (ops.jsonl).
    assert!((900_000..1_250_000).contains(&cycles), "{cycles}");
    let ns = v["time_ns"].as_f64().unwrap();
    assert!((ns - cycles as f64 / 1.503).abs() < 1.0, "{ns}");
}

#[test]
fn stdin_gives_one_object_per_line() {
    let input = format!(
        "{MATMUL}\n\n{}\n{}\n",
        r#"{"op":"exp","params":{"shape":[8192,8192],"dtype":"float32"}}"#,
        r#"{"op":"conv2d_nhwc","params":{"input":[8,56,56,64],"kernel_hwio":[3,3,64,64],"stride":1,"padding":"SAME","dtype":"bfloat16"}}"#
    );
    let (code, out, err) = tpusim(&["op", "--chip", "v4:2x2x1", "--json", "--stdin"], Some(&input));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["cycles"].as_u64().unwrap() > 0);
    }
}

#[test]
fn text_output_lists_kernels() {
    let (code, out, _) = tpusim(
        &[
            "op",
            "--chip",
            "tpu7x",
            r#"{"op":"add","params":{"shape":[1000,1000],"dtype":"float32"}}"#,
        ],
        None,
    );
    assert_eq!(code, 0);
    assert!(out.contains("cycles") && out.contains("elementwise"), "{out}");
}

#[test]
fn bad_specs_exit_2_naming_the_field() {
    let cases: &[(&[&str], Option<&str>, &str)] = &[
        (
            &["op", "--chip", "v5e", r#"{"op":"frobnicate","params":{}}"#],
            None,
            "frobnicate",
        ),
        (
            &[
                "op",
                "--chip",
                "v5e",
                r#"{"op":"matmul","params":{"M":8,"N":8,"dtype":"bfloat16"}}"#,
            ],
            None,
            "`K`",
        ),
        (
            &[
                "op",
                "--chip",
                "v5e",
                r#"{"op":"matmul","params":{"M":0,"K":8,"N":8,"dtype":"bfloat16"}}"#,
            ],
            None,
            "params.M",
        ),
        (
            &[
                "op",
                "--chip",
                "v5e",
                r#"{"op":"add","params":{"shape":[4,-2],"dtype":"float32"}}"#,
            ],
            None,
            "params.shape[1]",
        ),
        (&["op", "--chip", "v5e", r#"{"op":"add"}"#], None, "params"),
        (&["op", "--chip", "v9", MATMUL], None, "v9"),
        (
            &["op", "--chip", "v5e", "--stdin"],
            Some("{\"op\":\"exp\",\"params\":{\"shape\":[4],\"dtype\":\"float32\"}}\nnot json\n"),
            "stdin line 2",
        ),
        (&["op", "--chip", "v5e"], None, "no op given"),
    ];
    for (args, stdin, needle) in cases {
        let (code, out, err) = tpusim(args, *stdin);
        assert_eq!(code, 2, "{args:?}: {out} {err}");
        assert!(err.contains(needle), "{args:?}: stderr {err:?} lacks {needle:?}");
        assert!(out.is_empty(), "{args:?}: printed {out}");
    }
}

#[test]
fn chip_file_overrides_the_clock() {
    let dir = std::env::temp_dir().join(format!("tpusim_cli_op_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("slow.json");
    std::fs::write(&file, r#"{"model_clock_mhz": 1000}"#).unwrap();
    let spec = r#"{"op":"exp","params":{"shape":[4096,4096],"dtype":"float32"}}"#;
    let (code, out, err) = tpusim(
        &[
            "op",
            "--chip",
            "v5e",
            "--chip-file",
            file.to_str().unwrap(),
            "--json",
            spec,
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    // Same cycles, counted at 1 GHz: 1 ns per cycle.
    assert_eq!(v["time_ns"].as_f64().unwrap(), v["cycles"].as_u64().unwrap() as f64);
    std::fs::write(&file, r#"{"bogus": 1}"#).unwrap();
    let (code, _, err) = tpusim(
        &["op", "--chip", "v5e", "--chip-file", file.to_str().unwrap(), spec],
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("bogus"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sparsecore_gather_against_the_published_pallas_figure() {
    let run = |spec: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"))
            .args(["op", "--chip", "tpu7x", "--json", spec])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["time_ns"].as_f64().unwrap()
    };
    let sc = run(r#"{"op": "sc_gather", "params": {"rows": 4194304, "row_bytes": 512}}"#);
    let tc = run(r#"{"op": "tc_gather", "params": {"rows": 4194304, "row_bytes": 512}}"#);
    assert!((sc / 4.05e6 - 1.0).abs() < 0.02, "{sc}");
    // The TensorCore take follows the compiler's estimates (sim_tpu::tensorcore::gather), which put
    // it about 3.8x under the published 18.1 ms: a held-out figure the model does not meet, kept
    // here so a change that moves it is seen. The SparseCore gather stays 4-5x faster either way.
    assert!((0.2..=0.4).contains(&(tc / 18.1e6)), "{tc}");
    assert!(tc > sc, "{tc} {sc}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args([
            "op",
            "--chip",
            "tpu7x",
            r#"{"op": "sc_gather", "params": {"rows": 0, "row_bytes": 512}}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("params.rows"));
}

/// `tpusim op` answers carry the band and a domain verdict. An op case the model was fitted on (outside the
/// held-out hash window) is in the calibrated domain by construction: `--strict` exits 0; an op family with no
/// calibration records (`sc_gather`) is outside it: `--strict` exits 1.
#[test]
fn op_band_domain_and_strict() {
    use sim_tpu::tensorcore::calibration::{parse_records, HELDOUT_PERCENT};
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&std::fs::read("testdata/ops/tc_records.jsonl.gz").unwrap()[..])
        .read_to_string(&mut text)
        .unwrap();
    let fit = parse_records(&text)
        .unwrap()
        .into_iter()
        .find(|r| {
            r.chip == "v5e" && r.op.name() == "matmul" && r.total_estimated_cycles > 0 && !r.held_out(HELDOUT_PERCENT)
        })
        .unwrap();
    let spec = serde_json::to_string(&fit.op).unwrap();
    let (code, out, err) = tpusim(&["op", "--chip", "v5e", "--json", "--strict", &spec], None);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["domain"]["calibrated"], true, "{v}");
    assert_eq!(v["out_of_domain_fraction"], 0.0);
    let (lo, c, hi) = (
        v["total_cycles_low"].as_u64().unwrap(),
        v["cycles"].as_u64().unwrap(),
        v["total_cycles_high"].as_u64().unwrap(),
    );
    assert!(lo <= c && c <= hi, "{lo} {c} {hi}");
    let gather = r#"{"op": "sc_gather", "params": {"rows": 4194304, "row_bytes": 512}}"#;
    let (code, out, _) = tpusim(&["op", "--chip", "tpu7x", "--json", gather], None);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["domain"]["calibrated"], false);
    assert_eq!(v["out_of_domain_fraction"], 1.0);
    let (code, out, _) = tpusim(&["op", "--chip", "tpu7x", "--strict", gather], None);
    assert_eq!(code, 1);
    assert!(out.contains("OUTSIDE the calibrated domain"), "{out}");
}
