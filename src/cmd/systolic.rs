//! `tpusim systolic`: SCALE-Sim-compatible compute cycles of a systolic array.

use std::path::PathBuf;

use anyhow::Context;
use tpusim_api::systolic::{compute_report, report_csv, report_json};

/// Arguments of `tpusim systolic`.
#[derive(clap::Args)]
pub struct Args {
    /// SCALE-Sim config (.cfg): ArrayHeight, ArrayWidth, Dataflow (os/ws/is).
    #[arg(long)]
    pub cfg: PathBuf,
    /// SCALE-Sim topology (.csv): conv layers or GEMM M,N,K.
    #[arg(long)]
    pub topology: PathBuf,
    /// Also write COMPUTE_REPORT.csv into this directory (`--output` is an alias).
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print JSON (`{"layers": [...], "total_cycles"}`) instead of the CSV.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tpusim systolic`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    if let Some(dir) = &args.output {
        tpusim_api::output::check_dir(dir, &["COMPUTE_REPORT.csv"])
            .with_context(|| format!("--out {}", dir.display()))?;
    }
    let rows = compute_report(&args.cfg, &args.topology)?;
    let csv = report_csv(&rows);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report_json(&rows))?);
    } else {
        print!("{csv}");
    }
    if let Some(dir) = args.output {
        tpusim_api::output::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        tpusim_api::output::write_atomic(dir.join("COMPUTE_REPORT.csv"), csv)?;
    }
    Ok(0)
}
