//! Issue 15: one flag vocabulary (`--chip`, `-o/--out`, `--json`, `--set` with suggestions), human
//! units, fits as a reason list, one source of suggested limits, verdicts that follow the schedule.

mod common;

use common::tpusim;

fn tmp(name: &str) -> std::path::PathBuf {
    common::scratch_dir(&format!("vocab-{name}"))
}

fn data(path: &str) -> String {
    format!("{}/testdata/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn layout_takes_chip_and_keeps_tpu() {
    let (code, by_chip, err) = tpusim(&["layout", "--chip", "v5p", "--json", "bf16[8,1,1280,16384]"]);
    assert_eq!(code, 0, "{err}");
    let (code, by_tpu, err) = tpusim(&["layout", "--tpu", "v5p", "--json", "bf16[8,1,1280,16384]"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(by_chip, by_tpu);
    assert_eq!(json(&by_chip)["padded_bytes"], 335544320);
    // Human output gives the binary-unit reading beside the exact bytes.
    let (_, text, _) = tpusim(&["layout", "--chip", "v5p", "bf16[8,1,1280,16384]"]);
    assert!(text.contains("335544320  (320 MiB)"), "{text}");
    // -o/--out writes the picture (--svg still works).
    let d = tmp("layout");
    for flag in ["-o", "--out", "--svg"] {
        let f = d.join(format!("l{flag}.svg"));
        let (code, _, err) = tpusim(&["layout", "f32[3,5]{1,0:T(2,2)}", flag, f.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(std::fs::read_to_string(&f).unwrap().starts_with("<svg"), "{flag}");
    }
    // No float noise: 96 / 60 bytes is 60% overhead exactly.
    let (_, out, _) = tpusim(&["layout", "--json", "f32[3,5]{1,0:T(2,2)}"]);
    assert!(out.contains("\"padding_overhead\":0.6,"), "{out}");
}

#[test]
fn set_suggests_creates_sections_and_takes_aliases() {
    let (code, _, err) = tpusim(&[
        "run",
        "--preset",
        "dlrm-small",
        "--set",
        "shuffle_id=true",
        "--steps",
        "2",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown field `shuffle_id`") && err.contains("did you mean `shuffle_ids`?"),
        "{err}"
    );
    let (code, _, err) = tpusim(&[
        "run",
        "--preset",
        "dlrm-small",
        "--set",
        "limits.max_ids_per_partiton=8",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean `limits.max_ids_per_partition`?"), "{err}");
    let (code, out, err) = tpusim(&[
        "run",
        "--preset",
        "dlrm-small",
        "--steps",
        "2",
        "--set",
        "quantization.quantization_config_num_buckets=256",
        "--set",
        "host.maximum_parallel_iterations=8",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(json(&out)["step_time_us"].as_f64().unwrap() > 0.0);
}

/// Whether `text` has a byte count of 1024 or more written out in bytes ("81752454 B").
fn raw_bytes(text: &str) -> bool {
    text.split(' ')
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[1].starts_with('B') && w[0].parse::<u64>().is_ok_and(|n| n >= 1024))
}

#[test]
fn run_speaks_human_units_and_json_keeps_raw_numbers() {
    let (code, out, err) = tpusim(&["run", "--preset", "dlrm-small", "--steps", "3"]);
    assert_eq!(code, 0, "{err}");
    let line = |k: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(k))
            .unwrap_or_else(|| panic!("{k}: {out}"))
    };
    assert!(line("throughput").contains(" M samples/s"), "{out}");
    assert!(
        line("step time").contains(" µs") || line("step time").contains(" ms"),
        "{out}"
    );
    assert!(
        line("HBM   ").contains(" GiB") && line("HBM   ").contains(" of "),
        "{out}"
    );
    assert!(line("VMEM").contains("MiB of 64.0 MiB"), "{out}");
    assert!(line("TileSpmem").contains("KiB of 512 KiB"), "{out}");
    assert!(line("fits").trim().ends_with("yes"), "{out}");
    // No raw byte counts or float noise in the human summary.
    assert!(!raw_bytes(&out) && !out.contains("000000000"), "{out}");
    let (code, out, err) = tpusim(&["run", "--preset", "dlrm-small", "--steps", "3", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert!(v["hbm_bytes_per_step"].is_u64() && v["capacity_bytes"]["hbm"].as_u64() == Some(102005473280));
    assert!(v["samples_per_s"].as_f64().unwrap() > 1e6);
}

/// `tpusim run --preset dlrm-small --batch 16384`: the abort first, the reason list at the end, no
/// "use a larger batch" advice, no dropped ids with dropping off.
#[test]
fn misfit_says_which_constraint_abort_first() {
    let (code, out, _) = tpusim(&["run", "--preset", "dlrm-small", "--batch", "16384"]);
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[1].contains("DOES NOT FIT run-time limits: stack") && lines[1].contains("would abort"),
        "{out}"
    );
    let fits = lines.iter().find(|l| l.trim_start().starts_with("fits")).unwrap();
    assert_eq!(fits.trim(), "fits               no: run-time limits");
    assert!(!out.contains("larger batch"), "{out}");
    assert!(!out.contains("dropped ids"), "{out}");
    let (_, out, _) = tpusim(&["run", "--preset", "dlrm-small", "--batch", "16384", "--json"]);
    let v = json(&out);
    assert_eq!(v["fits"], false);
    assert_eq!(v["fit_reasons"][0]["kind"], "runtime_limits");
    // With dropping on, the dropped ids are said.
    let (_, out, _) = tpusim(&[
        "run",
        "--preset",
        "dlrm-small",
        "--steps",
        "2",
        "--set",
        "limits.allow_id_dropping=true",
    ]);
    assert!(out.contains("dropped ids/step"), "{out}");
}

/// `tpusim run --preset balanced --pipelining sequential`: the cause is the schedule, not padding.
#[test]
fn sequential_bottleneck_follows_the_schedule() {
    let (code, out, err) = tpusim(&["run", "--preset", "balanced", "--pipelining", "sequential"]);
    assert_eq!(code, 0, "{err}");
    let last = out.lines().last().unwrap();
    assert!(!last.contains("HBM-bound") && !last.contains("padding"), "{last}");
    assert!(last.contains("enable pipelining"), "{last}");
}

#[test]
fn sweep_json_and_fit_reasons_per_configuration() {
    let d = tmp("sweep");
    let (code, out, err) = tpusim(&[
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v5p",
        "--chips",
        "4",
        "--batch",
        "4096,16384",
        "--steps",
        "2",
        "--target",
        "1e7",
        "--out",
        d.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0]["fit_reasons"].as_array().unwrap().len(), 0);
    assert_eq!(points[1]["fits"], false);
    assert_eq!(points[1]["fit_reasons"][0]["kind"], "runtime_limits");
    assert_eq!(v["answers"]["largest_batch_that_fits"][0]["batch"], 4096);
    assert_eq!(v["answers"]["cheapest"]["batch"], 4096);
    let saved = json(&std::fs::read_to_string(d.join("sweep.json")).unwrap());
    assert_eq!(saved[1]["fit_reasons"], points[1]["fit_reasons"]);
    let csv = std::fs::read_to_string(d.join("sweep.csv")).unwrap();
    let mut rows = csv.lines();
    assert!(rows.next().unwrap().ends_with(",error,fit_reasons"), "{csv}");
    let fitting = rows.next().unwrap();
    assert!(fitting.ends_with(','), "{fitting}");
    let misfit = rows.next().unwrap();
    assert!(misfit.contains(",\"run-time limits: stack "), "{misfit}");
    // The human answers use units; --output stays an alias.
    let (code, out, err) = tpusim(&[
        "sweep",
        "--preset",
        "dlrm-small",
        "--chip",
        "v5p",
        "--chips",
        "4",
        "--batch",
        "16384",
        "--steps",
        "2",
        "--output",
        d.to_str().unwrap(),
    ]);
    // No configuration fits: exit 1, as `run` on a misfit.
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("none") && out.contains("smallest batch: run-time limits"),
        "{out}"
    );
}

#[test]
fn systolic_explain_and_demo_print_json() {
    let d = tmp("json");
    let (code, out, err) = tpusim(&[
        "systolic",
        "--cfg",
        &data("systolic/scale.cfg"),
        "--topology",
        &data("systolic/gemm.csv"),
        "--json",
        "-o",
        d.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["layers"][0]["total_cycles"], 2551);
    assert_eq!(v["layers"][1]["total_cycles"], 89983);
    assert!(d.join("COMPUTE_REPORT.csv").exists());
    let svg = d.join("p.svg");
    let (code, out, err) = tpusim(&[
        "explain",
        "pipelining",
        "--preset",
        "balanced",
        "--steps",
        "4",
        "-o",
        svg.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert!(
        v["speedup"].as_f64().unwrap() > 1.0 && v["sequential_step_time_us"].as_f64().is_some(),
        "{v}"
    );
    assert!(svg.exists());
    let (code, out, err) = tpusim(&[
        "explain",
        "limits",
        "--spec",
        &data("preprocess/example/spec.json"),
        "--ids",
        &data("preprocess/example/ids_hot.npz"),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let over = v["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["partitions"].as_array().unwrap().clone())
        .filter(|p| p["over_limit"] == true)
        .count();
    assert!(over > 0, "{v}");
    let demo = d.join("demo");
    let (code, out, err) = tpusim(&["demo", "-o", demo.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert!(v["speedup"].as_f64().unwrap() > 1.0, "{v}");
    assert!(v["files"].as_array().unwrap().len() >= 5);
    assert!(demo.join("report.html").exists());
}

#[test]
fn run_out_is_the_report_directory() {
    let d = tmp("runout");
    for flag in ["-o", "--out", "--report"] {
        let dir = d.join(flag.trim_start_matches('-'));
        let (code, out, err) = tpusim(&[
            "run",
            "--preset",
            "dlrm-small",
            "--steps",
            "2",
            flag,
            dir.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(dir.join("report.html").exists(), "{flag}: {out}");
    }
}

/// `limits estimate` and `limits validate` suggest the same limits for the same data and headroom.
#[test]
fn estimate_and_validate_suggest_the_same_limits() {
    let spec = data("preprocess/example/spec.json");
    let ids = [
        data("preprocess/example/ids.npz"),
        data("preprocess/example/ids_hot.npz"),
    ];
    for headroom in ["0.1", "0", "0.5"] {
        let (code, est, err) = tpusim(&[
            "limits",
            "estimate",
            "--spec",
            &spec,
            "--ids",
            &ids[0],
            &ids[1],
            "--headroom",
            headroom,
            "--json",
        ]);
        assert_eq!(code, 0, "{err}");
        let est = json(&est);
        let (_, val, err) = tpusim(&[
            "limits",
            "validate",
            "--spec",
            &spec,
            "--chip",
            "v5p",
            "--ids",
            &ids[0],
            &ids[1],
            "--headroom",
            headroom,
            "--json",
        ]);
        let val = json(&val);
        let stacks = val["stacks"].as_array().unwrap_or_else(|| panic!("{err}"));
        assert_eq!(stacks.len(), 2);
        for s in stacks {
            let name = s["stack"].as_str().unwrap();
            let e = &est["limits"]["stacks"][name];
            assert_eq!(
                s["suggested"]["max_ids_per_partition"], e["max_ids_per_partition"],
                "{name} at headroom {headroom}"
            );
            assert_eq!(
                s["suggested"]["max_unique_ids_per_partition"], e["max_unique_ids_per_partition"],
                "{name} at headroom {headroom}"
            );
        }
    }
    // The human table says the same, in units.
    let (_, text, _) = tpusim(&["limits", "validate", "--spec", &spec, "--chip", "v5p", "--ids", &ids[0]]);
    assert!(text.contains("KiB of 95.0 GiB on v5p"), "{text}");
    let d = tmp("limits");
    let f = d.join("l.json");
    let (code, _, err) = tpusim(&[
        "limits",
        "estimate",
        "--spec",
        &spec,
        "--ids",
        &ids[0],
        "--out",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(f.exists());
}

#[test]
fn chip_set_suggests_the_field() {
    let (code, _, err) = tpusim(&["run", "--preset", "dlrm-small", "--set", "chip.ici_hop_latency=5"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean 'ici_hop_latency_ns'?"), "{err}");
}

#[test]
fn chips_and_reports_speak_units() {
    let (code, out, err) = tpusim(&["chips", "--chip", "v5p"]);
    assert_eq!(code, 0, "{err}");
    let line = |k: &str| {
        out.lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_else(|| panic!("{k}: {out}"))
    };
    assert!(line("hbm_bytes ").contains("95.0 GiB"), "{out}");
    assert!(line("hbm_bytes_per_s ").contains("2.77 TB/s"), "{out}");
    let d = tmp("report");
    let (code, _, err) = tpusim(&[
        "run",
        "--preset",
        "dlrm-small",
        "--steps",
        "2",
        "-o",
        d.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(d.join("report.md")).unwrap();
    assert!(md.contains("| fits | yes |") && md.contains(" M samples/s |"), "{md}");
    assert!(!raw_bytes(&md.replace('|', " ")), "{md}");
}
