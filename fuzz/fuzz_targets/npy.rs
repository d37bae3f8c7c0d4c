//! One NPY array (header dict, dtype, byte order, fortran_order, shape, data).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sim_sparsecore::preprocess::npy::read_npy(data);
});
