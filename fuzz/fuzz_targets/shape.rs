//! XLA shape text: parse, validate, print, and every size and index map of what parses.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sim_core::layout::{parse_shape, Shape};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(shape) = parse_shape(text) {
        let printed = shape.to_string();
        let _ = parse_shape(&printed);
        let _ = shape.padded_bytes();
        if let Shape::Array(a) = &shape {
            if let Ok(g) = a.geometry() {
                let _ = (
                    g.padded_bytes(),
                    g.data_bytes(),
                    g.unpadded_bytes(),
                    g.padding_overhead(),
                );
                let _ = g.logical_index(g.padded_elements / 2);
                let idx: Vec<i64> = g.dims.iter().map(|&d| (d / 2) as i64).collect();
                let _ = g.linear_index(&idx);
            }
        }
    }
});
