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
    // Nothing fits the tight file: the sweep's check fails (exit 1), its files are still written.
    let (code, _, err) = run(args(&d.join("tight"), Some(&limits)));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no configuration of the sweep fits"), "{err}");
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

/// The files a sweep writes, by name, with their bytes.
fn outputs(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    reports::sweep::SWEEP_FILES
        .iter()
        .map(|n| (n.to_string(), std::fs::read(dir.join(n)).unwrap()))
        .collect()
}

#[test]
fn shards_merged_give_the_unsharded_sweep_byte_for_byte() {
    let d = std::env::temp_dir().join(format!("tpusim-sweep-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let grid = [
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v5p,v6e",
        "--chips",
        "4,8",
        "--batch",
        "2048,4096",
        "--steps",
        "2",
        "--target",
        "1e6",
        "-j",
        "2",
    ];
    let with = |extra: &[&str]| {
        let mut v: Vec<&str> = grid.to_vec();
        v.extend_from_slice(extra);
        tpusim(&v)
    };
    let whole = d.join("whole");
    let (code, whole_out, err) = with(&["-o", whole.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // Three shards of 8 configurations (3, 3 and 2), two of them written to the same directory.
    let (a, b) = (d.join("a"), d.join("b"));
    for (shard, dir) in [("0/3", &a), ("1/3", &b), ("2/3", &a)] {
        let (code, out, err) = with(&["--shard", shard, "-o", dir.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("of 8 configurations"), "{out}");
    }
    assert!(a.join("sweep-shard-0-of-3.json").exists() && b.join("sweep-shard-1-of-3.json").exists());
    let merged = d.join("merged");
    let (code, merged_out, err) = tpusim(&[
        "sweep",
        "--merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (w, m) = (outputs(&whole), outputs(&merged));
    for ((name, x), (_, y)) in w.iter().zip(&m) {
        assert!(x == y, "{name} differs between the whole sweep and the merged shards");
    }
    // 8 configurations and a header.
    assert_eq!(String::from_utf8_lossy(&w[0].1).lines().count(), 9);
    // The printed answers are the same too (only the output directory differs).
    assert_eq!(
        whole_out.replace(whole.to_str().unwrap(), "OUT"),
        merged_out.replace(merged.to_str().unwrap(), "OUT")
    );

    // A missing shard, a shard given twice, shards of another sweep: exit 2, naming what is wrong.
    let (code, _, err) = tpusim(&[
        "sweep",
        "--merge",
        a.to_str().unwrap(),
        "-o",
        d.join("x").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("shard(s) 1/3 missing"), "{err}");
    let (code, _, err) = tpusim(&[
        "sweep",
        "--merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        d.join("x").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("shard 1/3 is also in"), "{err}");
    let other = d.join("other");
    let (code, _, err) = tpusim(&[
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v5p",
        "--chips",
        "4",
        "--batch",
        "1024",
        "--steps",
        "2",
        "--shard",
        "1/3",
        "-o",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = tpusim(&[
        "sweep",
        "--merge",
        a.to_str().unwrap(),
        other.to_str().unwrap(),
        "-o",
        d.join("x").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("shards of different sweeps"), "{err}");
    let (code, _, err) = with(&["--shard", "3/3", "-o", d.join("x").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("--shard 3/3"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
