//! `tpusim systolic`: SCALE-Sim-compatible compute cycles of a systolic array.

use std::path::PathBuf;

use anyhow::Context;
use sim_tpu::systolic::{compute, parse_config, parse_topology};

/// Arguments of `tpusim systolic`.
#[derive(clap::Args)]
pub struct Args {
    /// SCALE-Sim config (.cfg): ArrayHeight, ArrayWidth, Dataflow (os/ws/is).
    #[arg(long)]
    pub cfg: PathBuf,
    /// SCALE-Sim topology (.csv): conv layers or GEMM M,N,K.
    #[arg(long)]
    pub topology: PathBuf,
    /// Also write COMPUTE_REPORT.csv into this directory.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

/// Runs `tpusim systolic`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let cfg = parse_config(&std::fs::read_to_string(&args.cfg).with_context(|| args.cfg.display().to_string())?)
        .with_context(|| args.cfg.display().to_string())?;
    let layers =
        parse_topology(&std::fs::read_to_string(&args.topology).with_context(|| args.topology.display().to_string())?)
            .with_context(|| args.topology.display().to_string())?;
    let mut csv =
        String::from("LayerID, Total Cycles, Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %,\n");
    for (i, l) in layers.iter().enumerate() {
        let r = compute(&cfg, l, i)?;
        csv.push_str(&format!(
            "{}, {}, {}, {:.4}, {:.4}, {:.4},\n",
            r.layer_id,
            r.total_cycles,
            r.stall_cycles,
            r.overall_util_pct,
            r.mapping_efficiency_pct,
            r.compute_util_pct
        ));
    }
    print!("{csv}");
    if let Some(dir) = args.output {
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        sim_core::output::write_atomic(dir.join("COMPUTE_REPORT.csv"), csv)?;
    }
    Ok(0)
}
