//! `tpusim sweep`: capacity sweeps over chips, chip counts and batch sizes, run in parallel, with the
//! answers planners ask: the largest batch that fits each configuration, the cheapest configuration
//! that reaches a target throughput, and the limits each configuration needs. `--shard I/N` runs one
//! shard of the configurations; `--merge DIR...` merges shards into the outputs of the whole sweep.

use std::path::PathBuf;

use anyhow::Context;

use tpusim_api::sweep::shard::{merge, write_shard, Shard};
use tpusim_api::sweep::{
    parse_batches, plan, run_configs, set_target_and_prices, summary_text, sweep_json, write_plan_outputs, SweepRequest,
};

/// Arguments of `tpusim sweep`.
#[derive(clap::Args)]
pub struct Args {
    /// Workload file (TOML or JSON).
    pub workload: Option<PathBuf>,
    /// Largest number of configurations to run (refused beyond, exit 2).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_configs: u64,
    /// Largest number of steps each configuration simulates.
    #[arg(long, value_name = "N", default_value_t = tpusim_api::run::RunBounds::default().max_steps)]
    pub max_steps: u64,
    /// Largest number of ids one chip may generate per step.
    #[arg(long, value_name = "N", default_value_t = tpusim_api::run::RunBounds::default().max_ids_per_step)]
    pub max_ids: u64,
    /// A built-in workload.
    #[arg(long, conflicts_with = "workload")]
    pub preset: Option<String>,
    /// Chips, comma-separated (v4, v5p, v6e, tpu7x).
    #[arg(long, value_delimiter = ',', required_unless_present = "merge")]
    pub chip: Vec<String>,
    /// Chip counts, comma-separated powers of two.
    #[arg(long, value_delimiter = ',', required_unless_present = "merge")]
    pub chips: Vec<u32>,
    /// Global batches: a list (4096,8192) or a geometric range FROM..TOxFACTOR (4096..65536x2).
    #[arg(long, required_unless_present = "merge")]
    pub batch: Option<String>,
    /// Limits for every configuration: a limits file (JSON/TOML from `tpusim limits estimate -o`) or a
    /// directory of jax-tpu-embedding FDO stats; overrides the workload's own limits.
    #[arg(long)]
    pub limits: Option<PathBuf>,
    /// Steps per configuration.
    #[arg(long, default_value_t = 4)]
    pub steps: u32,
    /// Target samples/s (finite, above 0): report the cheapest configuration that reaches it.
    #[arg(long)]
    pub target: Option<f64>,
    /// Price per chip-hour overrides in USD (>= 0), e.g. v5p=4.2,v6e=2.7; keys v4, v5e, v5p, v6e, tpu7x.
    /// Prices not given are tpusim's assumed defaults, marked "assumed" in every output.
    #[arg(long, value_delimiter = ',')]
    pub price: Vec<String>,
    /// Worker threads (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Override a workload field for every configuration (as `tpusim run --set`; repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run only shard I of N (0-based; configuration k belongs to shard k mod N) and write
    /// DIR/sweep-shard-I-of-N.json for `--merge`.
    #[arg(long, value_name = "I/N", conflicts_with = "merge")]
    pub shard: Option<String>,
    /// Merge the shard files in these directories into the outputs of the whole sweep (`--target` and
    /// `--price` may be given here too: they change the answers and costs, not the points).
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with_all = ["workload", "preset", "chip", "chips", "batch", "limits", "set"])]
    pub merge: Vec<PathBuf>,
    /// Output directory (sweep.csv, sweep.json, sweep.svg, step_time.svg, fit_map.svg, each figure also
    /// as .png; with --shard, the shard file). `--output` is an alias.
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Print the answers and every configuration's point as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tpusim sweep`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    // The output directory is checked before any configuration runs.
    let files: &[&str] = if args.shard.is_some() {
        &[]
    } else {
        &tpusim_api::sweep::SWEEP_FILES
    };
    tpusim_api::output::check_dir(&args.output, files).with_context(|| format!("--out {}", args.output.display()))?;
    let (plan, points) = if args.merge.is_empty() {
        let req = SweepRequest {
            workload: args.workload.clone(),
            preset: args.preset.clone(),
            chip: args.chip.clone(),
            chips: args.chips.clone(),
            batches: parse_batches(args.batch.as_deref().unwrap_or_default())?,
            limits: args.limits.clone(),
            steps: args.steps,
            target: args.target,
            prices: args.price.clone(),
            set: args.set.clone(),
            bounds: tpusim_api::run::RunBounds {
                max_steps: args.max_steps,
                max_ids_per_step: args.max_ids,
            },
            max_configs: args.max_configs,
        };
        let shard = args.shard.as_deref().map(Shard::parse).transpose()?;
        let plan = plan(&req)?;
        let indices: Vec<usize> = match shard {
            Some(s) => s.indices(plan.configs.len()),
            None => (0..plan.configs.len()).collect(),
        };
        let bar = indicatif::ProgressBar::new(indices.len() as u64);
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let points = run_configs(&plan, &indices, args.jobs, &|| bar.inc(1))?;
        bar.finish_and_clear();
        if let Some(s) = shard {
            let path = write_shard(&args.output, &plan, s, points)?;
            if args.json {
                let v = serde_json::json!({"shard_file": path.display().to_string(), "shard": s.index,
                    "shards": s.count, "configurations": indices.len(), "of": plan.configs.len()});
                println!("{v}");
                return Ok(0);
            }
            println!(
                "wrote {} (shard {}/{}: {} of {} configurations); merge with `tpusim sweep --merge DIR... -o OUT`",
                path.display(),
                s.index,
                s.count,
                indices.len(),
                plan.configs.len()
            );
            return Ok(0);
        }
        (plan, points)
    } else {
        let (mut plan, mut points) = merge(&args.merge)?;
        set_target_and_prices(&mut plan, &mut points, args.target, &args.price)?;
        (plan, points)
    };
    // A configuration that could not be evaluated is an error, not a result (a misfit is a result).
    let failed: Vec<&tpusim_api::sweep::SweepPoint> = points.iter().filter(|p| p.error.is_some()).collect();
    let none_ran = !failed.is_empty() && failed.len() == points.len();
    // A sweep in which nothing ran has no figures to draw: it writes no file at all.
    if !none_ran {
        write_plan_outputs(&args.output, &plan, &points)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&sweep_json(&plan, &points)?)?);
    } else {
        print!("{}", summary_text(&plan, &points));
    }
    if !args.json && none_ran {
        println!("\nno configuration could run: no file written");
    } else if !args.json {
        println!(
            "\nwrote {}/sweep.csv, sweep.json, sweep.svg, step_time.svg, fit_map.svg (figures also as .png; {} configurations)",
            args.output.display(),
            points.len()
        );
    }
    for p in &failed {
        eprintln!(
            "error: {} x {} at batch {}: {}",
            p.chips,
            p.chip,
            p.batch,
            p.error.as_deref().unwrap_or("")
        );
    }
    // No configuration fits: the sweep's check failed (as `run` exits 1 on a misfit).
    let none_fits = !points.is_empty() && points.iter().all(|p| !p.fits);
    if none_fits && failed.len() < points.len() && !args.json {
        eprintln!("no configuration of the sweep fits (fit_reasons in sweep.csv and sweep.json)");
    }
    Ok(if failed.is_empty() && !none_fits {
        0
    } else if !failed.is_empty() && failed.len() == points.len() {
        2
    } else {
        1
    })
}
