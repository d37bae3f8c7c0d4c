//! `tpusim chips` as a user runs it.

use std::process::Command;

#[test]
fn lists_presets_and_sources() {
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["chips"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for c in ["v4", "v5e", "v5p", "v6e", "tpu7x", "hbm_bytes_per_s", "assumed"] {
        assert!(text.contains(c), "{c}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["chips", "--json", "--chip", "v6e"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["v6e"]["mxu_dim"]["value"], 256);
    assert!(v["v6e"]["tc_clock_mhz"]["source"]
        .as_str()
        .unwrap()
        .starts_with("assumed"));
}

#[test]
fn bad_chip_and_bad_override_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["chips", "--chip", "v9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown chip 'v9'"));
    let path = std::env::temp_dir().join(format!("chipfile-{}.json", std::process::id()));
    std::fs::write(&path, r#"{"chip": "v4", "hbm_gb": 3}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["chips", "--chip-file", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field 'hbm_gb'"));
}

/// A size per SparseCore is printed as a size: `sc_spmem_bytes_per_sc` (524288 B on v5p, the
/// preset's value) reads 512 KiB, not a rate.
#[test]
fn sizes_per_part_print_as_sizes_not_rates() {
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["chips", "--chip", "v5p"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("sc_spmem_bytes_per_sc "))
        .expect("the field's line");
    assert!(line.contains("512 KiB"), "{line}");
    assert!(!line.contains("/s"), "{line}");
    // Rates stay rates.
    let hbm = text.lines().find(|l| l.starts_with("hbm_bytes_per_s ")).unwrap();
    assert!(hbm.contains("/s"), "{hbm}");
}
