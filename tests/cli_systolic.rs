//! `tpusim systolic` with SCALE-Sim inputs (the README's example).

#[test]
fn reproduces_scale_sim_weight_stationary() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args([
            "systolic",
            "--cfg",
            &format!("{dir}/testdata/systolic/scale.cfg"),
            "--topology",
            &format!("{dir}/testdata/systolic/gemm.csv"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("LayerID, Total Cycles, Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %,")
    );
    assert!(
        text.contains("\n0, 2551, 0,") && text.contains("\n1, 89983, 0,"),
        "{text}"
    );
}

fn tpusim(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(args)
        .output()
        .unwrap();
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
fn weight_stationary_full_report() {
    let (code, out, _) = tpusim(&["systolic", "--cfg", &data("scale.cfg"), "--topology", &data("gemm.csv")]);
    assert_eq!(code, 0);
    // Utilisation = MACs / (cycles x 128 x 128): 256^3 / (2551 x 16384) = 40.1411 %, 1024^3 / (89983 x 16384) = 72.8315 %.
    assert_eq!(
        out,
        "LayerID, Total Cycles, Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %,\n\
         0, 2551, 0, 40.1411, 100.0000, 40.1411,\n\
         1, 89983, 0, 72.8315, 100.0000, 72.8315,\n"
    );
}

#[test]
fn output_stationary_conv_layers_and_report_file() {
    let dir = std::env::temp_dir().join(format!("tpusim-systolic-os-{}", std::process::id()));
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
    assert_eq!(code, 0, "{out}");
    // Conv1 224x224, 7x7x3, 64 filters, stride 2: T = 109 x 109 = 11881 output pixels on rows -> 93 folds,
    // N = 64 on columns -> 1 fold, K = 147 streamed: 93 x (2 x 128 + 128 + 147 - 2) - 1 = 49196.
    // Conv2 56x56, 3x3x64, 64 filters, stride 1: T = 54 x 54 = 2916 -> 23 folds, K = 576: 23 x 958 - 1 = 22033.
    let cycles: Vec<&str> = out.lines().skip(1).map(|l| l.split(", ").nth(1).unwrap()).collect();
    assert_eq!(cycles, ["49196", "22033"]);
    assert_eq!(std::fs::read_to_string(dir.join("COMPUTE_REPORT.csv")).unwrap(), out);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn zero_dimension_exits_2_naming_the_line() {
    let dir = std::env::temp_dir().join(format!("tpusim-systolic-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("bad.csv");
    std::fs::write(&topo, "Layer, M, N, K,\ng, 0, 4, 4,\n").unwrap();
    let (code, _, err) = tpusim(&[
        "systolic",
        "--cfg",
        &data("scale.cfg"),
        "--topology",
        topo.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("topology line 2: '0' is not a positive integer"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
