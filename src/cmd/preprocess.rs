//! `tpusim preprocess`: SparseCore host preprocessing exactly as jax-tpu-embedding does it
//! (reference/preprocess-contract.md).

use std::io::Write;

use anyhow::Context;
use serde_json::{json, Value};
use sim_sparsecore::preprocess::{preprocess, read_npz, Options, PreprocessError, PreprocessSpec, StackOutput};

/// Arguments of `tpusim preprocess`.
#[derive(clap::Args)]
pub struct Args {
    /// SPEC.json: SparseCores, devices, tables, features, stacks and limits.
    #[arg(long, value_name = "SPEC.json")]
    pub spec: std::path::PathBuf,
    /// IDS.npz: per feature dense `N` or ragged `N.values` + `N.row_splits`, optional `N.weights`.
    #[arg(long, value_name = "IDS.npz")]
    pub ids: std::path::PathBuf,
    /// Print JSON (the buffers and the statistics).
    #[arg(long)]
    pub json: bool,
    /// Statistics only (leave out the four buffers).
    #[arg(long)]
    pub stats: bool,
}

/// Reads and validates SPEC.json.
pub fn read_spec(path: &std::path::Path) -> anyhow::Result<PreprocessSpec> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    PreprocessSpec::from_json(&text).with_context(|| format!("{}", path.display()))
}

fn stack_json(o: &StackOutput, stats_only: bool) -> Value {
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
    v.insert("num_minibatches".into(), json!(o.num_minibatches));
    v.insert("max_ids_per_partition".into(), json!(o.max_ids_per_partition));
    v.insert(
        "max_unique_ids_per_partition".into(),
        json!(o.max_unique_ids_per_partition),
    );
    v.insert("required_buffer_sizes".into(), json!(o.required_buffer_sizes));
    v.insert("dropped_id_count".into(), json!(o.dropped_id_count));
    Value::Object(v)
}

/// Runs `tpusim preprocess`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let spec = read_spec(&args.spec)?;
    let ids = read_npz(&args.ids).with_context(|| format!("{}", args.ids.display()))?;
    let out = match preprocess(&spec, &ids, Options { stats_only: args.stats }) {
        Ok(o) => o,
        Err(PreprocessError::LimitExceeded(e)) => {
            eprintln!("error: {e}");
            return Ok(1);
        }
        Err(e) => return Err(e.into()),
    };
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    if args.json {
        let stacks: serde_json::Map<String, Value> = out
            .stacks
            .iter()
            .map(|(n, o)| (n.clone(), stack_json(o, args.stats)))
            .collect();
        serde_json::to_writer(&mut w, &json!({ "stacks": stacks }))?;
        writeln!(w)?;
    } else {
        writeln!(
            w,
            "{:<24} {:>11} {:>14} {:>20} {:>18} {:>8}",
            "stack", "minibatches", "max ids/part", "max unique ids/part", "required buffer", "dropped"
        )?;
        for (name, o) in &out.stacks {
            writeln!(
                w,
                "{:<24} {:>11} {:>14} {:>20} {:>18} {:>8}",
                name,
                o.num_minibatches,
                o.max_ids_per_partition.iter().max().unwrap_or(&0),
                o.max_unique_ids_per_partition.iter().max().unwrap_or(&0),
                o.required_buffer_sizes.iter().max().unwrap_or(&0),
                o.dropped_id_count
            )?;
            writeln!(w, "  max ids per partition:        {:?}", o.max_ids_per_partition)?;
            writeln!(
                w,
                "  max unique ids per partition: {:?}",
                o.max_unique_ids_per_partition
            )?;
            writeln!(w, "  required buffer sizes per SC: {:?}", o.required_buffer_sizes)?;
        }
    }
    w.flush()?;
    Ok(0)
}
