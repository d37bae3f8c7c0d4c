//! `tpusim run`: simulate training steps of a recommender workload.

use std::path::PathBuf;

use anyhow::Context;
use workloads::{simulate, Pipelining, RunOptions, RunResult, Workload};

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
    /// Write summary.json, report.md, report.html and plots into this directory.
    #[arg(long, value_name = "DIR")]
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
    #[arg(long, value_name = "N", default_value_t = workloads::spec::RunBounds::default().max_steps)]
    pub max_steps: u64,
    /// Largest number of ids one chip may generate per step (refused beyond, exit 2).
    #[arg(long, value_name = "N", default_value_t = workloads::spec::RunBounds::default().max_ids_per_step)]
    pub max_ids: u64,
}

/// Splits `--set` values into workload overrides and chip overrides (`chip.FIELD=VALUE`).
pub fn split_sets(sets: &[String]) -> anyhow::Result<(Vec<String>, serde_json::Map<String, serde_json::Value>)> {
    let mut workload = Vec::new();
    let mut chip = serde_json::Map::new();
    for s in sets {
        match s.strip_prefix("chip.") {
            Some(rest) => {
                let (k, v) = rest
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("--set {s}: expected chip.FIELD=VALUE"))?;
                let value: serde_json::Value =
                    serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
                chip.insert(k.to_string(), value);
            }
            None => workload.push(s.clone()),
        }
    }
    Ok((workload, chip))
}

/// Applies `KEY=VALUE` overrides: the value is read as JSON (numbers, booleans, arrays, objects) or,
/// failing that, as a string; KEY is a dotted path (array elements by index).
pub fn apply_overrides(w: &Workload, sets: &[String]) -> anyhow::Result<Workload> {
    if sets.is_empty() {
        return Ok(w.clone());
    }
    let mut v = serde_json::to_value(w)?;
    for s in sets {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set {s}: expected KEY=VALUE"))?;
        let value: serde_json::Value =
            serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        let mut cur = &mut v;
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            cur = match cur {
                serde_json::Value::Object(m) => {
                    if last {
                        m.insert(part.to_string(), value.clone());
                        break;
                    }
                    m.entry(part.to_string())
                        .or_insert_with(|| serde_json::Value::Object(Default::default()))
                }
                serde_json::Value::Array(a) => {
                    let idx: usize = part
                        .parse()
                        .ok()
                        .filter(|&i| i < a.len())
                        .ok_or_else(|| anyhow::anyhow!("--set {s}: '{part}' is not an index below {}", a.len()))?;
                    if last {
                        a[idx] = value.clone();
                        break;
                    }
                    &mut a[idx]
                }
                _ => anyhow::bail!("--set {s}: '{}' is not a table", parts[..i].join(".")),
            };
        }
    }
    let w: Workload = serde_json::from_value(v).map_err(|e| anyhow::anyhow!("--set: {e}"))?;
    w.validate()?;
    Ok(w)
}

/// The report input of a run (one Gantt panel per run given).
pub fn report_input(w: &Workload, runs: &[(&str, &RunResult)], main: &RunResult) -> reports::ReportInput {
    reports::ReportInput {
        title: format!("tpusim: {} on {} x {}", w.name, w.chips, w.chip),
        summary: main.summary.clone(),
        gantt: runs
            .iter()
            .map(|(l, r)| (l.to_string(), r.recorder.clone(), r.summary.step_time_us))
            .collect(),
        bottleneck: main.bottleneck.clone(),
        chip_constants: main.chip_constants.clone(),
        padding_per_buffer: main.padding_per_buffer.clone(),
        knobs: main.knobs.clone(),
        warnings: main.warnings.clone(),
        memory_breakdown: main.memory_breakdown.clone(),
    }
}

/// The workload an invocation describes (file or preset, with overrides).
pub fn load_workload(args: &Args) -> anyhow::Result<Workload> {
    let mut w = match (&args.workload, &args.preset) {
        (Some(p), _) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            let mut w = Workload::parse(&text).with_context(|| p.display().to_string())?;
            w.resolve_paths(p.parent().unwrap_or(std::path::Path::new(".")));
            w
        }
        (None, Some(name)) => Workload::preset(name)?,
        (None, None) => anyhow::bail!(
            "give a workload file or --preset NAME ({})",
            Workload::preset_names().join(", ")
        ),
    };
    if let Some(c) = &args.chip {
        sim_tpu::chips::preset_name(c)?;
        w.chip = c.clone();
    }
    if let Some(n) = args.chips {
        // Another chip count takes that count's default slice unless --set topology names one.
        if n != w.chips {
            w.topology = None;
        }
        w.chips = n;
    }
    if let Some(b) = args.batch {
        w.global_batch = b;
    }
    if let Some(s) = args.steps {
        w.steps = s;
    }
    if let Some(p) = &args.pipelining {
        w.pipelining = if p == "sequential" {
            Pipelining::Sequential
        } else {
            Pipelining::Pipelined
        };
    }
    let (sets, _) = split_sets(&args.set)?;
    let w = apply_overrides(&w, &sets)?;
    w.validate()?;
    Ok(w)
}

/// Simulates an invocation's workload.
pub fn simulate_args(args: &Args, w: &Workload) -> anyhow::Result<RunResult> {
    Ok(simulate(w, &run_options(args)?)?)
}

/// The run options of an invocation: the chip file's overrides, then `--set chip.FIELD=VALUE`.
pub fn run_options(args: &Args) -> anyhow::Result<RunOptions> {
    let mut chip = match &args.chip_file {
        Some(p) => {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).with_context(|| p.display().to_string())?)
                    .with_context(|| format!("parsing {}", p.display()))?;
            v.as_object()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("{}: a chip file must be a JSON object", p.display()))?
        }
        None => serde_json::Map::new(),
    };
    let (_, sets) = split_sets(&args.set)?;
    chip.extend(sets);
    Ok(RunOptions {
        functional: args.functional,
        record: true,
        chip_overrides: if chip.is_empty() {
            None
        } else {
            Some(serde_json::Value::Object(chip))
        },
        cache: None,
        bounds: workloads::spec::RunBounds {
            max_steps: args.max_steps,
            max_ids_per_step: args.max_ids,
        },
    })
}

/// Prints the human summary of a run.
pub fn print_summary(w: &Workload, r: &RunResult) {
    let s = &r.summary;
    println!(
        "{} on {} x {} (global batch {}, {:?})",
        w.name, w.chips, w.chip, w.global_batch, w.pipelining
    );
    // What does not fit is said first.
    for f in &s.fit_reasons {
        println!("  DOES NOT FIT ({:?}): {}", f.kind, f.message);
    }
    println!("  step time          {:>12.1} us (steady state)", s.step_time_us);
    println!("  samples/s          {:>12.0}", s.samples_per_s);
    let b = &s.busy_fraction;
    println!(
        "  busy               TC {:.0}%  SC {:.0}%  HBM {:.0}%  ICI {:.0}%  host {:.0}%",
        b.tc * 100.0,
        b.sc * 100.0,
        b.hbm * 100.0,
        b.ici * 100.0,
        b.host * 100.0
    );
    println!("  TC/SC overlap      {:>11.0}%", s.overlap_fraction * 100.0);
    println!(
        "  HBM per step       {:>12} B ({:.1}% padding)",
        s.hbm_bytes_per_step,
        s.hbm_padding_bytes_per_step as f64 * 100.0 / s.hbm_bytes_per_step.max(1) as f64
    );
    for (k, v) in &s.peak_memory_bytes {
        let cap = s.capacity_bytes.get(k).copied().unwrap_or(0);
        println!(
            "  {k:<18} {v:>12} B of {cap} B{}",
            if *v > cap { "  DOES NOT FIT" } else { "" }
        );
    }
    println!(
        "  minibatches/step   {:>12}   dropped ids/step {}",
        s.minibatches_per_step, s.dropped_ids_per_step
    );
    let bad: Vec<_> = s
        .limits
        .iter()
        .filter(|l| l.runtime != sim_core::summary::RuntimeVerdict::Ok)
        .collect();
    if !bad.is_empty() {
        for l in bad {
            println!("  limits {}: {} ({})", l.stack, l.runtime, l.message);
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
        "  start-up           {:>12.1} ms (table initialisation)",
        r.startup_ps as f64 / 1e9
    );
    println!("  {}", r.straggler);
    if let Some(n) = &r.nan {
        println!("  {n}");
    }
    for wmsg in &r.warnings {
        println!("  warning: {wmsg}");
    }
    println!("  fits               {}", s.fits);
    println!("{}", r.bottleneck);
}

/// Prints the step-time range per assumption.
pub fn print_sensitivity(w: &Workload, s: &workloads::sensitivity::Sensitivity) {
    println!(
        "{} on {} x {}: step time {:.1} us; {:.1} to {:.1} us with every assumed constant halved or doubled",
        w.name, w.chips, w.chip, s.step_time_us, s.range_us[0], s.range_us[1]
    );
    println!(
        "  {:<36} {:>14} {:>12} {:>12} {:>8}",
        "assumption", "value", "halved us", "doubled us", "swing"
    );
    for a in &s.assumptions {
        println!(
            "  {:<36} {:>14} {:>12.1} {:>12.1} {:>7.1}%",
            a.name,
            a.value.to_string(),
            a.halved_step_time_us,
            a.doubled_step_time_us,
            a.swing * 100.0
        );
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
    let r = simulate_args(&args, &w)?;
    if args.sensitivity {
        let s = workloads::sensitivity::sensitivity(&w, &run_options(&args)?)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&s)?);
        } else {
            print_sensitivity(&w, &s);
        }
        return Ok(if r.summary.fits { 0 } else { 1 });
    }
    if let Some(p) = &args.trace {
        let f = std::fs::File::create(p).with_context(|| p.display().to_string())?;
        traces_write(&r.recorder, f)?;
    }
    if let Some(dir) = &args.report {
        let label = format!("{:?}", w.pipelining).to_lowercase();
        reports::write_report(dir, &report_input(&w, &[(label.as_str(), &r)], &r))
            .with_context(|| dir.display().to_string())?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r.summary)?);
    } else {
        print_summary(&w, &r);
        // Where fixed costs that rest on assumptions hold much of the step, say how far it can move.
        let share = workloads::sensitivity::assumed_share(&r);
        if share >= 0.2 {
            let range = workloads::sensitivity::assumption_range(&w, &run_options(&args)?)?;
            println!(
                "Assumed constants hold {:.0}% of the critical path: the step takes {:.1} to {:.1} us with them halved or doubled (tpusim run --sensitivity).",
                share * 100.0,
                range[0],
                range[1]
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

pub fn traces_write(rec: &sim_core::recorder::Recorder, f: std::fs::File) -> anyhow::Result<()> {
    traces::write_chrome_trace(rec, std::io::BufWriter::new(f))?;
    Ok(())
}
