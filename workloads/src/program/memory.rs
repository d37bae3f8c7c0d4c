//! Stage 5b: memory per chip: HBM (SparseCore tables and stacks by the one sizing function shared with
//! `limits validate`, dense weights and optimizer state, prefetched inputs, activations), VMEM and
//! TileSpmem, against the chip's capacities.

use std::collections::BTreeMap;

use sim_sparsecore::limits::hbm::{sparsecore_hbm, SparseCoreHbm, StackHbmInput};

use super::dense::DenseProgram;
use super::graph::HOST_BYTES_PER_ID;
use super::limits::LimitsOutcome;
use super::resolve::Plan;
use super::work::RunWork;

/// Memory of one chip.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// Peak bytes per space ("hbm", "vmem", "tilespmem").
    pub peak: BTreeMap<String, u64>,
    /// Capacity per space.
    pub capacity: BTreeMap<String, u64>,
    /// HBM by kind: what, bytes.
    pub breakdown: Vec<(String, u64)>,
    /// The SparseCore part of HBM.
    pub sparsecore: SparseCoreHbm,
    /// Heap held by prefetched inputs.
    pub prefetched_bytes: u64,
}

/// The SparseCore stacks of a plan as HBM sizing sees them.
pub fn hbm_inputs(p: &Plan) -> Vec<StackHbmInput> {
    p.stacks
        .iter()
        .map(|st| StackHbmInput::from_stack(&p.pspec, &st.def, st.elem_bytes, st.optimizer.slots()))
        .collect()
}

/// Sizes the chip's memory.
pub fn size(p: &Plan, work: &RunWork, dense: &DenseProgram, limits: &LimitsOutcome) -> Memory {
    let w = &p.w;
    let spec = p.spec();
    let serial = w.xla_sc_num_serialized_tables_to_optimize_hbm as usize;
    let sc = sparsecore_hbm(&hbm_inputs(p), w.chips as u64, spec.sc_dma_granule_bytes, serial);
    let b = w.batch_per_chip();
    // Dense weights (with TensorCore tables) in f32, their gradients and optimizer slots, per replica.
    let dense_state = dense.parameters * 4 * (2 + w.dense.optimizer.slots()) * p.replicas_per_chip;
    // Prefetched inputs of every batch in flight: COO entries, dense features, labels.
    let input_bytes =
        work.steps.iter().map(|s| s.ids).max().unwrap_or(0) * HOST_BYTES_PER_ID + b * (w.dense.dense_features + 1) * 4;
    let prefetched = input_bytes * w.host.prefetch.max(1) as u64;
    let activations = dense.activation_bytes;
    let hbm = sc.total_bytes() + dense_state + prefetched + activations;
    let breakdown = vec![
        ("embedding tables and optimizer slots".to_string(), sc.tables_bytes),
        (
            format!(
                "SparseCore HBM stack ({})",
                if serial == 0 {
                    "all stacks live".to_string()
                } else {
                    format!("{serial} stack(s) at a time")
                }
            ),
            sc.stack_peak_bytes,
        ),
        (
            "heap: dense weights, gradients and optimizer state".to_string(),
            dense_state,
        ),
        (
            format!("heap: prefetched inputs ({} batches)", w.host.prefetch.max(1)),
            prefetched,
        ),
        ("activations".to_string(), activations),
    ];
    let mut peak = BTreeMap::new();
    let mut capacity = BTreeMap::new();
    peak.insert("hbm".to_string(), hbm);
    capacity.insert("hbm".to_string(), spec.hbm_bytes);
    peak.insert(
        "vmem".to_string(),
        dense.kernels().map(|k| k.vmem_bytes).max().unwrap_or(0),
    );
    capacity.insert("vmem".to_string(), spec.vmem_bytes_per_tc);
    if p.has_sparsecore_tables() {
        peak.insert("tilespmem".to_string(), limits.tilespmem_peak);
        capacity.insert(
            "tilespmem".to_string(),
            spec.sc_tilespmem_bytes_available - sim_sparsecore::limits::compile::TILESPMEM_ROW_RESERVE_BYTES,
        );
    }
    Memory {
        peak,
        capacity,
        breakdown,
        sparsecore: sc,
        prefetched_bytes: prefetched,
    }
}
