//! `tpusim preprocess` as a user runs it (the README's examples).

mod common;

use common::tpusim;

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/spec.json");
const IDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/ids.npz");
const HOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/preprocess/example/ids_hot.npz");

#[test]
fn table_and_json() {
    let (code, out, _) = tpusim(&["preprocess", "--spec", SPEC, "--ids", IDS]);
    assert_eq!(code, 0);
    assert!(out.contains("user_item") && out.contains("country"), "{out}");
    let (code, out, _) = tpusim(&["preprocess", "--spec", SPEC, "--ids", IDS, "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let s = &v["stacks"]["country"];
    assert_eq!(s["max_ids_per_partition"], serde_json::json!([11, 7, 8, 8]));
    assert_eq!(s["row_pointers"].as_array().unwrap().len(), 32);
    // Padding gains are null (JSON has no NaN).
    assert!(s["gains"].as_array().unwrap().iter().any(|g| g.is_null()));
    let (_, out, _) = tpusim(&["preprocess", "--spec", SPEC, "--ids", IDS, "--json", "--stats"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["stacks"]["user_item"].get("row_pointers").is_none());
    assert_eq!(
        v["stacks"]["user_item"]["required_buffer_sizes"],
        serde_json::json!([144, 144, 136, 136])
    );
}

#[test]
fn limit_exceeded_exits_1_naming_stack_partition_count_limit() {
    let (code, _, err) = tpusim(&["preprocess", "--spec", SPEC, "--ids", HOT]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Observed max ids per partition: 16 for table: country"),
        "{err}"
    );
    assert!(
        err.contains("set max ids per partition: 12") && err.contains("partition 0"),
        "{err}"
    );
}

#[test]
fn bad_input_exits_2_naming_the_field_or_array() {
    let dir = std::env::temp_dir().join(format!("tpusim-pp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = std::fs::read_to_string(SPEC).unwrap();
    for (name, text, needle) in [
        (
            "nsc.json",
            spec.replace("\"num_sc_per_device\": 4", "\"num_sc_per_device\": 3"),
            "num_sc_per_device",
        ),
        (
            "table.json",
            spec.replace("\"table\": \"user\"", "\"table\": \"usr\""),
            "unknown table 'usr'",
        ),
        ("rows.json", spec.replace("[64, 1]", "[62, 1]"), "not divisible"),
        (
            "devs.json",
            spec.replace("\"global_device_count\": 1", "\"global_device_count\": 3"),
            "power of 2",
        ),
        (
            "mixed.json",
            spec.replace("\"combiner\": \"sum\"}", "\"combiner\": \"mean\"}"),
            "one combiner",
        ),
        (
            "shape.json",
            spec.replace("[64, 8]", "[128, 8]"),
            "array 'history' has shape [64, 8]",
        ),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let (code, _, err) = tpusim(&["preprocess", "--spec", p.to_str().unwrap(), "--ids", IDS]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(needle), "{name}: {err}");
    }
    let bad = dir.join("bad.npz");
    std::fs::write(&bad, b"not a zip").unwrap();
    let (code, _, err) = tpusim(&["preprocess", "--spec", SPEC, "--ids", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not a valid npz"), "{err}");
}
