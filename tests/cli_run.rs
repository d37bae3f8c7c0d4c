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
    let launch = sens
        .lines()
        .find(|l| l.trim_start().starts_with("tc_kernel_launch_ns"))
        .unwrap()
        .trim();
    assert!(readme.contains(launch), "{launch}");
    let (code, json, err) = tpusim(&["run", "--preset", "dlrm-criteo", "--sensitivity", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["assumptions"].as_array().unwrap().len() >= 5);
    // Measured over steady-state steps, the kernel launch cost moves the step by 4.8%: under the
    // 5% that makes an assumption one the answer hangs on (the README says so).
    assert_eq!(v["dominant"].as_array().map(|a| a.len()), Some(0), "{}", v["dominant"]);
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
