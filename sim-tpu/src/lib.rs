//! sim-tpu: what is specific to TPU chips.
//!
//! - [`chips`]: chip presets (data files with a source for every value).
//! - [`params`]: the step model's launch costs, latencies and calibrated rates, with sources.
//! - [`topology`]: ICI slice shapes (2D/3D tori) and collective times on them.
//! - [`tiling`]: the layout the XLA TPU compiler gives an array.
//! - [`tensorcore`]: the TensorCore cost model (VMEM windows, MXU, VPU, DMA), calibrated against the compiler.
//! - [`select`]: kernel selection (formats and precisions) with conversion costs.
//! - [`hlo`]: whole XLA HLO modules: reader, TPU layouts and bytes, kernels the compiler would emit, cost.
//! - [`band`]: the error band and calibrated-domain verdict on every `tpusim hlo` and `tpusim op` answer.
//! - [`ledger`]: what each fitted constant set was fitted on, its held-out figures and the bounds it hit.
//! - [`systolic`]: SCALE-Sim-compatible systolic-array cycle counts.

pub mod band;
pub mod chips;
pub mod hlo;
pub mod ledger;
pub mod params;
pub mod select;
pub mod source;
pub mod systolic;
pub mod tensorcore;
pub mod tiling;
pub mod topology;
pub mod topology_links;
