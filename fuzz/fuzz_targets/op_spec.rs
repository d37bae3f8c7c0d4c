//! Op specs (the calibration records' schema), costed on one chip when they parse.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sim_tpu::tensorcore::{cost, ChipModel, OpSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(spec) = OpSpec::from_json(text) {
        thread_local!(static CHIP: ChipModel = ChipModel::preset("v5e").unwrap());
        CHIP.with(|c| {
            let _ = cost(&spec, c);
        });
    }
});
