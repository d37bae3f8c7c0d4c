//! `tpusim init`: a commented starting workload that runs as is.

mod common;

use common::{scratch_dir, tpusim};

#[test]
fn init_writes_a_workload_that_runs_as_is() {
    let d = scratch_dir("init");
    let file = d.join("workload.toml");
    let _ = std::fs::remove_file(&file);
    let (code, _, err) = tpusim(&["init", "-o", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = tpusim(&["run", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fits"], true, "{out}");
    // Printed without -o: the same text.
    let (code, printed, _) = tpusim(&["init"]);
    assert_eq!(code, 0);
    assert_eq!(printed, std::fs::read_to_string(&file).unwrap());
    // An existing file is kept unless --force.
    let (code, _, err) = tpusim(&["init", "-o", file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("exists") && err.contains("--force"), "{err}");
    let (code, _, err) = tpusim(&["init", "-o", file.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A hand-written workload with only the required fields runs; one missing several hears about all
/// of them in one message.
#[test]
fn optional_fields_are_optional_and_missing_required_ones_are_named_together() {
    let d = scratch_dir("init-minimal");
    let file = d.join("minimal.toml");
    std::fs::write(
        &file,
        "chip = \"v5p\"\nchips = 4\nglobal_batch = 1024\n[dense]\ndense_features = 13\nbottom = [64]\ntop = [64, 1]\n[[tables]]\nname = \"t\"\nvocab = 1000\ndim = 64\n[[features]]\nname = \"f\"\ntable = \"t\"\n",
    )
    .unwrap();
    let (code, out, err) = tpusim(&["run", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"step_time_us\""), "{out}");
    std::fs::write(&file, "chip = \"v5p\"\n[[tables]]\nname = \"t\"\n").unwrap();
    let (code, _, err) = tpusim(&["run", file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("chips, global_batch, features, dense, tables[0].vocab, tables[0].dim")
            && err.contains("tpusim init"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
