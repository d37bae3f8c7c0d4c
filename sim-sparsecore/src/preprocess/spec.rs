//! The preprocessing spec (the contract's SPEC.json) and its validation.

use serde::{Deserialize, Serialize};

use super::error::PreprocessError;

/// How a sample's ids are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Combiner {
    /// Sum of rows times weights.
    Sum,
    /// Weighted mean.
    Mean,
    /// Sum divided by the square root of the sum of squared weights.
    Sqrtn,
}

/// One embedding table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// Table name.
    pub name: String,
    /// Rows.
    pub vocabulary_size: u64,
    /// Columns.
    pub embedding_dim: u64,
    /// Combiner.
    pub combiner: Combiner,
    /// Limit of ids per partition (default 256).
    #[serde(default = "default_limit")]
    pub max_ids_per_partition: u32,
    /// Limit of unique ids per partition (default 256).
    #[serde(default = "default_limit")]
    pub max_unique_ids_per_partition: u32,
    /// Suggested COO buffer size per device.
    #[serde(default)]
    pub suggested_coo_buffer_size_per_device: Option<u64>,
}

fn default_limit() -> u32 {
    256
}

/// One feature: which table it looks up and the shape of the ids array this host passes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureSpec {
    /// Feature name (the npz key).
    pub name: String,
    /// Table name.
    pub table: String,
    /// [rows, valency] of this host's ids (valency an upper bound for ragged input).
    pub input_shape: Vec<u64>,
}

/// Limits of a stack of two or more tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackLimits {
    /// max_ids_per_partition (default 256).
    #[serde(default)]
    pub max_ids_per_partition: Option<u32>,
    /// max_unique_ids_per_partition (default 256).
    #[serde(default)]
    pub max_unique_ids_per_partition: Option<u32>,
    /// Suggested COO buffer size per device.
    #[serde(default)]
    pub suggested_coo_buffer_size_per_device: Option<u64>,
}

/// SPEC.json of `tpusim preprocess`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreprocessSpec {
    /// SparseCores per device: 1, 2 or 4.
    pub num_sc_per_device: u32,
    /// Devices attached to this host.
    #[serde(default = "one")]
    pub local_device_count: u32,
    /// Devices in all.
    #[serde(default = "one")]
    pub global_device_count: u32,
    /// Drop ids over the limits instead of failing.
    #[serde(default)]
    pub allow_id_dropping: bool,
    /// Split batches into minibatches when limits are exceeded.
    #[serde(default)]
    pub enable_minibatching: bool,
    /// Tables.
    pub tables: Vec<TableSpec>,
    /// Features.
    pub features: Vec<FeatureSpec>,
    /// Tables stacked together, in order.
    #[serde(default)]
    pub stacks: Vec<Vec<String>>,
    /// Limits of multi-table stacks, by stack name.
    #[serde(default)]
    pub stack_limits: std::collections::BTreeMap<String, StackLimits>,
}

fn one() -> u32 {
    1
}

impl PreprocessSpec {
    /// Parses SPEC.json text, naming the offending field on error.
    pub fn from_json(text: &str) -> Result<Self, PreprocessError> {
        let spec: PreprocessSpec = sim_core::de::json(text).map_err(PreprocessError::Spec)?;
        spec.validate()?;
        Ok(spec)
    }

    /// Total SparseCores over all devices.
    pub fn num_scs(&self) -> u32 {
        self.num_sc_per_device * self.global_device_count
    }
}
