//! `tpusim hlo`: JSON schema, exit codes (2 for malformed text with line and column, 1 for `--strict` with
//! unmodelled ops), what-ifs, traces, and every command of the README's "Your own model" section.

mod common;

use common::{tpusim, tpusim_json as json};

const BLOCK: &str = "testdata/hlo/transformer_block.b8_s512_d768_h12_fwd_bf16.hlo.txt";

#[test]
fn json_has_the_schema_and_exact_bytes() {
    let v = json(&["hlo", BLOCK, "--chip", "v5p", "--json"]);
    for k in [
        "total_cycles",
        "time_us",
        "argument_bytes",
        "output_bytes",
        "temp_bytes",
        "fits",
        "kernels",
    ] {
        assert!(v.get(k).is_some(), "missing {k}: {v}");
    }
    // testdata/hlo/programs.json: transformer_block.b8_s512_d768_h12_fwd_bf16@v5p.
    assert_eq!(v["argument_bytes"], 20463616);
    assert_eq!(v["output_bytes"], 6291456);
    assert_eq!(v["fits"], true);
    let k = &v["kernels"][0];
    for f in [
        "name",
        "instructions",
        "cycles",
        "bound_by",
        "flops",
        "hbm_bytes",
        "padding_bytes",
    ] {
        assert!(k.get(f).is_some(), "kernel lacks {f}: {k}");
    }
    let sum: u64 = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["cycles"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, v["total_cycles"].as_u64().unwrap());
}

#[test]
fn what_ifs_move_the_right_kernels() {
    let base = json(&["hlo", BLOCK, "--chip", "v5e", "--json"]);
    let hbm = json(&[
        "hlo",
        BLOCK,
        "--chip",
        "v5e",
        "--json",
        "--set",
        "chip.hbm_bytes_per_s=1.638e12",
    ]);
    let slow = json(&[
        "hlo",
        BLOCK,
        "--chip",
        "v5e",
        "--json",
        "--set",
        "chip.hbm_bytes_per_s=4.1e11",
    ]);
    let t = |v: &serde_json::Value| v["total_cycles"].as_u64().unwrap();
    // The block's intermediates stay in VMEM and its kernels are MXU- or VPU-bound on v5e: twice the HBM
    // bandwidth cannot make it slower, half of it makes it slower.
    assert!(
        t(&hbm) <= t(&base) && t(&base) < t(&slow),
        "{} {} {}",
        t(&hbm),
        t(&base),
        t(&slow)
    );
    // An optimizer update streams every parameter and moment from HBM: twice the bandwidth speeds it up.
    let adam = "testdata/hlo/optimizer.adam_small_nodonate_f32.hlo.txt";
    let adam_base = json(&["hlo", adam, "--chip", "v5e", "--json"]);
    let adam_hbm = json(&[
        "hlo",
        adam,
        "--chip",
        "v5e",
        "--json",
        "--set",
        "chip.hbm_bytes_per_s=1.638e12",
    ]);
    assert!(t(&adam_hbm) < t(&adam_base), "{} {}", t(&adam_hbm), t(&adam_base));
    // Bytes do not depend on bandwidth.
    assert_eq!(hbm["argument_bytes"], base["argument_bytes"]);
    let clock = json(&[
        "hlo",
        BLOCK,
        "--chip",
        "v5e",
        "--json",
        "--set",
        "chip.tc_clock_mhz=3000",
    ]);
    assert!(clock["time_us"].as_f64().unwrap() < base["time_us"].as_f64().unwrap());
    let (code, _, err) = tpusim(&["hlo", BLOCK, "--chip", "v5e", "--set", "chip.no_such_field=1"]);
    assert_eq!(code, 2);
    assert!(err.contains("no_such_field"), "{err}");
}

#[test]
fn malformed_text_exits_2_with_line_and_column() {
    let dir = std::env::temp_dir().join(format!("tpusim-cli-hlo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.hlo.txt");
    std::fs::write(
        &bad,
        "HloModule m\n\nENTRY e {\n  a = f32[2]{0} parameter(0)\n  ROOT b = f32[2]{0} add(a, q)\n}\n",
    )
    .unwrap();
    let (code, _, err) = tpusim(&["hlo", bad.to_str().unwrap(), "--chip", "v4"]);
    assert_eq!(code, 2);
    assert!(err.contains("line 5, column 29") && err.contains("`q`"), "{err}");
    let (code, _, err) = tpusim(&["hlo", "does/not/exist.hlo", "--chip", "v4"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = tpusim(&["hlo", BLOCK, "--chip", "v9"]);
    assert_eq!(code, 2, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unmodelled_ops_warn_and_strict_fails() {
    let f = "testdata/hlo/embedding_bag_mlp.v100000_d64_bag20_b1024_fwd_f32.hlo.txt";
    let (code, _, err) = tpusim(&["hlo", f, "--chip", "v6e"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning") && err.contains("gather"), "{err}");
    let (code, _, _) = tpusim(&["hlo", f, "--chip", "v6e", "--strict"]);
    assert_eq!(code, 1);
    let (code, _, err) = tpusim(&["hlo", BLOCK, "--chip", "v6e", "--strict"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn trace_is_chrome_json_with_one_event_per_kernel() {
    let dir = std::env::temp_dir().join(format!("tpusim-cli-hlo-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.json");
    let v = json(&[
        "hlo",
        BLOCK,
        "--chip",
        "tpu7x",
        "--json",
        "--trace",
        path.to_str().unwrap(),
    ]);
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let xs = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .count();
    assert_eq!(xs, v["kernels"].as_array().unwrap().len());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn readme_commands_run() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let start = readme.find("## Your own model").expect("README has the section");
    let section = &readme[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
    let dir = std::env::temp_dir().join(format!("tpusim-readme-hlo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ran = 0;
    for line in section[..end].lines().filter(|l| l.starts_with("$ tpusim hlo")) {
        let args: Vec<String> = line
            .trim_start_matches("$ tpusim ")
            .split_whitespace()
            .map(|a| {
                if a.starts_with("testdata/") {
                    format!("{root}/{a}")
                } else if a.ends_with(".trace.json") {
                    dir.join(a).display().to_string()
                } else {
                    a.to_string()
                }
            })
            .collect();
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (code, out, err) = tpusim(&refs);
        assert_eq!(code, 0, "{line}: {err}");
        assert!(!out.is_empty(), "{line}");
        ran += 1;
    }
    assert!(ran >= 4, "only {ran} commands found");
    std::fs::remove_dir_all(&dir).ok();
}

/// The band: every answer has `total_cycles_low <= total_cycles <= total_cycles_high`, each kernel a `domain`;
/// a program the constants were fitted on is inside the calibrated domain by construction (the domain is the
/// fit records' kernels), so its out-of-domain share is 0 and the human output says so.
#[test]
fn json_has_the_band_and_a_domain_per_kernel() {
    let v = json(&["hlo", BLOCK, "--chip", "v5p", "--json"]);
    let (lo, t, hi) = (
        v["total_cycles_low"].as_u64().unwrap(),
        v["total_cycles"].as_u64().unwrap(),
        v["total_cycles_high"].as_u64().unwrap(),
    );
    assert!(lo < t && t < hi, "{lo} {t} {hi}");
    assert_eq!(v["out_of_domain_fraction"], 0.0);
    for k in v["kernels"].as_array().unwrap() {
        assert_eq!(k["domain"]["calibrated"], true, "{k}");
        assert!(
            k["domain"]["class"].is_string() && k["domain"]["cell"].is_object(),
            "{k}"
        );
    }
    let (code, out, _) = tpusim(&["hlo", BLOCK, "--chip", "v5p"]);
    assert_eq!(code, 0);
    assert!(out.contains("80% band from held-out residuals"), "{out}");
    assert!(out.contains("calibrated domain: 0% of the cycles"), "{out}");
}

/// A `while` loop is never in the calibrated domain (the calibration programs are loop-free): a scan of 1,000
/// trips of a matmul and tanh dwarfs the rest, so more than a fifth of the cycles are out of domain and
/// `--strict` exits 1; without `--strict` it exits 0.
#[test]
fn strict_fails_when_more_than_a_fifth_is_out_of_domain() {
    let text = r#"HloModule scan

body {
  p = (s32[], f32[128,512]{1,0}, f32[512,512]{1,0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  h = f32[128,512]{1,0} get-tuple-element(p), index=1
  w = f32[512,512]{1,0} get-tuple-element(p), index=2
  d = f32[128,512]{1,0} dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[128,512]{1,0} tanh(d)
  ROOT out = (s32[], f32[128,512]{1,0}, f32[512,512]{1,0}) tuple(next, t, w)
}

cond {
  p = (s32[], f32[128,512]{1,0}, f32[512,512]{1,0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(1000)
  ROOT c = pred[] compare(i, n), direction=LT
}

ENTRY main {
  s = s32[] constant(0)
  h0 = f32[128,512]{1,0} parameter(0)
  w0 = f32[512,512]{1,0} parameter(1)
  init = (s32[], f32[128,512]{1,0}, f32[512,512]{1,0}) tuple(s, h0, w0)
  loop = (s32[], f32[128,512]{1,0}, f32[512,512]{1,0}) while(init), condition=cond, body=body
  ROOT r = f32[128,512]{1,0} get-tuple-element(loop), index=1
}
"#;
    let dir = common::scratch_dir("cli-hlo-band");
    let f = dir.join("scan.hlo.txt");
    std::fs::write(&f, text).unwrap();
    let f = f.to_str().unwrap();
    let v = json(&["hlo", f, "--chip", "v5e", "--json"]);
    let loop_kernel = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "while")
        .unwrap();
    assert_eq!(loop_kernel["domain"]["calibrated"], false);
    let share = loop_kernel["cycles"].as_f64().unwrap() / v["total_cycles"].as_f64().unwrap();
    assert!(share > 0.2, "{share}");
    assert!(v["out_of_domain_fraction"].as_f64().unwrap() >= share);
    let (code, _, err) = tpusim(&["hlo", f, "--chip", "v5e"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = tpusim(&["hlo", f, "--chip", "v5e", "--strict"]);
    assert_eq!(code, 1);
    assert!(out.contains("--strict fails"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}
