//! `tpusim run`: simulate training steps of a recommender workload.

use std::path::PathBuf;

use anyhow::Context;
use tpusim_api::run::{
    assumed_share, assumption_range, sensitivity, summary_json, write_report, write_trace, Pipelining, RunBounds,
    RunOptions, RunRequest, RunResult, RuntimeVerdict, Sensitivity, Workload, REPORT_FILES,
};

/// Arguments of `tpusim run`.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Workload file (TOML or JSON).
    pub workload: Option<PathBuf>,
    /// A built-in workload: dlrm-small, dlrm-criteo, dlrm-dcnv2, balanced, tc-heavy, skewed.
    #[arg(long, conflicts_with = "workload")]
    pub preset: Option<String>,
    /// Chip preset (overrides the workload's).
    #[arg(long)]
    pub chip: Option<String>,
    /// JSON file overriding chip preset fields.
    #[arg(long, value_name = "FILE")]
    pub chip_file: Option<PathBuf>,
    /// Number of chips (a power of two).
    #[arg(long)]
    pub chips: Option<u32>,
    /// Global batch.
    #[arg(long)]
    pub batch: Option<u64>,
    /// Steps to simulate.
    #[arg(long)]
    pub steps: Option<u32>,
    /// sequential or pipelined.
    #[arg(long, value_parser = ["sequential", "pipelined"])]
    pub pipelining: Option<String>,
    /// Train a small model on the schedule and report the loss per step.
    #[arg(long)]
    pub functional: bool,
    /// Print the JSON summary.
    #[arg(long)]
    pub json: bool,
    /// Write a Chrome trace (opens in Perfetto or chrome://tracing).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write summary.json, report.md, report.html and plots into this directory (`--report` is an alias).
    #[arg(short = 'o', long = "out", alias = "report", value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Override a workload field for a what-if, by its path in the workload file: `shuffle_ids=true`,
    /// `limits.max_ids_per_chip_per_sample=128`, `host.threads=2`, `tables.0.dtype=bf16` (repeatable).
    /// `chip.FIELD=VALUE` overrides a chip preset value or step parameter (see `tpusim chips --json`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run again with each assumed constant halved and doubled; print the step-time range per
    /// assumption and the ones the answer hangs on (JSON with --json).
    #[arg(long)]
    pub sensitivity: bool,
    /// Largest number of steps to simulate (refused beyond, exit 2).
    #[arg(long, value_name = "N", default_value_t = RunBounds::default().max_steps)]
    pub max_steps: u64,
    /// Largest number of ids one chip may generate per step (refused beyond, exit 2).
    #[arg(long, value_name = "N", default_value_t = RunBounds::default().max_ids_per_step)]
    pub max_ids: u64,
}

/// The workload an invocation describes (file or preset, with overrides).
pub fn load_workload(args: &Args) -> anyhow::Result<Workload> {
    Ok(tpusim_api::run::load_workload(&request(args))?)
}

/// The library's view of an invocation.
pub fn request(args: &Args) -> RunRequest {
    RunRequest {
        workload: args.workload.clone(),
        preset: args.preset.clone(),
        chip: args.chip.clone(),
        chips: args.chips,
        batch: args.batch,
        steps: args.steps,
        pipelining: args.pipelining.as_deref().map(|p| {
            if p == "sequential" {
                Pipelining::Sequential
            } else {
                Pipelining::Pipelined
            }
        }),
        set: args.set.clone(),
    }
}

/// Simulates an invocation's workload.
pub fn simulate_args(args: &Args, w: &Workload) -> anyhow::Result<RunResult> {
    let opts = run_options(args)?;
    // On a terminal, a spinner with the elapsed time while the steps run (Ctrl-C stops cleanly:
    // exit 130, pending outputs removed); nothing when stderr is a file or a pipe.
    let spinner = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let s = indicatif::ProgressBar::new_spinner();
        s.set_message(format!("simulating {} steps of {} (Ctrl-C stops)", w.steps, w.name));
        s.enable_steady_tick(std::time::Duration::from_millis(200));
        s
    });
    let r = tpusim_api::run::simulate(w, &opts);
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    Ok(r?)
}

/// The run options of an invocation: the chip file's overrides, then `--set chip.FIELD=VALUE`.
pub fn run_options(args: &Args) -> anyhow::Result<RunOptions> {
    let mut o = tpusim_api::run::run_options(&request(args), args.chip_file.as_deref(), args.functional)?;
    o.bounds = RunBounds {
        max_steps: args.max_steps,
        max_ids_per_step: args.max_ids,
    };
    Ok(o)
}

/// Prints the human summary of a run (units from `tpusim_api::units`; `--json` keeps the raw numbers).
pub fn print_summary(w: &Workload, r: &RunResult) {
    use tpusim_api::units::{bytes, duration_us, percent, rate};
    let s = &r.summary;
    println!(
        "{} on {} x {} (global batch {}, {})",
        w.name,
        w.chips,
        w.chip,
        w.global_batch,
        format!("{:?}", w.pipelining).to_lowercase()
    );
    // What does not fit is said first, constraint by constraint, with its numbers.
    for f in &s.fit_reasons {
        println!("  DOES NOT FIT {}", f.text());
    }
    match (s.step_time_low_us, s.step_time_high_us) {
        (Some(lo), Some(hi)) => println!(
            "  step time          {} (steady state; {}-{} with dense.hlo's kernels at the ends of their 80% band \
             from held-out residuals, {} of their cycles outside the calibrated domain)",
            duration_us(s.step_time_us),
            duration_us(lo),
            duration_us(hi),
            percent(s.dense_out_of_domain_fraction.unwrap_or(0.0))
        ),
        _ => println!("  step time          {} (steady state)", duration_us(s.step_time_us)),
    }
    println!("  measured over      {}", s.window_text());
    println!("  throughput         {}", rate(s.samples_per_s, "samples/s"));
    let b = &s.busy_fraction;
    println!(
        "  busy               TC {}  SC {}  HBM {}  ICI {}  host {}",
        percent(b.tc),
        percent(b.sc),
        percent(b.hbm),
        percent(b.ici),
        percent(b.host)
    );
    println!("  TC/SC overlap      {}", percent(s.overlap_fraction));
    println!(
        "  HBM per step       {} ({} padding)",
        bytes(s.hbm_bytes_per_step),
        percent(s.hbm_padding_bytes_per_step as f64 / s.hbm_bytes_per_step.max(1) as f64)
    );
    for (k, v) in &s.peak_memory_bytes {
        let cap = s.capacity_bytes.get(k).copied().unwrap_or(0);
        println!(
            "  {:<18} {} of {} ({}){}",
            memory_label(k),
            bytes(*v),
            bytes(cap),
            percent(*v as f64 / cap.max(1) as f64),
            if *v > cap { "  DOES NOT FIT" } else { "" }
        );
    }
    // Dropped ids only mean something where dropping is on; with it off an overflow aborts instead.
    if w.limits.allow_id_dropping {
        println!(
            "  minibatches/step   {}   dropped ids/step {}",
            s.minibatches_per_step, s.dropped_ids_per_step
        );
    } else {
        println!("  minibatches/step   {}", s.minibatches_per_step);
    }
    let bad: Vec<_> = s.limits.iter().filter(|l| l.runtime != RuntimeVerdict::Ok).collect();
    if !bad.is_empty() {
        for l in bad {
            println!("  limits {}: {} ({})", l.stack, l.runtime, l.message);
        }
    }
    // Every limit any step aborts on, with what the whole run needs: one round of changes fits.
    if !s.limits_needed.is_empty() {
        println!("  to fit, raise all of these (what the whole run needs):");
        for n in &s.limits_needed {
            let of = n.stack.as_deref().or(n.table.as_deref()).unwrap_or("workload");
            println!(
                "    {of}: {} {} -> {}   --set {}",
                n.limit.as_str(),
                n.current,
                n.needed,
                n.set
            );
        }
    }
    if !s.loss.is_empty() {
        println!(
            "  loss               {:.4} -> {:.4}",
            s.loss[0],
            s.loss[s.loss.len() - 1]
        );
    }
    println!(
        "  start-up           {} (table initialisation)",
        duration_us(r.startup_ps as f64 / 1e6)
    );
    println!("  {}", r.straggler);
    if let Some(n) = &r.nan {
        println!("  {n}");
    }
    for wmsg in &r.warnings {
        println!("  warning: {wmsg}");
    }
    if s.fit_reasons.is_empty() && s.fits {
        println!("  fits               yes");
    } else {
        let kinds: Vec<&str> = s.fit_reasons.iter().map(|f| f.kind.label()).collect();
        println!("  fits               no: {}", kinds.join(", "));
    }
    println!("{}", r.bottleneck);
}

/// The name a memory space goes by in human output.
fn memory_label(space: &str) -> &str {
    match space {
        "hbm" => "HBM",
        "vmem" => "VMEM",
        "tilespmem" => "TileSpmem",
        "spmem" => "Spmem",
        other => other,
    }
}

/// Prints the step-time range per assumption.
pub fn print_sensitivity(w: &Workload, s: &Sensitivity) {
    let one = s
        .assumptions
        .iter()
        .flat_map(|a| [a.halved_step_time_us, a.doubled_step_time_us]);
    let (lo, hi) = one.fold((s.step_time_us, s.step_time_us), |(l, h), t| (l.min(t), h.max(t)));
    println!(
        "{} on {} x {}: step time {}; {} to {} with one assumed constant halved or doubled at a time, {} to {} with all halved or all doubled together",
        w.name,
        w.chips,
        w.chip,
        tpusim_api::units::duration_us(s.step_time_us),
        tpusim_api::units::duration_us(lo),
        tpusim_api::units::duration_us(hi),
        tpusim_api::units::duration_us(s.range_us[0]),
        tpusim_api::units::duration_us(s.range_us[1])
    );
    println!(
        "  {:<36} {:>14} {:>12} {:>12} {:>8}",
        "assumption", "value", "halved µs", "doubled µs", "swing"
    );
    for a in &s.assumptions {
        println!(
            "  {:<36} {:>14} {:>12.1} {:>12.1} {:>7.1}%",
            a.name,
            match a.value.as_f64() {
                Some(x) if a.value.is_f64() => tpusim_api::units::number(x, 6),
                _ => a.value.to_string(),
            },
            a.halved_step_time_us,
            a.doubled_step_time_us,
            a.swing * 100.0
        );
    }
    for a in &s.assumptions {
        if let Some(c) = &a.contention {
            println!("  note: {} {}", a.name, c.note);
        }
    }
    if s.dominant.is_empty() {
        println!("The answer does not hang on any single assumption (none moves it by 5% or more).");
    } else {
        println!(
            "The answer hangs on: {} (each moves it by 5% or more).",
            s.dominant.join(", ")
        );
    }
}

/// Runs `tpusim run`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let w = load_workload(&args)?;
    // An output that cannot be written is said before the simulation, not after it.
    if let Some(p) = &args.trace {
        tpusim_api::output::check_writable(p).with_context(|| format!("--trace {}", p.display()))?;
    }
    if let Some(d) = &args.report {
        tpusim_api::output::check_dir(d, &REPORT_FILES).with_context(|| format!("--out {}", d.display()))?;
    }
    let r = simulate_args(&args, &w)?;
    if args.sensitivity {
        let s = sensitivity(&w, &run_options(&args)?)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&s)?);
        } else {
            print_sensitivity(&w, &s);
        }
        return Ok(if r.summary.fits { 0 } else { 1 });
    }
    if let Some(p) = &args.trace {
        write_trace(&r, p)?;
    }
    if let Some(dir) = &args.report {
        let label = format!("{:?}", w.pipelining).to_lowercase();
        write_report(dir, &w, &[(label.as_str(), &r)], &r).with_context(|| dir.display().to_string())?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary_json(&r)?)?);
    } else {
        print_summary(&w, &r);
        // Where fixed costs that rest on assumptions hold much of the step, say how far it can move.
        let share = assumed_share(&r);
        if share >= 0.2 {
            let range = assumption_range(&w, &run_options(&args)?)?;
            println!(
                "Assumed constants hold {} of the critical path: the step takes {} to {} with them halved or doubled (tpusim run --sensitivity).",
                tpusim_api::units::percent(share),
                tpusim_api::units::duration_us(range[0]),
                tpusim_api::units::duration_us(range[1])
            );
        }
        if let Some(p) = &args.trace {
            println!("trace: {}", p.display());
        }
        if let Some(d) = &args.report {
            println!("report: {}", d.join("report.html").display());
        }
    }
    Ok(if r.summary.fits { 0 } else { 1 })
}
