//! `tpusim select`: kernels, precisions and formats for a small op graph, with the conversions inserted.

use std::path::PathBuf;

use anyhow::Context;
use sim_tpu::select::{op_info, select, Choice, Graph, GraphOp};
use sim_tpu::tensorcore::ChipModel;

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
    let text = std::fs::read_to_string(&args.graph).with_context(|| args.graph.display().to_string())?;
    let graph: Graph = serde_json::from_str(&text).with_context(|| args.graph.display().to_string())?;
    let name = sim_tpu::chips::preset_name(&args.chip)?;
    let chip = ChipModel::preset(name)?;
    let s = select(&graph, &chip, name)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(0);
    }
    println!(
        "{:<4} {:<8} {:<14} {:<8} {:>12}  note",
        "#", "op", "dtype", "format", "cycles"
    );
    for (i, k) in s.kernels.iter().enumerate() {
        for c in s.conversions.iter().filter(|c| c.before == i) {
            println!("     + {:<6} {} -> {}  ({} cycles)", c.kind, c.from, c.to, c.cycles);
        }
        println!(
            "{i:<4} {:<8} {:<14} {:<8} {:>12}  {}",
            k.op,
            k.dtype,
            k.format.to_string(),
            k.cycles,
            note(&graph.ops[i], k, name)
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

/// Why a kernel differs from the request: no kernel for the requested dtype or format on the chip, or a
/// supported request moved to a neighbour's format because that saves conversions.
fn note(op: &GraphOp, k: &Choice, chip: &str) -> String {
    if k.as_requested {
        return "as requested".into();
    }
    let Some(info) = op_info(&op.op, chip) else {
        return "changed".into();
    };
    let mut why = Vec::new();
    if !info.dtypes.contains(&op.dtype.as_str()) {
        why.push(format!("no {} {} kernel on {chip}", op.dtype, op.op));
    }
    if !info.formats.contains(&op.format) {
        why.push(format!("no {} {} kernel", op.format, op.op));
    }
    if why.is_empty() {
        "moved to save conversions".into()
    } else {
        why.join("; ")
    }
}
