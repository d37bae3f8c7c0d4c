//! `tpusim explain`: teaching views.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use tpusim_api::explain::{lesson_page, limits_json_file, limits_walk, write_pipelining_figure, STALENESS};
use tpusim_api::units::duration_us;

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
        /// Where to write the picture: the SVG, and the PNG beside it with the same basename (a path
        /// ending in .png names the same pair). `--svg` is an alias.
        #[arg(
            short = 'o',
            long = "out",
            alias = "svg",
            value_name = "FILE",
            required_unless_present = "html"
        )]
        svg: Option<PathBuf>,
        /// Write the interactive lesson into this directory (DIR/index.html, self-contained: sliders
        /// for TensorCore, SparseCore and host time, steps in flight and the schedule; every
        /// position is an engine run computed now).
        #[arg(long, value_name = "DIR")]
        html: Option<PathBuf>,
        /// Print the step times and the speedup as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Walks one batch through COO conversion, sharding, dedup and counting.
    Limits {
        /// SPEC.json (the preprocess contract).
        #[arg(long)]
        spec: PathBuf,
        /// IDS.npz.
        #[arg(long)]
        ids: PathBuf,
        /// Print the per-partition counts as JSON.
        #[arg(long)]
        json: bool,
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
            json,
        } => {
            // Every output is checked before the runs; they are written together or not at all.
            if let Some(dir) = &html {
                tpusim_api::output::check_dir(dir, &["index.html"])
                    .with_context(|| format!("--html {}", dir.display()))?;
            }
            if let Some(p) = &svg {
                tpusim_api::output::check_writable(p).with_context(|| format!("--out {}", p.display()))?;
            }
            if let Some(dir) = &html {
                let page = lesson_page()?;
                tpusim_api::output::create_dir_all(dir).with_context(|| dir.display().to_string())?;
                let path = dir.join("index.html");
                tpusim_api::output::write_atomic(&path, page).with_context(|| path.display().to_string())?;
                println!("lesson: {} (open it in a browser; it needs no network)", path.display());
                if svg.is_none() {
                    return Ok(0);
                }
            }
            let Some(svg) = svg else { return Ok(0) };
            let runs = tpusim_api::explain::pipelining_runs(&preset, steps)?;
            let (seq, pip) = (&runs.sequential, &runs.pipelined);
            let (svg, png) = write_pipelining_figure(&runs, &svg)?;
            if json {
                let mut v = tpusim_api::explain::pipelining_json(&runs);
                v["svg"] = svg.display().to_string().into();
                v["png"] = png.display().to_string().into();
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(0);
            }
            println!("Each step runs SC forward (SC/F), TC forward and backward (TC/F, TC/B) and SC backward (SC/B).");
            println!(
                "sequential: SC/F of step i+1 waits for SC/B of step i        -> {} per step",
                duration_us(seq.summary.step_time_us)
            );
            println!(
                "pipelined:  SC/F of step i+1 waits only for SC/B of step i-1 -> {} per step",
                duration_us(pip.summary.step_time_us)
            );
            println!(
                "            so step i+1 looks up tables that miss step i's update: embeddings are {}.",
                STALENESS
            );
            println!("picture: {} and {}", svg.display(), png.display());
            Ok(0)
        }
        What::Limits { spec, ids, json } => {
            if json {
                let spec = super::preprocess::read_spec(&spec)?;
                println!("{}", serde_json::to_string_pretty(&limits_json_file(&spec, &ids)?)?);
                return Ok(0);
            }
            explain_limits(&spec, &ids)
        }
    }
}

fn explain_limits(spec_path: &std::path::Path, ids_path: &std::path::Path) -> anyhow::Result<u8> {
    let spec = super::preprocess::read_spec(spec_path)?;
    let walk = limits_walk(&spec, ids_path)?;
    let num_scs = walk.num_scs;
    println!(
        "1. COO: every id of every sample becomes (sample, column, gain); {} SparseCores in all.",
        num_scs
    );
    println!("2. Sharding (mod): column c goes to partition c mod {num_scs}, local row c / {num_scs}.");
    println!(
        "3. Each SparseCore takes 1/{} of the device's samples, sorts its ids by (partition, row, sample)",
        walk.num_sc_per_device
    );
    println!("   and merges repeats of an id within one sample (their gains add).");
    println!(
        "4. Counting per (source SparseCore, partition): ids after dedup and unique rows. The maxima are the limits.\n"
    );
    for st in &walk.stacks {
        let (stack, o) = (&st.stack, &st.output);
        let (lim, ulim) = (st.max_ids_per_partition, st.max_unique_ids_per_partition);
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
