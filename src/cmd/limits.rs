//! `tpusim limits`: compile-time checks, estimation from data, and validation before compiling.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use serde_json::json;
use tpusim_api::limits::{
    check_case, chip_params, compile_verdict, estimate_json, estimate_with_progress, expand_sources, validate_with,
    write_fdo, CompileCase, IdsSource, LimitsSource, SuggestOptions,
};

use super::preprocess::read_spec;

/// Arguments of `tpusim limits`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: LimitsCommand,
}

#[derive(Subcommand)]
enum LimitsCommand {
    /// Will the XLA TPU compiler accept these limits? One f32 table on one device.
    CompileCheck {
        /// Chip: v4, v5p, v6e, tpu7x.
        #[arg(long)]
        chip: String,
        /// JSON output, one object per input line.
        #[arg(long)]
        json: bool,
        /// Read one spec per line from standard input.
        #[arg(long)]
        stdin: bool,
        /// {"kind": "fwd"|"grad_sgd", "vocab", "dim", "batch", "max_ids", "max_unique"}
        spec: Option<String>,
    },
    /// Limits per stack from real id batches (streamed, one batch in memory at a time).
    Estimate {
        /// SPEC.json (the preprocess contract).
        #[arg(long)]
        spec: PathBuf,
        /// Id batches (NPZ, the preprocess contract), or directories of them (their `*.npz` files in
        /// name order). Batches are read in parallel, a few at a time (memory stays bounded).
        #[arg(long, num_args = 1.., required = true)]
        ids: Vec<PathBuf>,
        /// Headroom over the observed value (0.1 = 10 %).
        #[arg(long, default_value_t = tpusim_api::limits::DEFAULT_HEADROOM)]
        headroom: f64,
        /// Percentile of the per-batch maxima (100 = the maximum).
        #[arg(long, default_value_t = tpusim_api::limits::DEFAULT_PERCENTILE)]
        percentile: f64,
        /// Write the limits file (JSON, or TOML by extension; `--output` is an alias).
        #[arg(short = 'o', long = "out", alias = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// Also write jax-tpu-embedding FDO stats (fdo_stats_0_0.npz) into this directory.
        #[arg(long)]
        fdo_out: Option<PathBuf>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// The verdict per stack: compile-time, HBM and, with data, run-time; exit 1 if a check fails.
    Validate {
        /// SPEC.json (the preprocess contract).
        #[arg(long)]
        spec: PathBuf,
        /// Chip: v4, v5p, v6e, tpu7x.
        #[arg(long)]
        chip: String,
        /// Limits file (JSON or TOML) overriding the spec's limits.
        #[arg(long, conflicts_with = "fdo")]
        limits: Option<PathBuf>,
        /// Directory of jax-tpu-embedding FDO stats (NPZ or CSV) to take limits from.
        #[arg(long)]
        fdo: Option<PathBuf>,
        /// Id batches to check the run-time behaviour on.
        #[arg(long, num_args = 1..)]
        ids: Vec<PathBuf>,
        /// JSON output for CI.
        #[arg(long)]
        json: bool,
        /// Headroom of the suggested limits over the observed value (as `limits estimate`).
        #[arg(long, default_value_t = tpusim_api::limits::DEFAULT_HEADROOM)]
        headroom: f64,
        /// Percentile of the per-batch maxima the suggestion starts from (as `limits estimate`).
        #[arg(long, default_value_t = tpusim_api::limits::DEFAULT_PERCENTILE)]
        percentile: f64,
    },
}

/// Runs `tpusim limits`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        LimitsCommand::CompileCheck {
            chip,
            json,
            stdin,
            spec,
        } => compile_check_cmd(&chip, json, stdin, spec),
        LimitsCommand::Estimate {
            spec,
            ids,
            headroom,
            percentile,
            output,
            fdo_out,
            json,
        } => estimate_cmd(
            &spec,
            &ids,
            SuggestOptions { percentile, headroom },
            output,
            fdo_out,
            json,
        ),
        LimitsCommand::Validate {
            spec,
            chip,
            limits,
            fdo,
            ids,
            json,
            headroom,
            percentile,
        } => validate_cmd(
            &spec,
            &chip,
            limits,
            fdo,
            &ids,
            json,
            SuggestOptions { percentile, headroom },
        ),
    }
}

fn compile_check_cmd(chip: &str, json: bool, stdin: bool, spec: Option<String>) -> anyhow::Result<u8> {
    let (_, params) = chip_params(chip)?;
    let mut lines: Vec<String> = spec.into_iter().collect();
    if stdin {
        for l in std::io::stdin().lock().lines() {
            let l = l?;
            if !l.trim().is_empty() {
                lines.push(l);
            }
        }
    }
    if lines.is_empty() {
        anyhow::bail!("no spec given: pass one as an argument or use --stdin");
    }
    let (mut failed, mut bad) = (false, false);
    for line in &lines {
        let case: CompileCase = match serde_json::from_str(line) {
            Ok(c) => c,
            Err(e) => {
                bad = true;
                if json {
                    println!("{}", json!({"input": line, "error": e.to_string()}));
                } else {
                    eprintln!("error: {line}: {e}");
                }
                continue;
            }
        };
        if let Err(e) = check_case(&case) {
            bad = true;
            eprintln!("error: {line}: {e}");
            continue;
        }
        let v = compile_verdict(&case, &params);
        failed |= !v.compiles;
        if json {
            println!("{}", serde_json::to_string(&v)?);
        } else {
            println!(
                "{} {}: {}",
                if v.compiles { "OK  " } else { "FAIL" },
                line.trim(),
                v.message
            );
        }
    }
    Ok(if bad {
        2
    } else if failed {
        1
    } else {
        0
    })
}

fn estimate_cmd(
    spec_path: &std::path::Path,
    ids: &[PathBuf],
    opts: SuggestOptions,
    output: Option<PathBuf>,
    fdo_out: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<u8> {
    opts.check()?;
    // Both outputs are checked before any batch is read; they are written together or not at all.
    if let Some(o) = &output {
        tpusim_api::output::check_writable(o).with_context(|| format!("-o {}", o.display()))?;
    }
    if let Some(dir) = &fdo_out {
        tpusim_api::output::check_dir(dir, &["fdo_stats_0_0.npz"])
            .with_context(|| format!("--fdo-out {}", dir.display()))?;
    }
    let spec = read_spec(spec_path)?;
    let sources: Vec<IdsSource> = ids.iter().cloned().map(IdsSource::Path).collect();
    let sources = expand_sources(&sources)?;
    // Progress on a terminal only: two passes over every batch.
    let bar = indicatif::ProgressBar::new(2 * sources.len() as u64);
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let e = estimate_with_progress(&spec, &spec_path.display().to_string(), &sources, opts, &|| bar.inc(1))?;
    bar.finish_and_clear();
    let (file, limits, per_batch) = (&e.file, &e.file.stacks, &e.batches);
    if let Some(o) = &output {
        file.write(o)?;
    }
    if let Some(dir) = &fdo_out {
        tpusim_api::output::create_dir_all(dir).with_context(|| dir.display().to_string())?;
        write_fdo(&dir.join("fdo_stats_0_0.npz"), &e)?;
    }
    if json {
        println!("{}", estimate_json(&e));
    } else {
        println!(
            "{:<24} {:>14} {:>16} {:>22}",
            "stack", "max_ids", "max_unique_ids", "suggested COO buffer"
        );
        for (k, l) in limits {
            println!(
                "{k:<24} {:>14} {:>16} {:>22}",
                l.max_ids_per_partition,
                l.max_unique_ids_per_partition,
                l.suggested_coo_buffer_size_per_device.unwrap_or(0)
            );
        }
        println!("\nper batch with these limits (minibatches if minibatching is on / ids dropped if dropping is on):");
        for (p, c) in per_batch {
            let parts: Vec<String> = c
                .iter()
                .map(|(k, v)| {
                    let mb = if v.minibatches == 0 {
                        "aborts even with minibatching".to_string()
                    } else {
                        format!("{} minibatch(es)", v.minibatches)
                    };
                    format!(
                        "{k}: {mb}, {} dropped{}",
                        v.dropped_ids,
                        if v.would_abort { ", aborts otherwise" } else { "" }
                    )
                })
                .collect();
            println!("  {p}: {}", parts.join("; "));
        }
        if let Some(o) = output {
            println!("\nwrote {}", o.display());
        }
    }
    Ok(0)
}

fn validate_cmd(
    spec_path: &std::path::Path,
    chip: &str,
    limits_path: Option<PathBuf>,
    fdo: Option<PathBuf>,
    ids: &[PathBuf],
    json: bool,
    opts: SuggestOptions,
) -> anyhow::Result<u8> {
    let spec = read_spec(spec_path)?;
    let source = match (limits_path, fdo) {
        (Some(p), _) => LimitsSource::File(p),
        (None, Some(d)) => LimitsSource::Fdo(d),
        (None, None) => LimitsSource::Spec,
    };
    let ids = ids.iter().cloned().map(IdsSource::Path).collect();
    let v = validate_with(&spec, &spec_path.display().to_string(), chip, &source, ids, opts)?;
    let failed = v.failed;
    let rows = v.json["stacks"].as_array().cloned().unwrap_or_default();
    let hbm = &v.json["hbm"];
    let (hbm_total, capacity, hbm_fits) = (
        hbm["bytes_needed"].as_u64().unwrap_or(0),
        hbm["capacity_bytes"].as_u64().unwrap_or(0),
        hbm["fits"].as_bool().unwrap_or(false),
    );
    let chip_name = v.json["chip"].as_str().unwrap_or("");
    if json {
        println!("{}", v.json);
    } else {
        println!(
            "{:<24} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8}  run-time",
            "stack", "max_ids", "unique", "fwd", "grad_sgd", "obs ids", "obs uniq"
        );
        for r in &rows {
            let verdict = |v: &serde_json::Value| {
                if v["compiles"].as_bool() == Some(true) {
                    "compiles".to_string()
                } else {
                    v["class"].as_str().unwrap_or("").to_string()
                }
            };
            let rt = r["runtime"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join("; "))
                .unwrap_or_default();
            println!(
                "{:<24} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8}  {}",
                r["stack"].as_str().unwrap_or(""),
                r["max_ids_per_partition"].as_u64().unwrap_or(0),
                r["max_unique_ids_per_partition"].as_u64().unwrap_or(0),
                verdict(&r["compile_fwd"]),
                verdict(&r["compile_grad_sgd"]),
                r["observed_max_ids"].as_u64().unwrap_or(0),
                r["observed_max_unique_ids"].as_u64().unwrap_or(0),
                if rt.is_empty() { "(no ids given)".into() } else { rt }
            );
            for k in ["compile_fwd", "compile_grad_sgd"] {
                if r[k]["compiles"].as_bool() == Some(false) {
                    println!("    {k}: {}", r[k]["message"].as_str().unwrap_or(""));
                }
            }
            println!(
                "    suggested: max_ids_per_partition {}, max_unique_ids_per_partition {} (percentile {}, headroom {})",
                r["suggested"]["max_ids_per_partition"],
                r["suggested"]["max_unique_ids_per_partition"],
                opts.percentile,
                opts.headroom
            );
        }
        println!(
            "HBM: tables + SparseCore stacks {} on {chip_name}: {}",
            tpusim_api::units::bytes_of(hbm_total, capacity),
            if hbm_fits { "fits" } else { "does NOT fit" }
        );
        println!("{}", if failed { "verdict: FAIL" } else { "verdict: OK" });
    }
    Ok(if failed { 1 } else { 0 })
}
