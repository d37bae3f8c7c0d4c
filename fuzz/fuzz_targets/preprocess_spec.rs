//! SPEC.json of `tpusim preprocess`: parse and validate, then stack the tables.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sim_sparsecore::preprocess::{build_stacks, PreprocessSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(spec) = PreprocessSpec::from_json(text) {
        let _ = build_stacks(&spec);
    }
});
