//! `tpusim demo`: the built-in default. Runs dlrm-small sequential and pipelined, writes the report,
//! the trace and the plots, and prints where they are and the headline numbers.

use std::path::PathBuf;

use anyhow::Context;
use workloads::{simulate, Pipelining, RunOptions, Workload};

/// Arguments of `tpusim demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Output directory.
    #[arg(long, default_value = "tpusim-demo")]
    pub out: PathBuf,
}

/// Runs `tpusim demo`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let mut w = Workload::preset("dlrm-small")?;
    w.pipelining = Pipelining::Sequential;
    let opts = RunOptions {
        functional: true,
        record: true,
        chip_overrides: None,
        cache: None,
        bounds: Default::default(),
    };
    let seq = simulate(&w, &opts)?;
    w.pipelining = Pipelining::Pipelined;
    let pip = simulate(&w, &opts)?;
    std::fs::create_dir_all(&args.out).with_context(|| args.out.display().to_string())?;
    let trace = args.out.join("trace.json");
    super::run::traces_write(
        &pip.recorder,
        std::fs::File::create(&trace).with_context(|| trace.display().to_string())?,
    )?;
    let input = super::run::report_input(&w, &[("sequential", &seq), ("pipelined", &pip)], &pip);
    let paths = reports::write_report(&args.out, &input)?;
    let s = &pip.summary;
    println!(
        "tpusim demo: {} on {} x {}, global batch {}",
        w.name, w.chips, w.chip, w.global_batch
    );
    println!(
        "  step time (pipelined)     {:>10.1} us   ({:.2}x faster than sequential, {:.1} us)",
        s.step_time_us,
        seq.summary.step_time_us / s.step_time_us,
        seq.summary.step_time_us
    );
    println!("  throughput                {:>10.0} samples/s", s.samples_per_s);
    println!("  TC/SC overlap             {:>10.0}%", s.overlap_fraction * 100.0);
    if let (Some(a), Some(b)) = (seq.summary.loss.last(), s.loss.last()) {
        println!(
            "  loss after {} steps       sequential {a:.4}, pipelined {b:.4} (stale gradients)",
            w.steps
        );
    }
    println!("  {}", pip.bottleneck);
    println!("wrote:");
    for p in [&paths.html, &paths.markdown, &paths.summary, &paths.gantt, &trace] {
        println!("  {}", p.display());
    }
    Ok(0)
}
