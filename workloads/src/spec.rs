//! Workload specs (TOML or JSON) and the built-in presets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sim_sparsecore::model::Optimizer;
use sim_sparsecore::preprocess::Combiner;

/// Errors of workload specs and runs.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The spec is malformed or inconsistent.
    #[error("workload: {0}")]
    Spec(String),
    /// A preset name is unknown.
    #[error("unknown preset '{0}': expected one of dlrm-small, dlrm-criteo, dlrm-criteo-128, dlrm-criteo-pipelined, dlrm-dcnv2, balanced, tc-heavy, skewed")]
    UnknownPreset(String),
    /// Something the simulation called failed.
    #[error("{0}")]
    Run(String),
}

/// How TensorCore and SparseCore work of consecutive steps may overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pipelining {
    /// SC forward of step i+1 waits for SC backward of step i.
    Sequential,
    /// SC forward of step i+2 waits only for SC backward of step i (embeddings stale by two steps:
    /// `sim_core::summary::STALENESS`).
    Pipelined,
}

/// Table element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// 4 bytes.
    F32,
    /// 2 bytes (twice the SIMD width where the chip has it).
    Bf16,
}

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 => 2,
        }
    }
}

/// Where a table lives and is looked up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Sharded over the SparseCores of every chip (mod sharding), looked up by them.
    #[default]
    Sparsecore,
    /// Replicated on every TensorCore replica: gathered forward, scatter-added backward, its dense
    /// gradient all-reduced with the dense weights (what MLPerf submissions do for small tables).
    Tensorcore,
}

/// An embedding table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableDef {
    /// Name.
    pub name: String,
    /// Rows.
    pub vocab: u64,
    /// Embedding dim.
    pub dim: u64,
    /// Combiner.
    #[serde(default = "sum")]
    pub combiner: Combiner,
    /// Optimizer.
    #[serde(default = "sgd")]
    pub optimizer: Optimizer,
    /// Element type.
    #[serde(default = "f32")]
    pub dtype: Dtype,
    /// SparseCores (default) or TensorCore.
    #[serde(default)]
    pub placement: Placement,
}

fn sum() -> Combiner {
    Combiner::Sum
}
fn sgd() -> Optimizer {
    Optimizer::Sgd
}
fn f32() -> Dtype {
    Dtype::F32
}

/// Ids per sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Valency {
    /// Always n.
    Fixed(u64),
    /// Uniform in [lo, hi].
    Uniform([u64; 2]),
    /// Poisson with this mean (at least 1).
    Poisson(f64),
}

/// Distribution of ids over the vocabulary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdDist {
    /// Uniform over the vocabulary.
    Uniform,
    /// Zipf with this exponent (rank 1 most frequent), ranks scattered over the vocabulary.
    Zipf(f64),
    /// A `fraction` of ids drawn from a hot set of `size` ids, the rest uniform.
    HotSet {
        /// Share of ids from the hot set.
        fraction: f64,
        /// Hot set size.
        size: u64,
        /// 0 (default): hot ids scattered over the vocabulary. n: hot ids are multiples of n (ids
        /// bucketed or pre-hashed with a stride), so with n a multiple of the SparseCore count they all
        /// land on one mod-sharded partition: the guide's data-skew case.
        #[serde(default)]
        stride: u64,
    },
    /// Real ids from NPZ files in the preprocess contract (the feature's array), one file per step,
    /// cycled; the rows must equal the batch per chip.
    Npz(Vec<std::path::PathBuf>),
}

/// A sparse feature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureDef {
    /// Name.
    pub name: String,
    /// Table it looks up.
    pub table: String,
    /// Ids per sample (default: `{ fixed = 1 }`).
    #[serde(default = "one_id")]
    pub valency: Valency,
    /// Id distribution (default: `"uniform"`).
    #[serde(default = "uniform_ids")]
    pub ids: IdDist,
}

fn one_id() -> Valency {
    Valency::Fixed(1)
}
fn uniform_ids() -> IdDist {
    IdDist::Uniform
}

/// Feature interaction of the dense model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interaction {
    /// Pairwise dot products of the f = features + 1 vectors, the upper triangle without self terms:
    /// f(f-1)/2 outputs (the DLRM reference).
    Dot,
    /// The upper triangle with the self terms (f(f+1)/2 outputs).
    #[serde(rename = "dot_self")]
    DotSelf,
    /// The whole f x f product matrix, no gather of a triangle (MLPerf v1.0's TPU "skip-gather").
    #[serde(rename = "dot_full")]
    DotFull,
    /// DCNv2 cross layers (count).
    Dcnv2(u32),
}

/// The dense part of the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenseModel {
    /// Dense input features.
    pub dense_features: u64,
    /// Bottom MLP widths.
    pub bottom: Vec<u64>,
    /// Interaction (default: `"dot"`, the DLRM reference).
    #[serde(default = "dot")]
    pub interaction: Interaction,
    /// Top MLP widths.
    pub top: Vec<u64>,
    /// Whether the bottom MLP's output joins the interaction's output (the original features).
    #[serde(default = "yes")]
    pub concat_dense: bool,
    /// Optimizer of the dense weights (and TensorCore tables), applied on every replica.
    #[serde(default = "sgd")]
    pub optimizer: Optimizer,
    /// Element type of the dense gradients' data-parallel all-reduce.
    #[serde(default = "f32")]
    pub gradient_dtype: Dtype,
    /// The HLO text of the dense network's forward and backward for the per-chip batch, returning the
    /// gradients (`jax.jit(jax.value_and_grad(loss)).lower(...).as_text(dialect="hlo")`): its kernels,
    /// costed as `tpusim hlo` costs them, replace the built-in layers as the TensorCore stage; the
    /// all-reduce and the `optimizer` update follow for the parameters it returns gradients of.
    /// Relative to the workload file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hlo: Option<std::path::PathBuf>,
}

/// How a batch over its limits is split into SparseCore passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MinibatchDimension {
    /// jax-tpu-embedding's vocabulary-dimension minibatching (hash buckets of ids).
    #[default]
    Vocabulary,
    /// The guide's roadmap item: split each SparseCore's samples into groups (one pass each).
    Sample,
}

/// Limits in force.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsDef {
    /// max_ids_per_partition for every stack (default: 256, jax-tpu-embedding's default).
    #[serde(default)]
    pub max_ids_per_partition: Option<u32>,
    /// max_unique_ids_per_partition for every stack.
    #[serde(default)]
    pub max_unique_ids_per_partition: Option<u32>,
    /// Drop ids over the limits instead of failing.
    #[serde(default)]
    pub allow_id_dropping: bool,
    /// Split batches that exceed limits into minibatches.
    #[serde(default = "yes")]
    pub enable_minibatching: bool,
    /// A limits file (JSON or TOML, `tpusim limits estimate -o`) or a directory of jax-tpu-embedding
    /// FDO stats; per-stack values there override the two defaults above.
    #[serde(default)]
    pub file: Option<std::path::PathBuf>,
    /// SparsecoreConfig: ids one chip may hold per sample, over every table of a stack; the static
    /// CSR buffer is this x the chip's samples (ids after padding each partition to 8 must fit).
    #[serde(default = "sixty_four")]
    pub max_ids_per_chip_per_sample: u32,
    /// SparsecoreConfig: per table, the ids one SparseCore sends to all of the table's partitions in a
    /// step (duplicates across samples counted). Also caps the stack's per-partition limit.
    #[serde(default)]
    pub max_ids_per_table: BTreeMap<String, u32>,
    /// SparsecoreConfig: as `max_ids_per_table`, for unique ids.
    #[serde(default)]
    pub max_unique_ids_per_table: BTreeMap<String, u32>,
    /// Minibatching along the vocabulary (default, what jax-tpu-embedding does) or along samples.
    #[serde(default)]
    pub minibatching_dimension: MinibatchDimension,
    /// Per-stack limits keyed by a table or a stack named by its tables (`t0_t1`), whatever stacking
    /// makes of them at this batch (`sim_sparsecore::limits::resolve`); over the limits file's and
    /// the defaults (`--set limits.stacks.t0_t1.max_ids_per_partition=880`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stacks: BTreeMap<String, StackLimitDef>,
}

/// One key's limits in a workload's `limits.stacks`; a field left out takes the workload-wide value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackLimitDef {
    /// max_ids_per_partition.
    #[serde(default)]
    pub max_ids_per_partition: Option<u32>,
    /// max_unique_ids_per_partition.
    #[serde(default)]
    pub max_unique_ids_per_partition: Option<u32>,
}

impl Default for LimitsDef {
    fn default() -> Self {
        LimitsDef {
            max_ids_per_partition: None,
            max_unique_ids_per_partition: None,
            allow_id_dropping: false,
            enable_minibatching: true,
            file: None,
            max_ids_per_chip_per_sample: 64,
            max_ids_per_table: BTreeMap::new(),
            max_unique_ids_per_table: BTreeMap::new(),
            minibatching_dimension: MinibatchDimension::Vocabulary,
            stacks: BTreeMap::new(),
        }
    }
}

fn yes() -> bool {
    true
}
fn dot() -> Interaction {
    Interaction::Dot
}
fn sixty_four() -> u32 {
    64
}

/// `SparseDenseMatmulOp`'s simulated quantization: rows are quantised to `num_buckets` levels over
/// [low, high] (clipped) and dequantised before use. A field left out takes its default (256 levels
/// over [-1, 1], int8 over the usual embedding range), so `--set quantization.FIELD=...` alone turns
/// quantization on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantizationDef {
    /// Levels (256 for int8).
    #[serde(default = "buckets_256")]
    pub quantization_config_num_buckets: u32,
    /// Lowest representable value.
    #[serde(default = "minus_one")]
    pub quantization_config_low: f32,
    /// Highest representable value.
    #[serde(default = "plus_one")]
    pub quantization_config_high: f32,
}

fn buckets_256() -> u32 {
    256
}
fn minus_one() -> f32 {
    -1.0
}
fn plus_one() -> f32 {
    1.0
}

/// Documented aliases of workload fields (`--set` and files accept either name): (alias, field), as
/// dotted paths.
pub const FIELD_ALIASES: &[(&str, &str)] = &[("host.maximum_parallel_iterations", "host.prefetch")];

/// The host's input pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDef {
    /// Preprocessing threads.
    #[serde(default = "four")]
    pub threads: u32,
    /// Batches preprocessed ahead of the device (the guide's `maximum_parallel_iterations`): more hides
    /// host jitter and costs HBM heap for the prefetched inputs.
    #[serde(default = "two", alias = "maximum_parallel_iterations")]
    pub prefetch: u32,
    /// Ids one thread preprocesses per second (default: tpusim's own measured rate, ~18e6).
    #[serde(default = "ids_rate")]
    pub ids_per_s_per_thread: f64,
}

fn four() -> u32 {
    4
}
fn two() -> u32 {
    2
}
fn ids_rate() -> f64 {
    18e6
}

impl Default for HostDef {
    fn default() -> Self {
        HostDef {
            threads: 4,
            prefetch: 2,
            ids_per_s_per_thread: ids_rate(),
        }
    }
}

/// A recommender training workload. Required: `chip`, `chips`, `global_batch`, `tables` (name,
/// vocab, dim), `features` (name, table) and `dense` (dense_features, bottom, top); every other
/// field has the default its documentation gives (`tpusim init` writes them all, commented).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Name (default: `"workload"`).
    #[serde(default = "default_name")]
    pub name: String,
    /// Chip preset.
    pub chip: String,
    /// Number of chips (a power of two).
    pub chips: u32,
    /// ICI slice shape, e.g. "4x4x4" (its product must equal `chips`); default: the Cloud slice shape
    /// of that many chips. Collectives are timed on it.
    #[serde(default)]
    pub topology: Option<String>,
    /// One replica per chip, its TensorCores splitting every kernel (megacore), or one replica per
    /// TensorCore. Default: the chip's (`megacore` in the chip preset).
    #[serde(default)]
    pub megacore: Option<bool>,
    /// Global batch (samples per step over all chips).
    pub global_batch: u64,
    /// Steps to simulate (default: [`DEFAULT_STEPS`]).
    #[serde(default = "default_steps")]
    pub steps: u32,
    /// Pipelining mode (default: `"pipelined"`, XLA's full embedding pipelining).
    #[serde(default = "pipelined")]
    pub pipelining: Pipelining,
    /// Embedding tables.
    pub tables: Vec<TableDef>,
    /// Sparse features.
    pub features: Vec<FeatureDef>,
    /// Dense model.
    pub dense: DenseModel,
    /// Limits.
    #[serde(default)]
    pub limits: LimitsDef,
    /// Host input pipeline.
    #[serde(default)]
    pub host: HostDef,
    /// Seed of the id generators.
    #[serde(default)]
    pub seed: u64,
    /// SparseCore guide knob: keep every table its own stack (jax-tpu-embedding otherwise groups tables
    /// of the same padded dim, optimizer and combiner, up to its activation-memory limit).
    #[serde(default)]
    pub disable_table_stacking: bool,
    /// SparseCore guide knob (`xla_sc_num_serialized_tables_to_optimize_hbm`): process stacks in serial
    /// groups of this many; lower peak HBM stack, more SparseCore passes. 0: all at once.
    #[serde(default)]
    pub xla_sc_num_serialized_tables_to_optimize_hbm: u32,
    /// The guide's skew mitigation: remap ids through a fixed bijection of each table's vocabulary
    /// before sharding, so hot ids that shared a partition spread over all of them.
    #[serde(default)]
    pub shuffle_ids: bool,
    /// SparsecoreConfig: initialise tables on the host and copy them over PCIe (default true).
    #[serde(default = "yes")]
    pub initialize_tables_on_host: bool,
    /// SparsecoreConfig: initialise tables on the TPU itself (faster start-up).
    #[serde(default)]
    pub enable_fast_table_initialization: bool,
    /// XLA flag: the host checks every id against its table's vocabulary (costs host time per id).
    #[serde(default)]
    pub xla_sparse_core_enable_id_bound_check: bool,
    /// XLA flag: the SparseCore checks activations and gradients for NaN (costs SparseCore time; in
    /// functional mode the run stops at the first NaN and says where it came from).
    #[serde(default)]
    pub xla_sc_detect_nan: bool,
    /// Simulated quantization of looked-up rows (functional mode applies it; the SparseCore pays for it).
    #[serde(default)]
    pub quantization: Option<QuantizationDef>,
    /// Learning rate of functional mode (default 0.05).
    #[serde(default)]
    pub functional_learning_rate: Option<f32>,
}

/// Steps a workload simulates when it does not say.
pub const DEFAULT_STEPS: u32 = 6;

fn default_name() -> String {
    "workload".into()
}
fn default_steps() -> u32 {
    DEFAULT_STEPS
}
fn pipelined() -> Pipelining {
    Pipelining::Pipelined
}

mod required;
pub use required::STARTER_WORKLOAD;

/// Largest global batch (samples per step) a workload may name.
pub const MAX_GLOBAL_BATCH: u64 = 1 << 31;
/// Largest number of chips.
pub const MAX_CHIPS: u32 = 1 << 16;
/// Largest vocabulary: ids are int32.
pub const MAX_VOCAB: u64 = i32::MAX as u64;
/// Largest embedding dim.
pub const MAX_DIM: u64 = 1 << 20;
/// Largest ids per sample of one feature.
pub const MAX_VALENCY: u64 = 1 << 16;

/// Work a run may take on without the user raising the bound (`--max-steps`, `--max-ids`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunBounds {
    /// Simulated steps.
    pub max_steps: u64,
    /// Ids generated for one chip in one step (all features).
    pub max_ids_per_step: u64,
}

impl Default for RunBounds {
    fn default() -> Self {
        RunBounds {
            max_steps: 10_000,
            max_ids_per_step: 1 << 28,
        }
    }
}

const PRESETS: &[(&str, &str)] = &[
    ("dlrm-small", include_str!("../presets/dlrm-small.toml")),
    ("dlrm-criteo", include_str!("../presets/dlrm-criteo.toml")),
    ("dlrm-criteo-128", include_str!("../presets/dlrm-criteo-128.toml")),
    (
        "dlrm-criteo-pipelined",
        include_str!("../presets/dlrm-criteo-pipelined.toml"),
    ),
    ("dlrm-dcnv2", include_str!("../presets/dlrm-dcnv2.toml")),
    ("balanced", include_str!("../presets/balanced.toml")),
    ("tc-heavy", include_str!("../presets/tc-heavy.toml")),
    ("skewed", include_str!("../presets/skewed.toml")),
];

impl Workload {
    /// Parses TOML (or JSON when the text starts with '{').
    pub fn parse(text: &str) -> Result<Workload, WorkloadError> {
        let json = text.trim_start().starts_with('{');
        let typed = if json {
            sim_core::de::json(text)
        } else {
            sim_core::de::toml(text)
        };
        // Every required field left out, named at once (serde stops at the first).
        let w: Workload = typed.map_err(|e| WorkloadError::Spec(required::missing_message(text, json).unwrap_or(e)))?;
        w.validate()?;
        Ok(w)
    }

    /// Makes relative paths (NPZ ids, limits file) relative to `base` (the workload file's folder).
    pub fn resolve_paths(&mut self, base: &std::path::Path) {
        let fix = |p: &mut std::path::PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        for f in &mut self.features {
            if let IdDist::Npz(files) = &mut f.ids {
                files.iter_mut().for_each(fix);
            }
        }
        if let Some(p) = &mut self.limits.file {
            fix(p);
        }
        if let Some(p) = &mut self.dense.hlo {
            fix(p);
        }
    }

    /// A built-in preset.
    pub fn preset(name: &str) -> Result<Workload, WorkloadError> {
        let text = PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| WorkloadError::UnknownPreset(name.into()))?
            .1;
        Workload::parse(text)
    }

    /// Names of the presets.
    pub fn preset_names() -> Vec<&'static str> {
        PRESETS.iter().map(|(n, _)| *n).collect()
    }

    /// Checks consistency.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Spec(m));
        if self.chips == 0 || !self.chips.is_power_of_two() {
            return bad(format!("chips must be a power of two, got {}", self.chips));
        }
        if self.steps == 0 {
            return bad("steps must be at least 1".into());
        }
        if self.global_batch == 0 || !self.global_batch.is_multiple_of(self.chips as u64 * 4) {
            return bad(format!(
                "global_batch ({}) must be a positive multiple of chips x 4 ({})",
                self.global_batch,
                self.chips as u64 * 4
            ));
        }
        if self.global_batch > MAX_GLOBAL_BATCH {
            return bad(format!(
                "global_batch = {}: at most {MAX_GLOBAL_BATCH} samples per step",
                self.global_batch
            ));
        }
        if self.chips > MAX_CHIPS {
            return bad(format!("chips = {}: at most {MAX_CHIPS}", self.chips));
        }
        for (i, t) in self.tables.iter().enumerate() {
            if t.vocab > MAX_VOCAB || t.dim > MAX_DIM {
                return bad(format!(
                    "tables[{i}] ({}): vocab = {} and dim = {} must be at most {MAX_VOCAB} (ids are int32) and {MAX_DIM}",
                    t.name, t.vocab, t.dim
                ));
            }
        }
        for (i, f) in self.features.iter().enumerate() {
            let at = format!("features[{i}] ({})", f.name);
            if !self.tables.iter().any(|t| t.name == f.table) {
                let names: Vec<&str> = self.tables.iter().map(|t| t.name.as_str()).collect();
                return bad(format!(
                    "{at}.table: unknown table '{}' (tables: {})",
                    f.table,
                    names.join(", ")
                ));
            }
            match f.valency {
                Valency::Fixed(n) if n == 0 || n > MAX_VALENCY => {
                    return bad(format!("{at}.valency: fixed = {n}, valid 1..={MAX_VALENCY}"))
                }
                Valency::Uniform([lo, hi]) if lo > hi || hi == 0 || hi > MAX_VALENCY => {
                    return bad(format!(
                        "{at}.valency: uniform = [{lo}, {hi}], valid 0 <= lo <= hi, 1 <= hi <= {MAX_VALENCY}"
                    ))
                }
                Valency::Poisson(m) if !(m > 0.0 && m <= MAX_VALENCY as f64 / 4.0) => {
                    return bad(format!(
                        "{at}.valency: poisson mean = {m}, valid a finite number in (0, {}]",
                        MAX_VALENCY / 4
                    ))
                }
                _ => {}
            }
            match f.ids {
                IdDist::Zipf(a) if !(a > 0.0 && a <= 100.0) => {
                    return bad(format!(
                        "{at}.ids: zipf exponent = {a}, valid a finite number in (0, 100]"
                    ));
                }
                IdDist::HotSet { fraction, size, .. } if !((0.0..=1.0).contains(&fraction) && size >= 1) => {
                    return bad(format!(
                        "{at}.ids: hot_set fraction = {fraction} and size = {size}, valid fraction in [0, 1] and size >= 1"
                    ));
                }
                _ => {}
            }
        }
        if let Some(t) = &self.topology {
            let product: Option<u64> = t.split('x').map(|d| d.trim().parse::<u64>().ok()).product();
            if product != Some(self.chips as u64) {
                return bad(format!(
                    "topology '{t}' does not multiply out to chips = {}",
                    self.chips
                ));
            }
        }
        for f in &self.features {
            if let IdDist::Npz(files) = &f.ids {
                if files.is_empty() {
                    return bad(format!("features.{}: ids.npz needs at least one file", f.name));
                }
            }
        }
        for t in &self.tables {
            if t.vocab == 0 || t.dim == 0 {
                return bad(format!("tables.{}: vocab and dim must be positive", t.name));
            }
        }
        for (k, m) in [
            ("max_ids_per_table", &self.limits.max_ids_per_table),
            ("max_unique_ids_per_table", &self.limits.max_unique_ids_per_table),
        ] {
            for (t, v) in m {
                if !self.tables.iter().any(|x| &x.name == t) {
                    return bad(format!(
                        "limits.{k}: unknown table '{t}'{}",
                        sim_sparsecore::crosscheck::hint(t, self.tables.iter().map(|x| x.name.as_str()))
                    ));
                }
                if *v == 0 {
                    return bad(format!("limits.{k}.{t} must be at least 1"));
                }
            }
        }
        for (k, l) in &self.limits.stacks {
            for (field, v) in [
                ("max_ids_per_partition", l.max_ids_per_partition),
                ("max_unique_ids_per_partition", l.max_unique_ids_per_partition),
            ] {
                if let Some(v) = v.filter(|&v| v == 0 || v > i32::MAX as u32) {
                    return bad(format!(
                        "limits.stacks.{k}.{field} = {v}: must be in 1..={} (an int32 in jax-tpu-embedding)",
                        i32::MAX
                    ));
                }
            }
        }
        if self.limits.max_ids_per_chip_per_sample == 0 {
            return bad("limits.max_ids_per_chip_per_sample must be at least 1".into());
        }
        self.validate_dense_sizes()?;
        self.validate_limit_ranges()?;
        self.validate_hot_sets()?;
        if let Some(q) = &self.quantization {
            if q.quantization_config_num_buckets < 2
                || q.quantization_config_low >= q.quantization_config_high
                || !q.quantization_config_low.is_finite()
                || !q.quantization_config_high.is_finite()
            {
                return bad("quantization: needs num_buckets >= 2 and finite low < high".into());
            }
        }
        if let Some(lr) = self.functional_learning_rate {
            if !lr.is_finite() || lr <= 0.0 {
                return bad("functional_learning_rate must be a finite positive number".into());
            }
        }
        if self.host.threads == 0
            || !(self.host.ids_per_s_per_thread > 0.0 && self.host.ids_per_s_per_thread.is_finite())
        {
            return bad("host.threads and host.ids_per_s_per_thread must be positive".into());
        }
        Ok(())
    }

    /// Dense widths the TensorCore model can cost: each at most [`MAX_DIM`], and the batch per chip
    /// times a width at most 2^40 elements (the op arrays' bound), named by the workload field.
    fn validate_dense_sizes(&self) -> Result<(), WorkloadError> {
        const MAX_ELEMENTS: u64 = 1 << 40;
        let d = &self.dense;
        let mut widths = vec![("dense.dense_features".to_string(), d.dense_features)];
        widths.extend(
            d.bottom
                .iter()
                .enumerate()
                .map(|(i, &v)| (format!("dense.bottom[{i}]"), v)),
        );
        widths.extend(d.top.iter().enumerate().map(|(i, &v)| (format!("dense.top[{i}]"), v)));
        let batch = self.batch_per_chip();
        for (field, v) in widths {
            if v > MAX_DIM || batch.checked_mul(v).is_none_or(|x| x > MAX_ELEMENTS) {
                return Err(WorkloadError::Spec(format!(
                    "{field} = {v}: must be at most {MAX_DIM}, and the batch per chip ({batch}) x {field} at most {MAX_ELEMENTS} elements"
                )));
            }
        }
        Ok(())
    }

    /// Every limit within int32, as jax-tpu-embedding holds them (a larger one is bad input, not a
    /// compile failure).
    fn validate_limit_ranges(&self) -> Result<(), WorkloadError> {
        const MAX: u32 = i32::MAX as u32;
        let l = &self.limits;
        let mut all: Vec<(String, u32)> = vec![(
            "limits.max_ids_per_chip_per_sample".into(),
            l.max_ids_per_chip_per_sample,
        )];
        all.extend(
            l.max_ids_per_partition
                .map(|v| ("limits.max_ids_per_partition".into(), v)),
        );
        all.extend(
            l.max_unique_ids_per_partition
                .map(|v| ("limits.max_unique_ids_per_partition".into(), v)),
        );
        for (k, m) in [
            ("max_ids_per_table", &l.max_ids_per_table),
            ("max_unique_ids_per_table", &l.max_unique_ids_per_table),
        ] {
            all.extend(m.iter().map(|(t, v)| (format!("limits.{k}.{t}"), *v)));
        }
        match all.into_iter().find(|(_, v)| *v == 0 || *v > MAX) {
            Some((field, v)) => Err(WorkloadError::Spec(format!(
                "{field} = {v}: must be in 1..={MAX} (an int32 in jax-tpu-embedding)"
            ))),
            None => Ok(()),
        }
    }

    /// A hot set fits its table: no more hot ids than the vocabulary, and with a stride, the last
    /// hot id (size - 1) x stride still inside it.
    fn validate_hot_sets(&self) -> Result<(), WorkloadError> {
        for (i, f) in self.features.iter().enumerate() {
            let IdDist::HotSet { size, stride, .. } = f.ids else {
                continue;
            };
            let Some(t) = self.tables.iter().find(|t| t.name == f.table) else {
                continue;
            };
            let last = (size - 1).checked_mul(stride.max(1));
            if size > t.vocab || last.is_none_or(|x| x >= t.vocab) {
                return Err(WorkloadError::Spec(format!(
                    "features[{i}] ({}).ids.hot_set: size = {size}, stride = {stride}: the hot ids reach {}, past table '{}' (vocab {}); valid: size <= vocab and (size - 1) x max(stride, 1) < vocab",
                    f.name,
                    last.map_or("past 2^64".to_string(), |x| x.to_string()),
                    t.name,
                    t.vocab
                )));
            }
        }
        Ok(())
    }

    /// The workload's SparseCore part: its tables placed on SparseCores and their features.
    pub fn sparsecore_part(&self) -> Workload {
        let mut w = self.clone();
        w.tables.retain(|t| t.placement == Placement::Sparsecore);
        w.features.retain(|f| w.tables.iter().any(|t| t.name == f.table));
        let kept: Vec<&String> = w.tables.iter().map(|t| &t.name).collect();
        w.limits.max_ids_per_table.retain(|t, _| kept.contains(&t));
        w.limits.max_unique_ids_per_table.retain(|t, _| kept.contains(&t));
        w
    }

    /// Tables placed on the TensorCore.
    pub fn tensorcore_tables(&self) -> impl Iterator<Item = &TableDef> {
        self.tables.iter().filter(|t| t.placement == Placement::Tensorcore)
    }

    /// Ids one chip generates per step at most (all features, at their largest valency).
    pub fn max_ids_per_chip_step(&self) -> u64 {
        self.features
            .iter()
            .map(|f| self.batch_per_chip().saturating_mul(max_valency(&f.valency)))
            .fold(0u64, u64::saturating_add)
    }

    /// Refuses work beyond `bounds` up front, naming the bound and the flag that raises it.
    pub fn check_bounds(&self, bounds: &RunBounds) -> Result<(), WorkloadError> {
        if self.steps as u64 > bounds.max_steps {
            return Err(WorkloadError::Spec(format!(
                "steps = {}: more than the {} steps a run may simulate; raise the bound with --max-steps",
                self.steps, bounds.max_steps
            )));
        }
        let ids = self.max_ids_per_chip_step();
        if ids > bounds.max_ids_per_step {
            return Err(WorkloadError::Spec(format!(
                "up to {ids} ids per chip per step (batch per chip {} x the features' valencies): more than the {} a run may generate; raise the bound with --max-ids",
                self.batch_per_chip(),
                bounds.max_ids_per_step
            )));
        }
        Ok(())
    }

    /// Samples per chip per step.
    pub fn batch_per_chip(&self) -> u64 {
        self.global_batch / self.chips as u64
    }
}

/// Largest valency a Poisson or uniform feature is declared with (its input_shape).
pub fn max_valency(v: &Valency) -> u64 {
    match v {
        Valency::Fixed(n) => *n,
        Valency::Uniform([_, hi]) => *hi,
        Valency::Poisson(m) => (m * 3.0).ceil() as u64 + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse() {
        for n in Workload::preset_names() {
            Workload::preset(n).unwrap_or_else(|e| panic!("{n}: {e}"));
        }
        let c = Workload::preset("dlrm-criteo").unwrap();
        assert_eq!((c.chips, c.global_batch, c.tables.len()), (64, 55_296, 26));
    }

    #[test]
    fn bad_specs_name_the_field() {
        let mut w = Workload::preset("dlrm-small").unwrap();
        w.chips = 3;
        assert!(w.validate().unwrap_err().to_string().contains("chips"));
        let text = include_str!("../presets/dlrm-small.toml").replace("table = \"t0\"", "table = \"nope\"");
        assert!(Workload::parse(&text)
            .unwrap_err()
            .to_string()
            .contains("unknown table 'nope'"));
    }
}
