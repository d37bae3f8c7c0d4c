//! `tpusim layout` as a user runs it (also the README's examples).

mod common;

use common::tpusim;
use std::process::Command;

#[test]
fn readme_quick_start_layout() {
    let (code, out, _) = tpusim(&["layout", "bf16[8,1,1280,16384]", "--tpu", "v5p"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("bf16[8,1,1280,16384]{3,2,1,0:T(8,128)(2,1)}\n"),
        "{out}"
    );
    assert!(out.contains("335544320"), "{out}");
}

#[test]
fn json_lines_in_order_with_errors_exit_2() {
    let (code, out, _) = tpusim(&[
        "layout",
        "--json",
        "--index",
        "2,3",
        "f32[3,5]{1,0:T(2,2)}",
        "f32[3",
        "f32[8,4]{1,0:T(2,2)}",
    ]);
    assert_eq!(code, 2);
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["shape"], "f32[3,5]{1,0:T(2,2)}");
    assert_eq!(lines[0]["padded_bytes"], 96);
    assert_eq!(lines[0]["data_bytes"], 84);
    assert_eq!(lines[0]["unpadded_bytes"], 60);
    assert_eq!(lines[0]["linear_index"], 17);
    assert_eq!(lines[0]["physical_dims"], serde_json::json!([2, 3, 2, 2]));
    assert!(lines[1]["error"].as_str().unwrap().contains("at byte 5"));
    assert_eq!(lines[2]["linear_index"], 13);
    let keys: Vec<&String> = lines[0].as_object().unwrap().keys().collect();
    assert_eq!(keys[..3], ["input", "shape", "padded_bytes"]);
}

#[test]
fn malformed_shapes_exit_2_with_the_place() {
    for (bad, needle) in [
        ("f32[3,5", "at byte 7"),
        ("f33[3]", "unknown type 'f33'"),
        ("f32[3,5]{0}", "Dimensions size is 2, but minor to major size is 1."),
        ("f32[3]{0:T(0)}", "tile dimension size must be positive"),
        ("f32[99999999999,99999999999]", "does not fit"),
        ("(f32[3], s8[2]", "expected"),
    ] {
        let (code, _, err) = tpusim(&["layout", bad]);
        assert_eq!(code, 2, "{bad}");
        assert!(err.contains(needle), "{bad}: {err}");
    }
}

#[test]
fn offset_and_svg() {
    let dir = std::env::temp_dir().join(format!("tpusim-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("l.svg");
    let (code, out, _) = tpusim(&[
        "layout",
        "f32[3,5]{1,0:T(2,2)}",
        "--offset",
        "17",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("logical index    [2, 3]"), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains(">17</text>") && text.contains("stroke-dasharray"));
}

#[test]
fn stdin_lines() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tpusim"))
        .args(["layout", "--stdin", "--json", "--tpu", "v6e"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"f32[1000,1]\npred[3,5,7]\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\"f32[1000,1]{0,1:T(1,128)}\""), "{text}");
    assert!(text.contains("\"pred[3,5,7]{2,0,1:T(4,128)(4,1)}\""), "{text}");
}
