//! XLA HLO text (`tpusim hlo`): parse, then cost the module on one chip.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sim_tpu::hlo::{cost_module, HloModule};
use sim_tpu::tensorcore::ChipModel;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(m) = HloModule::parse(text) {
        thread_local!(static CHIP: ChipModel = ChipModel::preset("v5e").unwrap());
        CHIP.with(|c| {
            let _ = cost_module(&m, c);
        });
    }
});
