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
    /// Where the limits in force came from: the keys (a table, or a stack named by its tables) of a
    /// limits file, an FDO directory or the workload's `limits.stacks` that cover the stack's
    /// tables, or the workload-wide default.
    #[serde(default)]
    pub limits_from: Vec<LimitsFrom>,
}

/// Where a stack's limits come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitsOrigin {
    /// The workload-wide `limits.max_ids_per_partition` / `max_unique_ids_per_partition` (256 when unset).
    #[default]
    Default,
    /// The workload's `limits.stacks` (in its file or from `--set limits.stacks.KEY.FIELD=N`).
    Workload,
    /// A limits file (`limits.file`, as `tpusim limits estimate -o` writes).
    File,
    /// A directory of jax-tpu-embedding FDO stats (`limits.file` naming a directory).
    Fdo,
}

/// One source of a stack's limits: an origin and, unless it is the default, the key there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsFrom {
    /// Where.
    pub origin: LimitsOrigin,
    /// The key (a table name, or a stack name: its tables joined by `_`); none for the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A run-time limit by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitName {
    /// A stack's max_ids_per_partition.
    MaxIdsPerPartition,
    /// A stack's max_unique_ids_per_partition.
    MaxUniqueIdsPerPartition,
    /// The workload's max_ids_per_chip_per_sample (the static CSR buffer).
    MaxIdsPerChipPerSample,
    /// A table's max_ids_per_table.
    MaxIdsPerTable,
    /// A table's max_unique_ids_per_table.
    MaxUniqueIdsPerTable,
}

impl LimitName {
    /// The field's name in a workload's `limits`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitName::MaxIdsPerPartition => "max_ids_per_partition",
            LimitName::MaxUniqueIdsPerPartition => "max_unique_ids_per_partition",
            LimitName::MaxIdsPerChipPerSample => "max_ids_per_chip_per_sample",
            LimitName::MaxIdsPerTable => "max_ids_per_table",
            LimitName::MaxUniqueIdsPerTable => "max_unique_ids_per_table",
        }
    }
}

/// A limit a run needs raised so that no step of it aborts: the largest the run observed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitNeed {
    /// Which limit.
    pub limit: LimitName,
    /// The stack it belongs to (per-partition limits), or the key it is set under in `limits.stacks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// The table (per-table limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The value in force.
    pub current: u64,
    /// The value the whole run needs (the stack's `observed_max_ids` / `observed_max_unique_ids`,
    /// or the largest per-table or per-sample count over the run).
    pub needed: u64,
    /// The `--set KEY=VALUE` that applies it.
    pub set: String,
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

/// What "stale" means for pipelined embeddings, the one definition every output uses (figures, the
/// CLI, the lesson page, the report and the README): the schedule's gate, SparseCore forward of
/// step i+2 waits for SparseCore backward of step i.
pub const STALENESS: &str = "stale by two steps: gradients of step i reach the tables before step i+2's lookups";

impl RunSummary {
    /// The steps the figures are measured over, for people: "4 steady steps (4 warm-up steps
    /// before and 4 drain steps after them were simulated too and count in no figure)".
    pub fn window_text(&self) -> String {
        let plural = |n: u64, what: &str| format!("{n} {what} step{}", if n == 1 { "" } else { "s" });
        format!(
            "{} ({} before and {} after them were simulated too and count in no figure)",
            plural(self.steady_steps, "steady"),
            plural(self.warmup_steps, "warm-up"),
            plural(self.drain_steps, "drain")
        )
    }
}

/// Summary of a run (schema of `tpusim run --json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Steady-state step time (after warm-up), microseconds.
    pub step_time_us: f64,
    /// Steps the step time, busy fractions, overlap, traffic and critical path are measured over:
    /// the steps asked for, simulated after the warm-up steps.
    #[serde(default)]
    pub steady_steps: u64,
    /// Steps simulated before the measured ones (filling the pipeline).
    #[serde(default)]
    pub warmup_steps: u64,
    /// Steps simulated after the last one asked for, so the units stay at steady-state work until
    /// the measured window closes; they count in no figure.
    #[serde(default)]
    pub drain_steps: u64,
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
    /// Every limit some step would abort on, with what the whole run needs: applied together (the
    /// `set` of each), no step aborts. Empty (and left out) when nothing aborts.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub limits_needed: Vec<LimitNeed>,
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
