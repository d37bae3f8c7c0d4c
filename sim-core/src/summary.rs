//! The summary of a simulated run: the stable JSON schema of `tpusim run --json` and of a
//! report's `summary.json`. Produced by workloads, read by reports; field names are a contract.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Busy fraction of each kind of unit over the steady-state steps, 0..=1.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BusyFraction {
    /// TensorCores.
    pub tc: f64,
    /// SparseCores.
    pub sc: f64,
    /// HBM bandwidth.
    pub hbm: f64,
    /// ICI links.
    pub ici: f64,
    /// Host preprocessing and host-to-device transfer.
    pub host: f64,
}

/// Verdict for one stack's limits in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StackVerdict {
    /// Stack name.
    pub stack: String,
    /// Whether the limits compile (static SparseCore allocations fit).
    pub compiles: bool,
    /// "ok", "minibatching", "drops_ids", "would_abort" or "does_not_compile".
    pub runtime: String,
    /// Human-readable reason with the numbers.
    pub message: String,
    /// max_ids_per_partition in force.
    pub max_ids_per_partition: u64,
    /// max_unique_ids_per_partition in force.
    pub max_unique_ids_per_partition: u64,
    /// Largest observed ids in a partition over the run.
    pub observed_max_ids: u64,
    /// Largest observed unique ids in a partition over the run.
    pub observed_max_unique_ids: u64,
}

/// Summary of a run (schema of `tpusim run --json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Steady-state step time (after warm-up), microseconds.
    pub step_time_us: f64,
    /// Training samples per second over all chips.
    pub samples_per_s: f64,
    /// Busy fraction per unit kind.
    pub busy_fraction: BusyFraction,
    /// Share of the step when TensorCore and SparseCore are both busy.
    pub overlap_fraction: f64,
    /// HBM bytes moved per step per chip, padding included.
    pub hbm_bytes_per_step: u64,
    /// Of which padding bytes.
    pub hbm_padding_bytes_per_step: u64,
    /// Peak bytes in use per memory space ("hbm", "vmem", "spmem", "tilespmem", "host").
    pub peak_memory_bytes: BTreeMap<String, u64>,
    /// Capacity per memory space.
    pub capacity_bytes: BTreeMap<String, u64>,
    /// Whether every memory space fits and every limit compiles.
    pub fits: bool,
    /// Per-stack limits verdicts.
    pub limits: Vec<StackVerdict>,
    /// SparseCore minibatches per step (max over stacks).
    pub minibatches_per_step: u64,
    /// Ids dropped per step (sum over stacks).
    pub dropped_ids_per_step: u64,
    /// Loss per step (functional mode only).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub loss: Vec<f64>,
}
