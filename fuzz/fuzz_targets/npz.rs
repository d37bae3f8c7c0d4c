//! NPZ id files (zip members stored or deflated, any header), read as `preprocess --ids` does.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sim_sparsecore::preprocess::input::read_npz_from(std::io::Cursor::new(data));
});
