//! `tpusim select`: kernels, precisions and formats for a small op graph, with the conversions inserted.

use std::path::PathBuf;

use tpusim_api::select::{read_graph, select, select_json};

/// Arguments of `tpusim select`.
#[derive(clap::Args)]
pub struct Args {
    /// GRAPH.json: {"input": [N, C, H, W], "ops": [{"op": "conv2d", "dtype": "float32", "format": "NCHW", "kernel": [3,3,64,64]}, ...]}
    pub graph: PathBuf,
    /// Chip (v4, v5e, v5p, v6e, tpu7x).
    #[arg(long, default_value = "v5p")]
    pub chip: String,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tpusim select`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let graph = read_graph(&args.graph)?;
    let r = select(graph, &args.chip)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&select_json(&r)?)?);
        return Ok(0);
    }
    let (s, name) = (&r.selection, r.chip);
    println!(
        "{:<4} {:<8} {:<14} {:<8} {:>12}  note",
        "#", "op", "dtype", "format", "cycles"
    );
    for (i, (k, note)) in s.kernels.iter().zip(&r.notes).enumerate() {
        for c in s.conversions.iter().filter(|c| c.before == i) {
            println!("     + {:<6} {} -> {}  ({} cycles)", c.kind, c.from, c.to, c.cycles);
        }
        println!(
            "{i:<4} {:<8} {:<14} {:<8} {:>12}  {note}",
            k.op,
            k.dtype,
            k.format.to_string(),
            k.cycles,
        );
    }
    for c in s.conversions.iter().filter(|c| c.before == s.kernels.len()) {
        println!(
            "     + {:<6} {} -> {}  ({} cycles, back to the requested output)",
            c.kind, c.from, c.to, c.cycles
        );
    }
    println!(
        "conversions: {} inserted, {} cycles on {}",
        s.conversions.len(),
        s.conversion_cycles,
        name
    );
    Ok(0)
}
