//! Workload files (TOML, or JSON when the text starts with '{'): parse, validate, check the run bounds.
#![no_main]
use libfuzzer_sys::fuzz_target;
use workloads::spec::RunBounds;
use workloads::Workload;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(w) = Workload::parse(text) {
        let _ = w.check_bounds(&RunBounds::default());
        let _ = w.max_ids_per_chip_step();
    }
});
