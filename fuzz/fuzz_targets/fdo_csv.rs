//! FDO stats CSV files, then the limits derived from them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sim_sparsecore::limits::files::{limits_from_fdo, parse_fdo_csv};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(stats) = parse_fdo_csv(text) {
        let _ = limits_from_fdo(&stats, 4);
    }
});
