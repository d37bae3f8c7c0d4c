//! `tpusim demo`: the built-in default. Runs dlrm-small sequential and pipelined, writes the report,
//! the trace and the plots, and prints where they are and the headline numbers.

use std::path::PathBuf;

use anyhow::Context;
use workloads::{simulate, Pipelining, RunOptions, Workload};

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
    let mut files: Vec<&str> = reports::REPORT_FILES.to_vec();
    files.push("trace.json");
    sim_core::output::check_dir(&args.out, &files).with_context(|| format!("--out {}", args.out.display()))?;
    let mut w = Workload::preset("dlrm-small")?;
    w.pipelining = Pipelining::Sequential;
    let opts = RunOptions {
        functional: true,
        record: true,
        chip_overrides: None,
        cache: None,
        bounds: Default::default(),
        simulate_every_step: false,
    };
    let seq = simulate(&w, &opts)?;
    w.pipelining = Pipelining::Pipelined;
    let pip = simulate(&w, &opts)?;
    sim_core::output::create_dir_all(&args.out).with_context(|| args.out.display().to_string())?;
    let trace = args.out.join("trace.json");
    super::run::traces_write(&pip.recorder, &trace)?;
    let input = super::run::report_input(&w, &[("sequential", &seq), ("pipelined", &pip)], &pip);
    let paths = reports::write_report(&args.out, &input)?;
    let files = [
        paths.html.clone(),
        paths.markdown.clone(),
        paths.summary.clone(),
        paths.gantt.clone(),
        trace.clone(),
    ];
    if args.json {
        let v = tpusim_api::explain::demo_json(&w, &seq, &pip, &files);
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    use sim_core::units::{duration_us, percent, rate};
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
    for p in &files {
        println!("  {}", p.display());
    }
    Ok(0)
}
