//! Errors of preprocessing, in a leaf module: the spec, the batch reader and the cross-checks all
//! return them.

use serde::Serialize;

/// Errors of preprocessing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PreprocessError {
    /// The spec breaks a rule of the contract.
    #[error("spec: {0}")]
    Spec(String),
    /// An ids array is missing or malformed.
    #[error("ids: {0}")]
    Input(String),
    /// A limit is exceeded and id dropping is off (jax-tpu-embedding aborts here).
    #[error("{0}")]
    LimitExceeded(LimitExceeded),
}

/// Which limit an observation exceeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// max_ids_per_partition.
    MaxIds,
    /// max_unique_ids_per_partition.
    MaxUniqueIds,
}

/// A limit exceeded: the facts jax-tpu-embedding reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LimitExceeded {
    /// Stack name.
    pub stack: String,
    /// Which limit.
    pub kind: LimitKind,
    /// Global SparseCore partition where it was observed.
    pub partition: u32,
    /// Local device.
    pub device: u32,
    /// Source SparseCore on the device.
    pub sparsecore: u32,
    /// Observed count.
    pub observed: u32,
    /// The limit.
    pub limit: u32,
}

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, knob) = match self.kind {
            LimitKind::MaxIds => ("max ids per partition", "max_ids_per_partition"),
            LimitKind::MaxUniqueIds => ("max unique ids per partition", "max_unique_ids_per_partition"),
        };
        write!(
            f,
            "Observed {what}: {} for table: {} is greater than the set {what}: {} (partition {}, from SparseCore {} of device {}). Use `allow_id_dropping` or increase the `{knob}` to at least {}. You could also try to reduce the batch size.",
            self.observed, self.stack, self.limit, self.partition, self.sparsecore, self.device, self.observed
        )
    }
}

/// An error of its own, so callers can carry it as a typed source.
impl std::error::Error for LimitExceeded {}
