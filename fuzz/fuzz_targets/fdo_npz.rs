//! jax-tpu-embedding FDO stats NPZ files, then the limits derived from them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sim_sparsecore::limits::files::{limits_from_fdo, read_fdo_npz_from};

fuzz_target!(|data: &[u8]| {
    if let Ok(stats) = read_fdo_npz_from(std::io::Cursor::new(data)) {
        let _ = limits_from_fdo(&stats, 4);
    }
});
