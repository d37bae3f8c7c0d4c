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
