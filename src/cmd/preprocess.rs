//! `tpusim preprocess`: SparseCore host preprocessing exactly as jax-tpu-embedding does it
//! (reference/preprocess-contract.md).

use std::io::Write;

use tpusim_api::preprocess::{output_json, preprocess_file, PreprocessSpec};

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
    Ok(tpusim_api::preprocess::read_spec(path)?)
}

/// Runs `tpusim preprocess`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let spec = read_spec(&args.spec)?;
    // A limit exceeded is an error of the check-failed kind: `main` prints it and exits 1.
    let out = preprocess_file(&spec, &args.ids, args.stats)?;
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    if args.json {
        serde_json::to_writer(&mut w, &output_json(&out, args.stats))?;
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
