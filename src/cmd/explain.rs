//! `tpusim explain`: teaching views.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use workloads::{simulate, Pipelining, RunOptions, Workload};

/// Arguments of `tpusim explain`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Sequential and pipelined schedules of the same workload, with the staleness arrows.
    Pipelining {
        /// Workload preset.
        #[arg(long, default_value = "balanced")]
        preset: String,
        /// Steps to draw.
        #[arg(long, default_value_t = 6)]
        steps: u32,
        /// Where to write the picture (SVG).
        #[arg(long, required_unless_present = "html")]
        svg: Option<PathBuf>,
        /// Write the interactive lesson into this directory (DIR/index.html, self-contained: sliders
        /// for TensorCore, SparseCore and host time, steps in flight and the schedule; every
        /// position is an engine run computed now).
        #[arg(long, value_name = "DIR")]
        html: Option<PathBuf>,
    },
    /// Walks one batch through COO conversion, sharding, dedup and counting.
    Limits {
        /// SPEC.json (the preprocess contract).
        #[arg(long)]
        spec: PathBuf,
        /// IDS.npz.
        #[arg(long)]
        ids: PathBuf,
    },
}

/// Runs `tpusim explain`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.what {
        What::Pipelining {
            preset,
            steps,
            svg,
            html,
        } => {
            if let Some(dir) = &html {
                let page = lesson_page()?;
                std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
                let path = dir.join("index.html");
                sim_core::output::write_atomic(&path, page).with_context(|| path.display().to_string())?;
                println!("lesson: {} (open it in a browser; it needs no network)", path.display());
                if svg.is_none() {
                    return Ok(0);
                }
            }
            let Some(svg) = svg else { return Ok(0) };
            let mut w = Workload::preset(&preset)?;
            w.steps = steps.max(3);
            w.pipelining = Pipelining::Sequential;
            let seq = simulate(&w, &RunOptions::default())?;
            w.pipelining = Pipelining::Pipelined;
            let pip = simulate(&w, &RunOptions::default())?;
            let title = format!(
                "{}: sequential vs pipelined ({:.2}x)",
                w.name,
                seq.summary.step_time_us / pip.summary.step_time_us
            );
            let text = reports::gantt_svg(
                &[
                    ("sequential", &seq.recorder, seq.summary.step_time_us),
                    ("pipelined", &pip.recorder, pip.summary.step_time_us),
                ],
                &title,
            );
            sim_core::output::write_atomic(&svg, text).with_context(|| svg.display().to_string())?;
            println!("Each step runs SC forward (SC/F), TC forward and backward (TC/F, TC/B) and SC backward (SC/B).");
            println!(
                "sequential: SC/F of step i+1 waits for SC/B of step i        -> {:.1} us per step",
                seq.summary.step_time_us
            );
            println!(
                "pipelined:  SC/F of step i+1 waits only for SC/B of step i-1 -> {:.1} us per step",
                pip.summary.step_time_us
            );
            println!(
                "            so step i+1 looks up tables that miss step i's update: gradients arrive two steps late."
            );
            println!("picture: {}", svg.display());
            Ok(0)
        }
        What::Limits { spec, ids } => explain_limits(&spec, &ids),
    }
}

/// The lesson page: the default slider grid run on the engine, embedded as JSON.
pub fn lesson_page() -> anyhow::Result<String> {
    let grid = workloads::lesson::run_grid(&workloads::lesson::LessonAxes::default())?;
    Ok(reports::lesson_html(&serde_json::to_string(&grid)?))
}

fn explain_limits(spec_path: &std::path::Path, ids_path: &std::path::Path) -> anyhow::Result<u8> {
    use sim_sparsecore::preprocess::{build_stacks, preprocess, read_npz, Options};
    let spec = super::preprocess::read_spec(spec_path)?;
    let ids = read_npz(ids_path).with_context(|| ids_path.display().to_string())?;
    let num_scs = spec.num_scs();
    println!(
        "1. COO: every id of every sample becomes (sample, column, gain); {} SparseCores in all.",
        num_scs
    );
    println!("2. Sharding (mod): column c goes to partition c mod {num_scs}, local row c / {num_scs}.");
    println!(
        "3. Each SparseCore takes 1/{} of the device's samples, sorts its ids by (partition, row, sample)",
        spec.num_sc_per_device
    );
    println!("   and merges repeats of an id within one sample (their gains add).");
    println!(
        "4. Counting per (source SparseCore, partition): ids after dedup and unique rows. The maxima are the limits.\n"
    );
    let mut open = spec.clone();
    open.allow_id_dropping = true;
    open.enable_minibatching = false;
    let out = preprocess(&open, &ids, Options { stats_only: true })?;
    for (stack, o) in &out.stacks {
        let st = build_stacks(&spec).into_iter().find(|s| &s.name == stack);
        let (lim, ulim) = st.map_or((0, 0), |s| (s.max_ids_per_partition, s.max_unique_ids_per_partition));
        println!("stack {stack} (limits: max_ids {lim}, max_unique {ulim})");
        println!("  partition        max ids   max unique");
        for (p, (a, b)) in o
            .max_ids_per_partition
            .iter()
            .zip(&o.max_unique_ids_per_partition)
            .enumerate()
        {
            let flag = if *a > lim || *b > ulim {
                "  <- over the limit"
            } else {
                ""
            };
            println!("  {p:>9} {a:>14} {b:>12}{flag}");
        }
        println!("  ids per SparseCore after dedup: {:?}", o.ids_per_sc);
        println!(
            "  required COO buffer per SparseCore (each partition rounded up to 8): {:?}\n",
            o.required_buffer_sizes
        );
    }
    Ok(0)
}
