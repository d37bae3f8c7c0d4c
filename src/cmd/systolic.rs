//! `tpusim systolic`: SCALE-Sim-compatible compute cycles per layer (COMPUTE_REPORT columns).

use std::path::PathBuf;

use anyhow::Context;
use sim_tpu::systolic::{compute_report_csv, simulate, ScaleConfig, Topology};

/// Arguments of `tpusim systolic`.
#[derive(clap::Args)]
pub struct Args {
    /// SCALE-Sim config file (.cfg: ArrayHeight, ArrayWidth, Dataflow os/ws/is, ...).
    #[arg(long)]
    pub cfg: PathBuf,
    /// SCALE-Sim topology CSV (conv layers, or GEMM rows `name, M, N, K`).
    #[arg(long)]
    pub topology: PathBuf,
    /// Also write COMPUTE_REPORT.csv into this directory.
    #[arg(short = 'o', long = "out")]
    pub out: Option<PathBuf>,
}

/// Runs `tpusim systolic`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let cfg_text =
        std::fs::read_to_string(&args.cfg).with_context(|| format!("reading config {}", args.cfg.display()))?;
    let cfg = ScaleConfig::parse(&cfg_text).with_context(|| format!("reading config {}", args.cfg.display()))?;
    let topo_text = std::fs::read_to_string(&args.topology)
        .with_context(|| format!("reading topology {}", args.topology.display()))?;
    let topo = Topology::parse(&topo_text).with_context(|| format!("reading topology {}", args.topology.display()))?;
    let rows = simulate(&cfg, &topo);
    let csv = compute_report_csv(&rows);
    print!("{csv}");
    if let Some(dir) = args.out {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("COMPUTE_REPORT.csv");
        std::fs::write(&path, &csv).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(0)
}
