//! `tpusim demo`: the built-in default. Runs dlrm-small sequential and pipelined, writes the report,
//! the trace and the plots, and prints where they are and the headline numbers.

use std::path::PathBuf;

use tpusim_api::explain::{demo, demo_json};
use tpusim_api::units::{duration_us, percent, rate};

/// Arguments of `tpusim demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Output directory.
    #[arg(short = 'o', long, default_value = "tpusim-demo")]
    pub out: PathBuf,
    /// Print the headline numbers and the files written as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tpusim demo`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let d = demo(&args.out)?;
    let (w, seq, pip) = (&d.workload, &d.sequential, &d.pipelined);
    if args.json {
        let v = demo_json(w, seq, pip, &d.files);
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    let s = &pip.summary;
    println!(
        "tpusim demo: {} on {} x {}, global batch {}",
        w.name, w.chips, w.chip, w.global_batch
    );
    println!(
        "  step time (pipelined)     {:>10}   ({:.2}x faster than sequential, {})",
        duration_us(s.step_time_us),
        seq.summary.step_time_us / s.step_time_us,
        duration_us(seq.summary.step_time_us)
    );
    println!("  throughput                {:>10}", rate(s.samples_per_s, "samples/s"));
    println!("  TC/SC overlap             {:>10}", percent(s.overlap_fraction));
    if let (Some(a), Some(b)) = (seq.summary.loss.last(), s.loss.last()) {
        println!(
            "  loss after {} steps       sequential {a:.4}, pipelined {b:.4} (stale gradients)",
            w.steps
        );
    }
    println!("  {}", pip.bottleneck);
    println!("wrote:");
    for p in &d.files {
        println!("  {}", p.display());
    }
    Ok(0)
}
