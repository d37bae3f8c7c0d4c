//! `tpusim sweep` with a limits file applied to every configuration.

mod common;

use common::tpusim;

#[test]
fn sweep_with_a_tight_limits_file_does_not_fit_and_reports_the_limits_needed() {
    let d = std::env::temp_dir().join(format!("tpusim-sweep-limits-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let limits = d.join("limits.toml");
    std::fs::write(
        &limits,
        "[stacks.t0_t1_t2_t3_t4_t5_t6_t7]\nmax_ids_per_partition = 64\nmax_unique_ids_per_partition = 32\n",
    )
    .unwrap();
    let args = |out: &std::path::Path, limits: Option<&std::path::Path>| {
        let mut v: Vec<String> = [
            "sweep",
            "--preset",
            "dlrm-small",
            "--chip",
            "v5p",
            "--chips",
            "4",
            "--batch",
            "4096,8192",
            "-j",
            "1",
            "-o",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.push(out.to_str().unwrap().into());
        if let Some(l) = limits {
            v.push("--limits".into());
            v.push(l.to_str().unwrap().into());
        }
        v
    };
    let run = |v: Vec<String>| {
        let r: Vec<&str> = v.iter().map(|s| s.as_str()).collect();
        tpusim(&r)
    };
    let (code, _, err) = run(args(&d.join("default"), None));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(args(&d.join("tight"), Some(&limits)));
    assert_eq!(code, 0, "{err}");
    let rows = |name: &str| -> Vec<Vec<String>> {
        std::fs::read_to_string(d.join(name).join("sweep.csv"))
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(String::from).collect())
            .collect()
    };
    let (default, tight) = (rows("default"), rows("tight"));
    assert_eq!(default.len(), 2);
    assert_eq!(tight.len(), 2);
    for (a, b) in default.iter().zip(&tight) {
        // Same data, so the limits each configuration needs are the same; the tight file does not fit.
        assert_eq!(a[6], b[6]);
        assert_eq!(a[7], b[7]);
        assert_eq!((a[5].as_str(), b[5].as_str()), ("true", "false"), "{a:?} vs {b:?}");
    }
    let (code, _, err) = run(args(&d.join("missing"), Some(&d.join("no-such-limits.toml"))));
    assert_eq!(code, 2);
    assert!(err.contains("no-such-limits.toml"), "{err}");
}
