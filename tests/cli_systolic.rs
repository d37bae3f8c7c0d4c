//! `tpusim systolic` end to end: exact SCALE-Sim weight-stationary counts, corrected OS counts, bad input.

use std::process::Command;

fn tpusim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim")).args(args).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn data(name: &str) -> String {
    format!("{}/testdata/systolic/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn weight_stationary_reproduces_scalesim() {
    let (code, out, _) = tpusim(&[
        "systolic",
        "--cfg",
        &data("tpu_ws.cfg"),
        "--topology",
        &data("gemm.csv"),
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "LayerID, Total Cycles, Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %,\n\
         0, 2551, 0, 40.141121, 100.000000, 40.141121,\n\
         1, 89983, 0, 72.831535, 100.000000, 72.831535,\n"
    );
}

#[test]
fn output_stationary_conv_and_report_file() {
    let dir = std::env::temp_dir().join(format!("tpusim-systolic-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let (code, out, _) = tpusim(&[
        "systolic",
        "--cfg",
        &data("tpu_os.cfg"),
        "--topology",
        &data("conv.csv"),
        "-o",
        d,
    ]);
    assert_eq!(code, 0);
    // Conv1: M = 109*109 = 11881 rows -> 93 folds, N = 64 -> 1 fold, T = K = 147: 93 * (256 + 128 + 147 - 2) - 1.
    // Conv2: M = 54*54 = 2916 -> 23 folds, T = K = 576: 23 * (256 + 128 + 576 - 2) - 1.
    let cycles: Vec<&str> = out.lines().skip(1).map(|l| l.split(", ").nth(1).unwrap()).collect();
    assert_eq!(cycles, ["49196", "22033"]);
    assert_eq!(std::fs::read_to_string(dir.join("COMPUTE_REPORT.csv")).unwrap(), out);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_exits_2_naming_the_line() {
    let dir = std::env::temp_dir().join(format!("tpusim-systolic-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("bad.csv");
    std::fs::write(&topo, "Layer, M, N, K\ng, 0, 4, 4\n").unwrap();
    let (code, _, err) = tpusim(&[
        "systolic",
        "--cfg",
        &data("tpu_ws.cfg"),
        "--topology",
        topo.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("topology line 2: M, N and K must be at least 1"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
