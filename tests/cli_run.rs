//! `tpusim run`, `demo` and `explain` as the README shows them.

mod common;

use common::tpusim;

fn tmp(name: &str) -> std::path::PathBuf {
    common::scratch_dir(name)
}

#[test]
fn run_json_schema() {
    let (code, out, err) = tpusim(&["run", "--preset", "dlrm-small", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for k in [
        "step_time_us",
        "samples_per_s",
        "busy_fraction",
        "overlap_fraction",
        "hbm_bytes_per_step",
        "hbm_padding_bytes_per_step",
        "peak_memory_bytes",
        "capacity_bytes",
        "fits",
        "limits",
        "minibatches_per_step",
        "dropped_ids_per_step",
    ] {
        assert!(v.get(k).is_some(), "{k}");
    }
    for k in ["tc", "sc", "hbm", "ici", "host"] {
        assert!(v["busy_fraction"][k].as_f64().is_some(), "{k}");
    }
}

#[test]
fn run_human_trace_report_and_functional() {
    let d = tmp("run");
    let trace = d.join("t.json");
    let (code, out, _) = tpusim(&[
        "run",
        "--preset",
        "balanced",
        "--pipelining",
        "sequential",
        "--functional",
        "--trace",
        trace.to_str().unwrap(),
        "--report",
        d.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("-bound:") && out.contains("loss"), "{out}");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(t["traceEvents"].as_array().unwrap().len() > 100);
    for f in ["summary.json", "report.md", "report.html", "gantt.svg"] {
        assert!(d.join(f).exists(), "{f}");
    }
}

#[test]
fn criteo_does_not_fit_the_default_limits_check_but_runs() {
    let (code, out, _) = tpusim(&["run", "--preset", "dlrm-criteo", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["step_time_us"].as_f64().unwrap() > 0.0);
    assert_eq!(code, if v["fits"].as_bool().unwrap() { 0 } else { 1 });
}

#[test]
fn bad_runs_exit_2() {
    let (code, _, err) = tpusim(&["run", "--preset", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown preset 'nope'"), "{err}");
    let (code, _, err) = tpusim(&["run", "--preset", "dlrm-small", "--chips", "3"]);
    assert_eq!(code, 2);
    assert!(err.contains("chips must be a power of two"), "{err}");
    let (code, _, err) = tpusim(&["run", "--preset", "dlrm-small", "--chip", "v5e"]);
    assert_eq!(code, 2);
    assert!(err.contains("no SparseCores"), "{err}");
}

#[test]
fn demo_and_explain() {
    let d = tmp("demo");
    let (code, out, err) = tpusim(&["demo", "--out", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("step time (pipelined)") && out.contains("report.html"),
        "{out}"
    );
    assert!(d.join("trace.json").exists() && d.join("report.html").exists());
    let svg = d.join("p.svg");
    let (code, out, _) = tpusim(&[
        "explain",
        "pipelining",
        "--preset",
        "balanced",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    // The one definition of staleness (the figures', the lesson's and the README's).
    assert!(out.contains(sim_core::summary::STALENESS), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("SC fwd") && text.contains("SparseCore backward"),
        "{text}"
    );
    // The PNG beside it, with the same basename.
    assert_eq!(&std::fs::read(d.join("p.png")).unwrap()[..4], b"\x89PNG");
    let dir = env!("CARGO_MANIFEST_DIR");
    let (code, out, _) = tpusim(&[
        "explain",
        "limits",
        "--spec",
        &format!("{dir}/testdata/preprocess/example/spec.json"),
        "--ids",
        &format!("{dir}/testdata/preprocess/example/ids_hot.npz"),
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("over the limit"), "{out}");
}

#[test]
fn sweep_answers_planners() {
    let d = tmp("sweep");
    let (code, out, err) = tpusim(&[
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v5p,v6e",
        "--chips",
        "4,8",
        "--batch",
        "4096..8192x2",
        "--target",
        "4e7",
        "-j",
        "2",
        "-o",
        d.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("largest batch that fits") && out.contains("cheapest configuration"),
        "{out}"
    );
    let csv = std::fs::read_to_string(d.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 2 * 2);
    assert!(std::fs::read_to_string(d.join("sweep.svg"))
        .unwrap()
        .contains("<polyline"));
    let (code, _, err) = tpusim(&[
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v9",
        "--chips",
        "4",
        "--batch",
        "4096",
        "-o",
        d.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn workload_file_with_npz_ids() {
    let f = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/workloads/npz-example.toml");
    let (code, out, err) = tpusim(&["run", f]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("npz-example") && !out.contains("-0%"), "{out}");
}

/// The README's "Tuning SparseCore" what-if, figure for figure.
#[test]
fn readme_tuning_what_if() {
    let readme = include_str!("../README.md");
    let step = |out: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with("step time"))
            .unwrap()
            .trim()
            .to_string()
    };
    let (code, base, err) = tpusim(&["run", "--preset", "skewed"]);
    assert_eq!(code, 0, "{err}");
    assert!(readme.contains(&step(&base)), "{}", step(&base));
    let straggler = base.lines().find(|l| l.contains("is the straggler")).unwrap().trim();
    assert!(readme.contains(&straggler[..60]), "{straggler}");
    let (_, shuffled, _) = tpusim(&["run", "--preset", "skewed", "--set", "shuffle_ids=true"]);
    assert!(readme.contains(&step(&shuffled)), "{}", step(&shuffled));
    let (_, unstacked, _) = tpusim(&[
        "run",
        "--preset",
        "skewed",
        "--set",
        "shuffle_ids=true",
        "--set",
        "disable_table_stacking=true",
    ]);
    assert!(readme.contains(&step(&unstacked)), "{}", step(&unstacked));
    assert!(unstacked.contains("warning: 8 of 8 stacks hold fewer than 5 or more than 100 tables"));
    let dir = tmp("tuning");
    let (code, serial, err) = tpusim(&[
        "run",
        "--preset",
        "skewed",
        "--set",
        "shuffle_ids=true",
        "--set",
        "disable_table_stacking=true",
        "--set",
        "xla_sc_num_serialized_tables_to_optimize_hbm=2",
        "--report",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(readme.contains(&step(&serial)), "{}", step(&serial));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for knob in [
        "| xla_sc_num_serialized_tables_to_optimize_hbm | 2 | SparseCore HBM stack peak 12.0 MiB in 4 serial group(s)",
        "| shuffle_ids | true |",
        "| disable_table_stacking | true | 8 stacks",
        "| max_ids_per_chip_per_sample | 64 |",
        "| xla_sc_detect_nan | false |",
        "| initialize_tables_on_host / enable_fast_table_initialization | true / false | start-up",
        "## HBM per chip by kind",
        "## Warnings",
    ] {
        assert!(md.contains(knob), "report lacks {knob}");
    }
}

#[test]
fn set_overrides_are_checked() {
    let (code, _, err) = tpusim(&["run", "--preset", "skewed", "--set", "nope=1"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown field `nope`"), "{err}");
    let (code, _, err) = tpusim(&["run", "--preset", "skewed", "--set", "tables.9.dim=3"]);
    assert_eq!(code, 2);
    assert!(err.contains("'9' is not an index below 8"), "{err}");
    let (code, _, err) = tpusim(&["run", "--preset", "skewed", "--set", "limits.max_ids_per_table.t9=8"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown table 't9'"), "{err}");
    // A limit the data exceeds: a verdict (exit 1) with the numbers, not a crash.
    let (code, out, _) = tpusim(&[
        "run",
        "--preset",
        "skewed",
        "--set",
        "limits.max_ids_per_chip_per_sample=1",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("ids after padding but the max_ids_per_chip is set to be"),
        "{out}"
    );
}

/// The README's whole-step section, figure for figure.
#[test]
fn readme_whole_step_and_sensitivity() {
    let readme = include_str!("../README.md");
    let (code, out, err) = tpusim(&["run", "--preset", "dlrm-criteo"]);
    assert_eq!(code, 0, "{err}");
    let step = out
        .lines()
        .find(|l| l.trim_start().starts_with("step time"))
        .unwrap()
        .trim();
    assert!(readme.contains(step), "{step}");
    let bottleneck = out.lines().find(|l| l.contains("-bound:")).unwrap();
    assert!(readme.contains(bottleneck), "{bottleneck}");
    let (code, sens, err) = tpusim(&["run", "--preset", "dlrm-criteo", "--sensitivity"]);
    assert_eq!(code, 0, "{err}");
    let first = sens.lines().next().unwrap();
    assert!(readme.contains(first), "{first}");
    let sc = sens
        .lines()
        .find(|l| l.trim_start().starts_with("sc_clock_mhz"))
        .unwrap()
        .trim();
    assert!(readme.contains(sc), "{sc}");
    // A faster SparseCore slows this step; the output says where stages contend (README, sensitivity).
    let note = sens
        .lines()
        .find(|l| l.trim_start().starts_with("note: sc_clock_mhz doubled"))
        .unwrap_or_else(|| panic!("no contention note:\n{sens}"))
        .trim();
    assert!(readme.contains(note), "{note}");
    let (code, json, err) = tpusim(&["run", "--preset", "dlrm-criteo", "--sensitivity", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["assumptions"].as_array().unwrap().len() >= 5);
    let sc_clock = v["assumptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "sc_clock_mhz")
        .unwrap();
    // Halved and doubled both slower than as given: the doubled run's all-to-all overlaps the all-reduce.
    let base = v["step_time_us"].as_f64().unwrap();
    assert!(sc_clock["halved_step_time_us"].as_f64().unwrap() > base);
    assert!(sc_clock["doubled_step_time_us"].as_f64().unwrap() > base);
    let c = &sc_clock["contention"];
    assert_eq!(c["variant"], "doubled");
    assert_eq!(c["stages"], serde_json::json!(["all_to_all", "all_reduce"]));
    assert!(c["resource"].as_str().unwrap().starts_with("ICI links"), "{c}");
    // No assumed value moves the step by the 5% that makes the answer hang on it (the README says so).
    assert_eq!(v["dominant"], serde_json::json!([]), "{}", v["dominant"]);
    // The headline's one-at-a-time range is the lowest and highest step time of the table's rows.
    let rows = v["assumptions"].as_array().unwrap();
    let times = rows.iter().flat_map(|a| {
        [
            a["halved_step_time_us"].as_f64().unwrap(),
            a["doubled_step_time_us"].as_f64().unwrap(),
        ]
    });
    let (lo, hi) = times.fold((f64::MAX, f64::MIN), |(l, h), t| (l.min(t), h.max(t)));
    let expected = format!("{lo:.1} µs to {hi:.1} µs with one assumed constant halved or doubled at a time");
    assert!(first.contains(&expected), "{first} lacks {expected}");
    // A chip override through --set reaches the run.
    let (_, slow, _) = tpusim(&[
        "run",
        "--preset",
        "dlrm-criteo",
        "--set",
        "chip.ici_hop_latency_ns=5000",
    ]);
    let slow_step = slow
        .lines()
        .find(|l| l.trim_start().starts_with("step time"))
        .unwrap()
        .trim();
    assert_ne!(slow_step, step);
    let (code, _, err) = tpusim(&["run", "--preset", "dlrm-criteo", "--set", "chip.nope=1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nope"), "{err}");
}

/// `run --json` of dlrm-small with extra arguments: (exit code, summary).
fn small_json(extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["run", "--preset", "dlrm-small", "--json"];
    args.extend_from_slice(extra);
    let (code, out, err) = tpusim(&args);
    assert!(code == 0 || code == 1, "{code}: {err}");
    (code, serde_json::from_str(&out).unwrap())
}

#[test]
fn limits_follow_their_tables_when_stacking_regroups_them() {
    // Written for the stack dlrm-small's 8 tables make at 1,024 samples per chip. On one chip at
    // 32,768 samples a table's activations fill a stack alone (64 wide x 8,192 samples per
    // SparseCore x 4 B = 2 MiB), so every table is a stack of its own: each keeps the file's limits.
    let d = tmp("limits-follow");
    let file = d.join("limits.json");
    std::fs::write(
        &file,
        r#"{"stacks": {"t0_t1_t2_t3_t4_t5_t6_t7": {"max_ids_per_partition": 30000, "max_unique_ids_per_partition": 20000}}}"#,
    )
    .unwrap();
    let set_file = format!("limits.file={}", file.display());
    let split = [
        "--chips",
        "1",
        "--batch",
        "32768",
        "--steps",
        "1",
        "--set",
        set_file.as_str(),
    ];
    let (_, v) = small_json(&split);
    let stacks = v["limits"].as_array().unwrap();
    let names: Vec<&str> = stacks.iter().map(|s| s["stack"].as_str().unwrap()).collect();
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"]);
    for s in stacks {
        assert_eq!(
            (
                s["max_ids_per_partition"].as_u64(),
                s["max_unique_ids_per_partition"].as_u64()
            ),
            (Some(30000), Some(20000)),
            "{s}"
        );
        assert_eq!(
            s["limits_from"],
            serde_json::json!([{"origin": "file", "key": "t0_t1_t2_t3_t4_t5_t6_t7"}])
        );
    }
    // `--set limits.stacks.KEY...` wins over the file for the tables it names; the field it leaves
    // out is the workload-wide value (512 in dlrm-small).
    let mut with_set = split.to_vec();
    with_set.extend(["--set", "limits.stacks.t3.max_ids_per_partition=1000"]);
    let (_, v) = small_json(&with_set);
    let t3 = &v["limits"][3];
    assert_eq!(
        (
            t3["max_ids_per_partition"].as_u64(),
            t3["max_unique_ids_per_partition"].as_u64()
        ),
        (Some(1000), Some(512))
    );
    assert_eq!(
        t3["limits_from"],
        serde_json::json!([{"origin": "workload", "key": "t3"}])
    );
    // Named by nothing: the default, and said so.
    let (_, v) = small_json(&["--steps", "1"]);
    assert_eq!(
        v["limits"][0]["limits_from"],
        serde_json::json!([{"origin": "default"}])
    );
    assert_eq!(v["limits"][0]["max_ids_per_partition"], 512);
    // A key naming no table is refused (exit 2), naming the key.
    let (code, _, err) = tpusim(&[
        "run",
        "--preset",
        "dlrm-small",
        "--set",
        "limits.stacks.t9.max_ids_per_partition=64",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("limits.stacks.t9: names no table"), "{err}");
}

#[test]
fn run_names_every_limit_to_raise_and_one_round_of_them_fits() {
    // Unstacked tables, limits of 64 ids and no minibatching: every table's hot partitions are over
    // its limits in some of the 3 steps.
    let base = [
        "--batch",
        "16384",
        "--steps",
        "3",
        "--set",
        "disable_table_stacking=true",
        "--set",
        "limits.enable_minibatching=false",
        "--set",
        "limits.max_ids_per_partition=64",
        "--set",
        "limits.max_unique_ids_per_partition=64",
    ];
    let (code, v) = small_json(&base);
    assert_eq!(code, 1);
    let stacks = v["limits"].as_array().unwrap();
    // Dropping is off: an overflow aborts, nothing is reported as dropped.
    assert!(stacks.iter().all(|s| s["runtime"] != "drops_ids"), "{stacks:?}");
    let aborting: Vec<&serde_json::Value> = stacks.iter().filter(|s| s["runtime"] == "would_abort").collect();
    assert!(aborting.len() >= 2, "{stacks:?}");
    let needed = v["limits_needed"].as_array().unwrap();
    for s in &aborting {
        // The limit each needs is the run's largest observation, the number the JSON has.
        for (limit, observed, current) in [
            ("max_ids_per_partition", "observed_max_ids", "max_ids_per_partition"),
            (
                "max_unique_ids_per_partition",
                "observed_max_unique_ids",
                "max_unique_ids_per_partition",
            ),
        ] {
            if s[observed].as_u64() <= s[current].as_u64() {
                continue;
            }
            let n = needed
                .iter()
                .find(|n| n["stack"] == s["stack"] && n["limit"] == limit)
                .unwrap_or_else(|| panic!("{limit} of {s}: {needed:?}"));
            assert_eq!(n["needed"], s[observed], "{n}");
        }
        assert!(
            s["message"]
                .as_str()
                .unwrap()
                .contains("needs max_ids_per_partition >= "),
            "{s}"
        );
    }
    // The human output lists every one.
    let mut human = vec!["run", "--preset", "dlrm-small"];
    human.extend_from_slice(&base);
    let (_, out, _) = tpusim(&human);
    for n in needed {
        assert!(out.contains(n["set"].as_str().unwrap()), "{n}\n{out}");
    }
    // Applied once, together: it fits.
    let sets: Vec<String> = needed.iter().map(|n| n["set"].as_str().unwrap().to_string()).collect();
    let mut again: Vec<&str> = base.to_vec();
    for s in &sets {
        again.extend(["--set", s.as_str()]);
    }
    let (code, v) = small_json(&again);
    assert_eq!(
        (code, &v["fits"]),
        (0, &serde_json::json!(true)),
        "{}",
        v["fit_reasons"]
    );
    assert!(v.get("limits_needed").is_none());
}

#[test]
fn presets_follow_the_chip() {
    // dlrm-criteo is 64 v4 chips (a 4x4x4 3D torus); v6e has a 2D torus: 64 of them are 8x8.
    let (code, out, err) = tpusim(&[
        "run",
        "--preset",
        "dlrm-criteo",
        "--chip",
        "v6e",
        "--steps",
        "1",
        "--json",
    ]);
    assert!(code == 0 || code == 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["slice"].as_str().unwrap().starts_with("8x8"), "{}", v["slice"]);
    // An explicit shape the chip cannot have: exit 2, naming the shapes it can.
    let (code, _, err) = tpusim(&[
        "run",
        "--preset",
        "dlrm-criteo",
        "--chip",
        "v6e",
        "--set",
        "topology=4x4x4",
        "--steps",
        "1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("1x64, 2x32, 4x16, 8x8"), "{err}");
}
