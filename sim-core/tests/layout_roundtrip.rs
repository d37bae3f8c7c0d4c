//! Every shape string found in the compiler's HLO output parses and prints back unchanged.

use std::io::Read;

use sim_core::layout::parse_shape;

#[test]
fn every_hlo_shape_round_trips() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/layout/hlo_shapes.txt.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut n = 0;
    for line in text.lines() {
        let shape = parse_shape(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(shape.to_string(), line);
        n += 1;
    }
    assert!(n > 1900, "only {n} shapes");
}
