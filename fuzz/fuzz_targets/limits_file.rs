//! tpusim limits files, as JSON and as TOML.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sim_sparsecore::limits::LimitsFile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = LimitsFile::parse(text, false);
    let _ = LimitsFile::parse(text, true);
});
