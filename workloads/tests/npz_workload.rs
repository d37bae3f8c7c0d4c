//! Workloads on real ids from NPZ files, with limits from a limits file.

use workloads::{simulate, RunOptions, Workload};

fn load(limits: Option<&str>) -> Workload {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/workloads"));
    let mut w = Workload::parse(&std::fs::read_to_string(dir.join("npz-example.toml")).unwrap()).unwrap();
    w.resolve_paths(dir);
    if let Some(text) = limits {
        let p = std::env::temp_dir().join(format!("limits-{}-{}.json", std::process::id(), text.len()));
        std::fs::write(&p, text).unwrap();
        w.limits.file = Some(p);
    }
    w
}

#[test]
fn npz_ids_and_limits_file() {
    let r = simulate(&load(None), &RunOptions::default()).unwrap();
    assert!(r.summary.fits);
    let country = r.summary.limits.iter().find(|l| l.stack == "country").unwrap();
    // The hot batch puts 16 ids of one country in one partition; the file allows 24.
    assert_eq!((country.max_ids_per_partition, country.observed_max_ids), (24, 16));
    // A tighter file: the same data would abort jax-tpu-embedding.
    let tight = r#"{"stacks": {"country": {"max_ids_per_partition": 8, "max_unique_ids_per_partition": 8}}}"#;
    let r = simulate(&load(Some(tight)), &RunOptions::default()).unwrap();
    let country = r.summary.limits.iter().find(|l| l.stack == "country").unwrap();
    assert_eq!(country.runtime, sim_core::summary::RuntimeVerdict::WouldAbort);
    assert!(!r.summary.fits);
}

#[test]
fn topology_must_match_chips() {
    let mut w = load(None);
    w.topology = Some("2x2".into());
    assert!(w.validate().unwrap_err().to_string().contains("topology"));
}
