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

/// Runs a sweep with `args` (after `sweep`), parsing `--json` stdout when the exit code is 0.
fn sweep_json(args: &[&str]) -> serde_json::Value {
    let mut v = vec!["sweep", "--json"];
    v.extend_from_slice(args);
    let (code, out, err) = tpusim(&v);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tpusim-sweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `skewed` on 64 x v5p is slower at batch 524,288 than at 262,144 (both fit): the answer is the
/// fastest fitting batch, not the largest.
#[test]
fn the_answer_per_configuration_is_the_best_throughput_that_fits_not_the_largest_batch() {
    let d = temp_dir("best");
    let grid = [
        "--preset",
        "skewed",
        "--chip",
        "v5p",
        "--chips",
        "64",
        "--batch",
        "262144,524288",
        "-j",
        "2",
    ];
    let mut args = grid.to_vec();
    let out = d.join("a");
    args.extend(["-o", out.to_str().unwrap()]);
    let v = sweep_json(&args);
    let points = v["points"].as_array().unwrap();
    let fitting: Vec<&serde_json::Value> = points.iter().filter(|p| p["fits"] == true).collect();
    assert_eq!(fitting.len(), 2, "{points:?}");
    let rate = |p: &serde_json::Value| p["samples_per_s"].as_f64().unwrap();
    let fastest = fitting
        .iter()
        .copied()
        .max_by(|a, b| rate(a).total_cmp(&rate(b)))
        .unwrap();
    // The case this test is about: the largest fitting batch is not the fastest.
    assert_eq!(fastest["batch"], 262144);
    assert!(rate(fitting[1]) < rate(fitting[0]));
    let best = &v["answers"]["best_throughput_that_fits"][0];
    assert_eq!(
        (best["batch"].as_u64(), best["largest_fitting_batch"].as_u64()),
        (Some(262144), Some(524288))
    );
    assert_eq!(best["samples_per_s"].as_f64(), Some(rate(fastest)));
    // The human table puts the fastest rate on the row with its batch.
    let (code, text, err) = tpusim(&[&["sweep"], &grid[..], &["-o", d.join("b").to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{err}");
    let row = text.lines().find(|l| l.starts_with("v5p")).unwrap();
    let shown = sim_core::units::rate(rate(fastest), "samples/s");
    assert!(
        row.contains(&shown) && row.contains("262144") && row.contains("524288"),
        "{row}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// 8 x v5p at batch 16,384 of dlrm-small fits through minibatching with its 512 limits: the answer
/// states the limits it ran with, never "needs max_ids >= N".
#[test]
fn a_configuration_fitting_through_minibatching_is_given_with_the_limits_it_ran_with() {
    let d = temp_dir("minibatch");
    let (code, text, err) = tpusim(&[
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v5p",
        "--chips",
        "8",
        "--batch",
        "16384",
        "--target",
        "1e7",
        "-j",
        "1",
        "-o",
        d.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!text.contains("needs max_ids"), "{text}");
    let line = text
        .lines()
        .skip_while(|l| !l.starts_with("cheapest"))
        .nth(1)
        .unwrap_or("");
    assert!(
        line.contains("max_ids_per_partition = 512") && line.contains("fits through minibatching"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("sweep.json")).unwrap()).unwrap();
    let p = &v[0];
    assert!(
        p["minibatches_per_step"].as_u64().unwrap() > 1 && p["fits"] == true,
        "{p}"
    );
    assert!(
        p["limits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["max_ids_per_partition"] == 512),
        "{p}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn prices_carry_their_currency_and_source_and_bad_prices_or_targets_are_refused() {
    let d = temp_dir("prices");
    let base = [
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v5p,v6e",
        "--chips",
        "4",
        "--batch",
        "1024",
        "--steps",
        "2",
    ];
    let run = |extra: &[&str]| tpusim(&[&base[..], extra].concat());
    let (code, text, err) = run(&["--price", "v5p=1.5", "-o", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("prices per chip-hour (USD): v5p 1.50 (given), v6e 2.70 (assumed)"),
        "{text}"
    );
    let csv = std::fs::read_to_string(d.join("sweep.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name}: {header:?}"))
    };
    // Fitting rows: no error and no fit_reasons, so no quoted field.
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    for (row, want) in [
        (&rows[0], ["1.50", "USD", "given"]),
        (&rows[1], ["2.70", "USD", "assumed"]),
    ] {
        let got = [
            row[col("price_per_chip_hour")],
            row[col("currency")],
            row[col("price_source")],
        ];
        assert_eq!(got, want);
    }
    // 4 chips x 1.50 per hour; the error and fit_reasons columns stay last.
    assert_eq!(rows[0][col("cost_per_hour")], "6.00");
    assert_eq!(col("fit_reasons"), header.len() - 1);
    for (flag, value, want) in [
        (
            "--price",
            "v5x=1",
            "unknown chip 'v5x'; valid keys: v4, v5e, v5p, v6e, tpu7x",
        ),
        ("--price", "v5p=-2", "--price v5p=-2"),
        ("--price", "v5p=inf", "--price v5p=inf"),
        ("--target", "NaN", "--target NaN"),
        ("--target", "inf", "--target inf"),
        ("--batch", "4294967296", "--batch 4294967296"),
        ("-j", "100000000", "-j 100000000"),
    ] {
        let dir = d.join("refused");
        let mut args: Vec<&str> = base.to_vec();
        if flag == "--batch" {
            args[8] = value;
        } else {
            args.extend([flag, value]);
        }
        args.extend(["-o", dir.to_str().unwrap()]);
        let (code, _, err) = tpusim(&args);
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert!(err.contains(want), "{flag} {value}: {err}");
        if flag == "-j" {
            assert!(err.contains("allows") && !err.contains("os error"), "{err}");
        }
        assert!(!dir.exists(), "{flag} {value} wrote {}", dir.display());
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Shards run without a target or prices, merged with them, give the files and answers of the
/// whole sweep run with them.
#[test]
fn merge_accepts_target_and_prices() {
    let d = temp_dir("merge-target");
    let grid = [
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v5p,v6e",
        "--chips",
        "4",
        "--batch",
        "1024,2048",
        "--steps",
        "2",
        "-j",
        "1",
    ];
    let answers = ["--target", "5e6", "--price", "v6e=0.5"];
    let whole = d.join("whole");
    let (code, whole_out, err) = tpusim(&[&grid[..], &answers, &["-o", whole.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{err}");
    let shards = d.join("shards");
    for s in ["0/2", "1/2"] {
        let (code, _, err) = tpusim(&[&grid[..], &["--shard", s, "-o", shards.to_str().unwrap()]].concat());
        assert_eq!(code, 0, "{err}");
    }
    let merged = d.join("merged");
    let (code, merged_out, err) = tpusim(
        &[
            &["sweep", "--merge", shards.to_str().unwrap()][..],
            &answers,
            &["-o", merged.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    for ((name, x), (_, y)) in outputs(&whole).iter().zip(&outputs(&merged)) {
        assert!(x == y, "{name} differs between the whole sweep and the merged shards");
    }
    assert_eq!(
        whole_out.replace(whole.to_str().unwrap(), "OUT"),
        merged_out.replace(merged.to_str().unwrap(), "OUT")
    );
    assert!(
        merged_out.contains("cheapest configuration reaching 5.00 M samples/s: 4 x v6e"),
        "{merged_out}"
    );
    let (code, _, err) = tpusim(&[
        "sweep",
        "--merge",
        shards.to_str().unwrap(),
        "--price",
        "v6e=-1",
        "-o",
        d.join("x").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--price v6e=-1"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
