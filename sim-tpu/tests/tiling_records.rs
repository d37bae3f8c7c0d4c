//! Every layout the XLA TPU compiler chose in the calibration sample is reproduced: layout string and padded bytes.

use std::io::Read;

use sim_core::layout::PrimitiveType;
use sim_tpu::tiling::tpu_layout;

#[test]
fn every_compiler_layout_record_is_reproduced() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/layout/layouts.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let ty = PrimitiveType::from_name(r["element_type"].as_str().unwrap()).unwrap();
        let dims: Vec<i64> = r["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_i64().unwrap())
            .collect();
        let chip = r["chip"].as_str().unwrap();
        let shape = tpu_layout(ty, &dims, chip).unwrap();
        let want = r["hlo_shape"].as_str().unwrap();
        let got = shape.to_string();
        let bytes = shape.padded_bytes().unwrap();
        if got != want || bytes != r["padded_bytes"].as_u64().unwrap() {
            mismatches.push(format!(
                "{chip} {want} (padded {}) -> {got} (padded {bytes})",
                r["padded_bytes"]
            ));
        }
        checked += 1;
    }
    assert_eq!(checked, 7435);
    assert!(
        mismatches.is_empty(),
        "{} of {checked} differ:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(40)].join("\n")
    );
}
