//! `tpusim preprocess --json`: SparseCore host preprocessing as jax-tpu-embedding does it
//! (the preprocess contract), with the output in the CLI's schema.

use anyhow::Context;
use serde_json::{json, Value};
use sim_sparsecore::preprocess::{
    preprocess as run_preprocess, preprocess_stats_npz, read_npz, Options, PreprocessError,
};

pub use sim_sparsecore::preprocess::{BatchIds, FeatureIds, PreprocessOutput, PreprocessSpec, StackOutput};

/// Reads and validates SPEC.json.
pub fn read_spec(path: &std::path::Path) -> crate::Result<PreprocessSpec> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_spec(&text, &path.display().to_string())
}

/// Parses SPEC.json text; `origin` names it in errors (a path, or `spec`).
pub fn parse_spec(text: &str, origin: &str) -> crate::Result<PreprocessSpec> {
    Ok(PreprocessSpec::from_json(text).with_context(|| origin.to_string())?)
}

/// Reads an id batch (NPZ in the contract's layout); errors name the file (the reader's own messages
/// do, so no second context is added: the CLI and Python say the same).
pub fn read_ids(path: &std::path::Path) -> crate::Result<BatchIds> {
    Ok(read_npz(path).map_err(anyhow::Error::from)?)
}

/// Preprocesses one batch; a limit exceeded with dropping off is [`crate::ApiError::LimitExceeded`].
/// Ids at or past their table's vocabulary are refused first (the user's mistake, though
/// jax-tpu-embedding would take them).
pub fn preprocess(spec: &PreprocessSpec, ids: &BatchIds, stats_only: bool) -> crate::Result<PreprocessOutput> {
    sim_sparsecore::crosscheck::check_vocabulary(spec, ids).map_err(anyhow::Error::from)?;
    api_result(run_preprocess(spec, ids, Options { stats_only }))
}

/// Preprocesses the batch in the NPZ file at `path`, with [`preprocess`]'s results and errors.
/// Statistics alone are streamed from the file in bounded memory where the input allows it
/// (uncompressed dense ids, no dropping); otherwise the file is read whole.
pub fn preprocess_file(
    spec: &PreprocessSpec,
    path: &std::path::Path,
    stats_only: bool,
) -> crate::Result<PreprocessOutput> {
    sim_sparsecore::crosscheck::check_npz_shapes(spec, path).map_err(anyhow::Error::from)?;
    if stats_only {
        if let Some(result) = preprocess_stats_npz(spec, path) {
            return api_result(result);
        }
    }
    preprocess(spec, &read_ids(path)?, stats_only)
}

fn api_result(result: Result<PreprocessOutput, PreprocessError>) -> crate::Result<PreprocessOutput> {
    match result {
        Ok(o) => Ok(o),
        Err(PreprocessError::LimitExceeded(e)) => Err(e.into()),
        Err(e) => Err(anyhow::Error::from(e).into()),
    }
}

/// One stack's statistics in the `--json` schema (the four buffers left out).
pub fn stack_stats_json(o: &StackOutput) -> serde_json::Map<String, Value> {
    let mut v = serde_json::Map::new();
    v.insert("num_minibatches".into(), json!(o.num_minibatches));
    v.insert("max_ids_per_partition".into(), json!(o.max_ids_per_partition));
    v.insert(
        "max_unique_ids_per_partition".into(),
        json!(o.max_unique_ids_per_partition),
    );
    v.insert("required_buffer_sizes".into(), json!(o.required_buffer_sizes));
    v.insert("dropped_id_count".into(), json!(o.dropped_id_count));
    v
}

/// Names of the four CSR buffers, in the `--json` order (they come before the statistics).
pub const BUFFERS: [&str; 4] = ["row_pointers", "embedding_ids", "sample_ids", "gains"];

/// One stack in the `--json` schema: buffers (unless `stats_only`; NaN gains as null), then statistics.
pub fn stack_json(o: &StackOutput, stats_only: bool) -> Value {
    let mut v = serde_json::Map::new();
    if !stats_only {
        v.insert("row_pointers".into(), json!(o.row_pointers));
        v.insert("embedding_ids".into(), json!(o.embedding_ids));
        v.insert("sample_ids".into(), json!(o.sample_ids));
        // JSON has no NaN: padding gains are null.
        let gains: Vec<Value> = o
            .gains
            .iter()
            .map(|g| if g.is_nan() { Value::Null } else { json!(g) })
            .collect();
        v.insert("gains".into(), Value::Array(gains));
    }
    v.extend(stack_stats_json(o));
    Value::Object(v)
}

/// The whole `--json` output: `{"stacks": {name: stack}}` in processing order.
pub fn output_json(out: &PreprocessOutput, stats_only: bool) -> Value {
    let stacks: serde_json::Map<String, Value> = out
        .stacks
        .iter()
        .map(|(n, o)| (n.clone(), stack_json(o, stats_only)))
        .collect();
    json!({ "stacks": stacks })
}
