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

/// What a stack's limits do at run time, from best to worst (the order is the severity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeVerdict {
    /// Every step fits the limits.
    #[default]
    Ok,
    /// Some step needs more than one SparseCore pass.
    Minibatching,
    /// Some step drops ids over the limits.
    DropsIds,
    /// Some step overflows a static buffer: the job would stop.
    WouldAbort,
    /// The limits do not compile.
    DoesNotCompile,
}

impl RuntimeVerdict {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeVerdict::Ok => "ok",
            RuntimeVerdict::Minibatching => "minibatching",
            RuntimeVerdict::DropsIds => "drops_ids",
            RuntimeVerdict::WouldAbort => "would_abort",
            RuntimeVerdict::DoesNotCompile => "does_not_compile",
        }
    }
}

impl std::fmt::Display for RuntimeVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Verdict for one stack's limits in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StackVerdict {
    /// Stack name.
    pub stack: String,
    /// Whether the limits compile (static SparseCore allocations fit).
    pub compiles: bool,
    /// What the limits do at run time (JSON: "ok", "minibatching", "drops_ids", "would_abort" or
    /// "does_not_compile").
    pub runtime: RuntimeVerdict,
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

/// Why a run does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitKind {
    /// HBM capacity.
    Hbm,
    /// VMEM of a TensorCore kernel.
    Vmem,
    /// A SparseCore tile's TileSpmem.
    Tilespmem,
    /// SparseCore limits that do not compile.
    CompileLimits,
    /// Limits a step overflows at run time (the job would abort).
    RuntimeLimits,
    /// Ids outside their table with the id bound check on.
    IdBoundCheck,
    /// A NaN found with `xla_sc_detect_nan` (functional mode).
    Nan,
}

impl FitKind {
    /// The constraint in words, as human output names it.
    pub fn label(self) -> &'static str {
        match self {
            FitKind::Hbm => "HBM",
            FitKind::Vmem => "VMEM",
            FitKind::Tilespmem => "TileSpmem",
            FitKind::CompileLimits => "compile-time limits",
            FitKind::RuntimeLimits => "run-time limits",
            FitKind::IdBoundCheck => "id bound check",
            FitKind::Nan => "NaN",
        }
    }
}

impl FitReason {
    /// `KIND: message`, the reason in one line of text.
    pub fn text(&self) -> String {
        format!("{}: {}", self.kind.label(), self.message)
    }
}

/// The reasons as one line, `;`-joined (`HBM: ...; run-time limits: ...`); empty when it fits.
pub fn fit_reasons_text(reasons: &[FitReason]) -> String {
    reasons.iter().map(FitReason::text).collect::<Vec<_>>().join("; ")
}

/// One reason a run does not fit, with its numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitReason {
    /// What does not fit.
    pub kind: FitKind,
    /// The reason in words, with the numbers.
    pub message: String,
    /// Bytes needed (memory reasons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed_bytes: Option<u64>,
    /// Bytes available (memory reasons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
}

/// Time one stage spends on the critical path of a steady-state step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CriticalStage {
    /// The stage (`sc_forward`, `all_to_all`, `tc_backward`, ...).
    pub stage: String,
    /// Microseconds per step.
    pub us_per_step: f64,
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
    /// Whether every memory space fits, every limit compiles and no step would abort.
    pub fits: bool,
    /// Why not, when `fits` is false (empty otherwise).
    #[serde(default)]
    pub fit_reasons: Vec<FitReason>,
    /// The ICI slice the collectives ran on, e.g. `4x4x4 (torus)`.
    #[serde(default)]
    pub slice: String,
    /// The critical path of a steady-state step by stage, largest first.
    #[serde(default)]
    pub critical_path: Vec<CriticalStage>,
    /// Per-stack limits verdicts.
    pub limits: Vec<StackVerdict>,
    /// SparseCore minibatches per step (max over stacks).
    pub minibatches_per_step: u64,
    /// Ids dropped per step (sum over stacks).
    pub dropped_ids_per_step: u64,
    /// With a user's HLO as the TensorCore program (`dense.hlo`): the step time with the program's kernels at the
    /// low end of their 80% band from held-out residuals (an outer bound: every cycle taken off the critical path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_time_low_us: Option<f64>,
    /// The same at the band's high end (every cycle added to the critical path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_time_high_us: Option<f64>,
    /// With `dense.hlo`: the share of the program's cycles in kernels outside the calibrated domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_out_of_domain_fraction: Option<f64>,
    /// Loss per step (functional mode only).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub loss: Vec<f64>,
}
