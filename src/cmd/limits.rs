//! `tpusim limits`: compile-time checks, estimation from data, and validation before compiling.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use serde_json::json;
use sim_sparsecore::limits::estimate::{
    accumulate, consequences, consequences_from_observed, estimate_limits, observe,
};
use sim_sparsecore::limits::files::write_fdo_npz;
use sim_sparsecore::limits::{compile_check, CompileCase, FdoStats, LimitsFile};
use sim_sparsecore::preprocess::read_npz;
use tpusim_api::limits::{check_case, chip_params, validate, IdsSource, LimitsSource};

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
        #[arg(long, default_value_t = 0.1)]
        headroom: f64,
        /// Percentile of the per-batch maxima (100 = the maximum).
        #[arg(long, default_value_t = 100.0)]
        percentile: f64,
        /// Write the limits file (JSON, or TOML by extension).
        #[arg(short = 'o', long = "output")]
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
        } => estimate_cmd(&spec, &ids, headroom, percentile, output, fdo_out, json),
        LimitsCommand::Validate {
            spec,
            chip,
            limits,
            fdo,
            ids,
            json,
        } => validate_cmd(&spec, &chip, limits, fdo, &ids, json),
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
        let v = compile_check(&case, &params);
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

/// The NPZ files named: files as given, directories expanded to their `*.npz` files in name order
/// (not recursing), so the batch order, and every output, is the same on every run.
fn expand_npz_paths(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| p.display().to_string())?
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()
                .with_context(|| p.display().to_string())?;
            found.retain(|f| f.is_file() && f.extension().is_some_and(|e| e == "npz"));
            found.sort();
            if found.is_empty() {
                anyhow::bail!("{}: a directory without .npz files", p.display());
            }
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// `f` over `files` on the thread pool, results in file order; at most one batch per thread is in
/// flight (files go in groups of the pool's size), so memory stays bounded by the threads, not
/// by the number of files.
fn in_parallel<T: Send>(files: &[PathBuf], f: impl Fn(&PathBuf) -> anyhow::Result<T> + Sync) -> Vec<anyhow::Result<T>> {
    use rayon::prelude::*;
    let group = rayon::current_num_threads().max(1);
    let mut out = Vec::with_capacity(files.len());
    for chunk in files.chunks(group) {
        out.extend(chunk.par_iter().map(&f).collect::<Vec<_>>());
        if out.iter().any(|r| r.is_err()) {
            break;
        }
    }
    out
}

fn estimate_cmd(
    spec_path: &std::path::Path,
    ids: &[PathBuf],
    headroom: f64,
    percentile: f64,
    output: Option<PathBuf>,
    fdo_out: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<u8> {
    if !(percentile > 0.0 && percentile <= 100.0) {
        anyhow::bail!("--percentile must be in (0, 100], got {percentile}");
    }
    if !(headroom.is_finite() && headroom >= 0.0) {
        anyhow::bail!("--headroom must be a finite number >= 0, got {headroom}");
    }
    let spec = read_spec(spec_path)?;
    let files = expand_npz_paths(ids)?;
    // Progress on a terminal only: two passes over every file.
    let bar = indicatif::ProgressBar::new(2 * files.len() as u64);
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut stats = FdoStats::new();
    let mut observed_per_file = Vec::with_capacity(files.len());
    for observed in in_parallel(&files, |p| {
        let batch = read_npz(p).with_context(|| p.display().to_string())?;
        let o = observe(&spec, &batch).with_context(|| p.display().to_string())?;
        bar.inc(1);
        Ok(o)
    }) {
        let observed = observed?;
        observed_per_file.push(observed.clone());
        accumulate(&mut stats, observed);
    }
    let limits = estimate_limits(&stats, percentile, headroom, spec.num_sc_per_device as u64);
    // A batch whose statistics already decide what the limits do to it is not read again.
    let decided: Vec<Option<_>> = observed_per_file
        .iter()
        .map(|o| consequences_from_observed(&spec, &limits, o))
        .collect();
    let to_read: Vec<PathBuf> = files
        .iter()
        .zip(&decided)
        .filter(|(_, d)| d.is_none())
        .map(|(p, _)| p.clone())
        .collect();
    bar.inc((files.len() - to_read.len()) as u64);
    let mut reread = in_parallel(&to_read, |p| {
        let batch = read_npz(p).with_context(|| p.display().to_string())?;
        let c = consequences(&spec, &limits, &batch)?;
        bar.inc(1);
        Ok(c)
    })
    .into_iter();
    let consequences_per_file: Vec<anyhow::Result<_>> = decided
        .into_iter()
        .map(|d| match d {
            Some(c) => Ok(c),
            None => reread
                .next()
                .unwrap_or_else(|| Err(anyhow::anyhow!("a batch was not read"))),
        })
        .collect();
    let mut per_batch = Vec::new();
    for (p, c) in files.iter().zip(consequences_per_file) {
        per_batch.push((p.display().to_string(), c?));
    }
    bar.finish_and_clear();
    let mut file = LimitsFile {
        stacks: limits.clone(),
        ..Default::default()
    };
    file.source.insert("command".into(), "tpusim limits estimate".into());
    file.source.insert("spec".into(), spec_path.display().to_string());
    file.source.insert(
        "ids".into(),
        files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
    );
    file.source.insert("percentile".into(), percentile.to_string());
    file.source.insert("headroom".into(), headroom.to_string());
    if let Some(o) = &output {
        file.write(o)?;
    }
    if let Some(dir) = &fdo_out {
        std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
        write_fdo_npz(&dir.join("fdo_stats_0_0.npz"), &stats)?;
    }
    if json {
        println!(
            "{}",
            json!({"limits": file, "batches": per_batch.iter().map(|(p, c)| json!({"ids": p, "stacks": c})).collect::<Vec<_>>()})
        );
    } else {
        println!(
            "{:<24} {:>14} {:>16} {:>22}",
            "stack", "max_ids", "max_unique_ids", "suggested COO buffer"
        );
        for (k, l) in &limits {
            println!(
                "{k:<24} {:>14} {:>16} {:>22}",
                l.max_ids_per_partition,
                l.max_unique_ids_per_partition,
                l.suggested_coo_buffer_size_per_device.unwrap_or(0)
            );
        }
        println!("\nper batch with these limits (minibatches if minibatching is on / ids dropped if dropping is on):");
        for (p, c) in &per_batch {
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
) -> anyhow::Result<u8> {
    let spec = read_spec(spec_path)?;
    let source = match (limits_path, fdo) {
        (Some(p), _) => LimitsSource::File(p),
        (None, Some(d)) => LimitsSource::Fdo(d),
        (None, None) => LimitsSource::Spec,
    };
    let ids = ids.iter().cloned().map(IdsSource::Path).collect();
    let v = validate(&spec, &spec_path.display().to_string(), chip, &source, ids)?;
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
                "    suggested: max_ids_per_partition {}, max_unique_ids_per_partition {}",
                r["suggested"]["max_ids_per_partition"], r["suggested"]["max_unique_ids_per_partition"]
            );
        }
        println!(
            "HBM: tables + SparseCore stacks {hbm_total} B of {capacity} B on {chip_name}: {}",
            if hbm_fits { "fits" } else { "does NOT fit" }
        );
        println!("{}", if failed { "verdict: FAIL" } else { "verdict: OK" });
    }
    Ok(if failed { 1 } else { 0 })
}
