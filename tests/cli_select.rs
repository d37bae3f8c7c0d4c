//! `tpusim select` as the README shows it.

#[test]
fn nchw_f32_graph() {
    let g = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/select/nchw_f32.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["select", g, "--chip", "v5p", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kernels"].as_array().unwrap().len(), 3);
    assert_eq!(v["kernels"][0]["format"], "NHWC");
    assert_eq!(v["conversions"].as_array().unwrap().len(), 2);
    let bad = std::env::temp_dir().join(format!("g-{}.json", std::process::id()));
    std::fs::write(
        &bad,
        r#"{"input": [8, 64, 56, 56], "ops": [{"op": "pool", "dtype": "float32", "format": "NCHW"}]}"#,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["select", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ops[0].op"));
}

#[test]
fn text_output_names_formats_and_reasons() {
    let g = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/select/nchw_f32.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["select", g, "--chip", "v5e"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert!(lines[1].starts_with("     + format NCHW -> NHWC  ("), "{text}");
    assert!(lines[2].starts_with("0    conv2d   float32        NHWC") && lines[2].ends_with("no NCHW conv2d kernel"));
    assert!(lines[3].ends_with("moved to save conversions"), "{text}");
    assert!(lines[5].starts_with("     + format NHWC -> NCHW  ("), "{text}");
    assert!(lines[6].starts_with("conversions: 2 inserted, ") && lines[6].ends_with(" cycles on v5e"));
}
