//! Shared by the limits tests: a chip's SparseCore compile parameters, read from its preset in
//! sim-tpu/chips (the same fields `tpusim_api::limits::compile_params` uses; sim-sparsecore does
//! not depend on sim-tpu, so the tests read the JSON).

use sim_sparsecore::limits::ScCompileParams;

/// The compile parameters of a preset, by name ("v5p") or topology ("v5p:2x2x1").
pub fn params(chip: &str) -> ScCompileParams {
    let name = chip.split(':').next().unwrap();
    let path = format!("{}/../sim-tpu/chips/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let preset: serde_json::Value = serde_json::from_str(&text).unwrap();
    let value = |field: &str| &preset[field]["value"];
    let num = |field: &str| value(field).as_u64().unwrap_or_else(|| panic!("{path}: {field}"));
    // A megacore device holds all the chip's SparseCores; otherwise each TensorCore is a device.
    let sc_per_device = if value("megacore").as_bool().unwrap() {
        num("sparsecores_per_chip")
    } else {
        num("sparsecores_per_chip") / num("tensorcores_per_chip")
    };
    ScCompileParams {
        num_sc_per_device: sc_per_device,
        tilespmem_bytes: num("sc_tilespmem_bytes_available"),
        scratchpad_bytes: num("sc_tilespmem_scratchpad_bytes"),
        spmem_fixed_overhead_bytes: num("sc_spmem_fixed_overhead_bytes"),
        simd_lanes_f32: num("sc_simd_lanes_f32"),
    }
}
