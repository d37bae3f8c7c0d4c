//! `tpusim hlo --slice`: the JSON of collectives and the step, what-ifs on the links, `--mesh`, and bad
//! replica groups, shardings, slices and meshes exiting 2 with the instruction, value and what is valid.

mod common;

use common::{tpusim, tpusim_json as json};

const OVERLAP: &str = "testdata/shard/allreduce_overlap.hlo.txt";

/// `tpusim hlo OVERLAP --chip v5p --slice 2x2x1 --json` with `extra` arguments, parsed.
fn overlap_json(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["hlo", OVERLAP, "--chip", "v5p", "--slice", "2x2x1", "--json"];
    args.extend_from_slice(extra);
    json(&args)
}

#[test]
fn slice_json_has_collectives_and_the_step() {
    let v = overlap_json(&[]);
    let c = &v["collectives"][0];
    for k in [
        "kind",
        "bytes",
        "group_size",
        "hops",
        "algorithm",
        "cycles",
        "share_of_step",
    ] {
        assert!(c.get(k).is_some(), "missing {k}: {c}");
    }
    assert_eq!(c["kind"], "all-reduce");
    assert_eq!(c["bytes"], 4 << 20);
    assert_eq!(c["algorithm"], "two_d");
    for k in [
        "compute_cycles",
        "exposed_communication_cycles",
        "step_cycles",
        "collective_cycles_by_kind",
    ] {
        assert!(v["step"].get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["slice"]["chips"], 4);
    // Halving the link bandwidth doubles the bandwidth term (to within a cycle of rounding).
    let slow = overlap_json(&["--set", "chip.ici_bytes_per_s_per_link=45e9"]);
    let (a, b) = (
        c["bandwidth_cycles"].as_i64().unwrap(),
        slow["collectives"][0]["bandwidth_cycles"].as_i64().unwrap(),
    );
    assert!((b - 2 * a).abs() <= 1, "{a} {b}");
    // A 5 us hop: 4 hops + the 3.55 us launch = 23.55 us of latency.
    let hop = overlap_json(&["--set", "chip.ici_hop_latency_ns=5000"]);
    assert_eq!(
        hop["collectives"][0]["latency_cycles"],
        (23.55e-6f64 * 1503e6).round() as i64
    );
}

#[test]
fn without_slice_the_report_is_unchanged() {
    let v = json(&["hlo", OVERLAP, "--chip", "v5p", "--json"]);
    assert!(v.get("collectives").is_none() && v.get("step").is_none());
    assert_eq!(v["unmodelled"]["all-reduce"], 1);
}

#[test]
fn mesh_names_the_axes() {
    let v = overlap_json(&["--mesh", "data=1,model=4"]);
    assert_eq!(v["collectives"][0]["mesh_axes"], serde_json::json!(["model"]));
    let (code, _, err) = tpusim(&["hlo", OVERLAP, "--chip", "v5p", "--slice", "2x2x1", "--mesh", "data=8"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--mesh data=8 names 8 devices") && err.contains("has 4"),
        "{err}"
    );
    let (code, _, err) = tpusim(&["hlo", OVERLAP, "--chip", "v5p", "--slice", "2x2x2x2"]);
    assert_eq!(code, 2);
    assert!(err.contains("--slice") && err.contains("3D torus"), "{err}");
}

fn bad(attr: &str, line_ins: &str) -> (i32, String) {
    let dir = common::scratch_dir("hlo-slice-bad");
    let p = dir.join(format!("bad{}.hlo", attr.len()));
    let text = format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         ENTRY main {{\n  x = f32[8,128]{{1,0}} parameter(0)\n  ROOT r = f32[8,128]{{1,0}} {line_ins}(x), {attr}\n}}\n"
    );
    std::fs::write(&p, text).unwrap();
    let (code, _, err) = tpusim(&["hlo", p.to_str().unwrap(), "--chip", "v5p", "--slice", "2x2x1"]);
    (code, err)
}

#[test]
fn malformed_groups_and_shardings_exit_2_naming_the_instruction() {
    for (attr, op, want) in [
        (
            "replica_groups={{0,1},{1,2}}, to_apply=add",
            "all-reduce",
            "device 1 is in more than one place",
        ),
        (
            "replica_groups=[2,3]<=[4], to_apply=add",
            "all-reduce",
            "[2,3] holds 6 ids but the dims hold 4",
        ),
        (
            "replica_groups=[2,2]<=[2,2]T(0,0), to_apply=add",
            "all-reduce",
            "is not a permutation",
        ),
        (
            "source_target_pairs={{0,1},{2,1}}",
            "collective-permute",
            "target 1 named twice",
        ),
        (
            "replica_groups={{0,1}}, sharding={devices=[2,2]<=[3]}, to_apply=add",
            "all-reduce",
            "sharding=",
        ),
    ] {
        let (code, err) = bad(attr, op);
        assert_eq!(code, 2, "{attr}: {err}");
        assert!(
            err.contains("line 11") && err.contains("instruction `r`") && err.contains(want),
            "{attr}: {err}"
        );
        assert!(err.contains("valid"), "{attr}: {err}");
    }
    // A device the slice does not have (2x2x1 has 4).
    let (code, err) = bad("replica_groups={{0,7}}, to_apply=add", "all-reduce");
    assert_eq!(code, 2);
    assert!(
        err.contains("instruction `r`") && err.contains("device 7 is not on the slice"),
        "{err}"
    );
}

/// The README's table of sharded programs is what `tpusim hlo --slice --json` prints now
/// (`tools/shard-probe/readme_table.py` regenerates it).
#[test]
fn readme_slice_table_is_current() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let start = readme.find("| program | slice |").expect("README has the table");
    let mut rows = 0;
    for line in readme[start..].lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let (model, par) = cells[0].split_once(' ').unwrap();
        let file = format!("{root}/testdata/shard/models/{model}.{par}.{}.hlo.txt", cells[1]);
        let v = json(&["hlo", &file, "--chip", "v5p", "--slice", cells[1], "--json"]);
        let s = &v["step"];
        let per = s["step_us"].as_f64().unwrap() / s["step_cycles"].as_f64().unwrap().max(1.0);
        let us = |k: &str| format!("{:.1}", s[k].as_f64().unwrap() * per);
        assert_eq!(cells[2], format!("{:.1}", s["step_us"].as_f64().unwrap()), "{line}");
        assert_eq!(cells[3], us("compute_cycles"), "{line}");
        let mut kinds: Vec<(String, f64)> = s["collective_cycles_by_kind"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, c)| (k.clone(), c.as_f64().unwrap()))
            .collect();
        kinds.sort_by(|a, b| a.0.cmp(&b.0));
        let by_kind: Vec<String> = kinds.iter().map(|(k, c)| format!("{k} {:.1}", c * per)).collect();
        assert_eq!(
            cells[4],
            format!("{} ({})", us("collective_cycles"), by_kind.join("; ")),
            "{line}"
        );
        assert_eq!(cells[5], us("exposed_communication_cycles"), "{line}");
        rows += 1;
    }
    // The MLP and the block, data- and tensor-parallel, each on at least three slice shapes.
    assert!(rows >= 15, "{rows} rows");
    for program in ["mlp dp", "mlp tp", "block dp", "block tp"] {
        let shapes = readme[start..]
            .lines()
            .take_while(|l| l.starts_with('|'))
            .filter(|l| l.starts_with(&format!("| {program} |")))
            .count();
        assert!(shapes >= 3, "{program}: {shapes} slice shapes");
    }
}
