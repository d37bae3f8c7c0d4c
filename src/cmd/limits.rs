//! `tpusim limits`: compile-time checks, estimation from data, and validation before compiling.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use serde_json::json;
use sim_sparsecore::limits::estimate::{accumulate, consequences, estimate_limits, observe};
use sim_sparsecore::limits::files::{limits_from_fdo, load_fdo_dir, write_fdo_npz};
use sim_sparsecore::limits::hbm::{sparsecore_hbm, StackHbmInput};
use sim_sparsecore::limits::{
    compile_check, CompileCase, FdoStats, LimitsFile, ProgramKind, ScCompileParams, StackLimit,
};
use sim_sparsecore::preprocess::{build_stacks, read_npz};
use sim_tpu::chips::{Chip, ChipSpec};

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
        /// Id batches (NPZ, the preprocess contract).
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

/// The SparseCore facts of a chip the compile-time verdict needs.
pub fn compile_params(chip: &ChipSpec) -> anyhow::Result<ScCompileParams> {
    if chip.sparsecores_per_chip == 0 {
        anyhow::bail!("{} has no SparseCores", chip.name);
    }
    Ok(ScCompileParams {
        num_sc_per_device: chip.sc_per_device() as u64,
        tilespmem_bytes: chip.sc_tilespmem_bytes_available,
        spmem_fixed_overhead_bytes: chip.sc_spmem_fixed_overhead_bytes,
    })
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
    let chip = Chip::preset(chip)?.spec;
    let params = compile_params(&chip)?;
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
        if case.dim == 0 || case.vocab == 0 || case.batch == 0 || case.max_ids == 0 || case.max_unique == 0 {
            bad = true;
            eprintln!("error: {line}: vocab, dim, batch, max_ids and max_unique must be positive");
            continue;
        }
        // Keeps every byte count of the model inside u64 (the largest real values are ~2^30).
        const MAX_VALUE: u64 = 1 << 40;
        if [case.vocab, case.dim, case.batch, case.max_ids, case.max_unique]
            .iter()
            .any(|&v| v > MAX_VALUE)
        {
            bad = true;
            eprintln!("error: {line}: vocab, dim, batch, max_ids and max_unique must be at most {MAX_VALUE}");
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
    let mut stats = FdoStats::new();
    for p in ids {
        let batch = read_npz(p).with_context(|| p.display().to_string())?;
        accumulate(
            &mut stats,
            observe(&spec, &batch).with_context(|| p.display().to_string())?,
        );
    }
    let limits = estimate_limits(&stats, percentile, headroom, spec.num_sc_per_device as u64);
    let mut per_batch = Vec::new();
    for p in ids {
        let batch = read_npz(p).with_context(|| p.display().to_string())?;
        per_batch.push((p.display().to_string(), consequences(&spec, &limits, &batch)?));
    }
    let mut file = LimitsFile {
        stacks: limits.clone(),
        ..Default::default()
    };
    file.source.insert("command".into(), "tpusim limits estimate".into());
    file.source.insert("spec".into(), spec_path.display().to_string());
    file.source.insert(
        "ids".into(),
        ids.iter()
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
    let chip = Chip::preset(chip)?.spec;
    let params = compile_params(&chip)?;
    if spec.num_sc_per_device as u64 != params.num_sc_per_device {
        anyhow::bail!(
            "{}: num_sc_per_device is {}, but a {} device has {} SparseCores",
            spec_path.display(),
            spec.num_sc_per_device,
            chip.name,
            params.num_sc_per_device
        );
    }
    let overrides: BTreeMap<String, StackLimit> = match (&limits_path, &fdo) {
        (Some(p), _) => LimitsFile::read(p)?.stacks,
        (None, Some(d)) => limits_from_fdo(&load_fdo_dir(d)?, spec.num_sc_per_device as u64),
        (None, None) => BTreeMap::new(),
    };
    let spec = sim_sparsecore::limits::estimate::apply_limits(&spec, &overrides);
    let stacks = build_stacks(&spec);
    let mut observed: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut runtime: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut runtime_fail = false;
    for p in ids {
        let batch = read_npz(p).with_context(|| p.display().to_string())?;
        for (k, s) in observe(&spec, &batch)? {
            let o = observed.entry(k).or_default();
            o.0 = o.0.max(s.max_ids.iter().flatten().copied().max().unwrap_or(0) as u64);
            o.1 =
                o.1.max(s.max_unique_ids.iter().flatten().copied().max().unwrap_or(0) as u64);
        }
        let current: BTreeMap<String, StackLimit> = stacks
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    StackLimit {
                        max_ids_per_partition: s.max_ids_per_partition as u64,
                        max_unique_ids_per_partition: s.max_unique_ids_per_partition as u64,
                        suggested_coo_buffer_size_per_device: s.suggested_coo_buffer_size_per_device,
                    },
                )
            })
            .collect();
        for (k, c) in consequences(&spec, &current, &batch)? {
            let text = if !c.would_abort {
                "ok".to_string()
            } else if spec.enable_minibatching && c.minibatches > 0 {
                format!("needs {} minibatches", c.minibatches)
            } else if spec.allow_id_dropping {
                format!("drops {} ids", c.dropped_ids)
            } else {
                runtime_fail = true;
                let mb = if c.minibatches > 0 {
                    format!("needs {} minibatches with minibatching", c.minibatches)
                } else {
                    "aborts even with minibatching".to_string()
                };
                format!(
                    "would abort: {} ({mb}; drops {} ids with dropping)",
                    c.abort_message.as_deref().unwrap_or("a limit is exceeded"),
                    c.dropped_ids
                )
            };
            runtime.entry(k).or_default().push(format!("{}: {text}", p.display()));
        }
    }
    let devices_batch = |s: &sim_sparsecore::preprocess::Stack| -> u64 {
        s.features
            .iter()
            .map(|f| spec.features[f.feature].input_shape[0] / spec.local_device_count as u64)
            .sum()
    };
    let mut rows = Vec::new();
    let mut failed = runtime_fail;
    // The one HBM sizing `tpusim run` uses: every chip holds 1/chips of each table (rows padded to the
    // DMA granule; slots unknown here, so SGD's none), plus the SparseCore stacks all live at once.
    let devices_per_chip = (chip.sparsecores_per_chip / chip.sc_per_device().max(1)).max(1) as u64;
    let chips = (spec.global_device_count as u64 / devices_per_chip).max(1);
    let hbm_inputs: Vec<StackHbmInput> = stacks
        .iter()
        .map(|s| StackHbmInput::from_stack(&spec, s, 4, 0))
        .collect();
    let sizing = sparsecore_hbm(&hbm_inputs, chips, chip.sc_dma_granule_bytes, 0);
    let hbm_total = sizing.total_bytes();
    for (si, s) in stacks.iter().enumerate() {
        let case = |kind| CompileCase {
            kind,
            // Each device holds its shard of the stack.
            vocab: s.stack_vocab_size.div_ceil(spec.global_device_count as u64),
            dim: s.stack_embedding_dim,
            batch: devices_batch(s),
            max_ids: s.max_ids_per_partition as u64,
            max_unique: s.max_unique_ids_per_partition as u64,
        };
        let fwd = compile_check(&case(ProgramKind::Fwd), &params);
        let bwd = compile_check(&case(ProgramKind::GradSgd), &params);
        failed |= !fwd.compiles || !bwd.compiles;
        let first_table: usize = stacks[..si].iter().map(|x| x.tables.len()).sum();
        let table_bytes: u64 = sizing.tables[first_table..first_table + s.tables.len()]
            .iter()
            .map(|t| t.1)
            .sum();
        let stack_bytes = sizing.stack_estimates[si].1.max(sizing.stack_estimates[si].2);
        let (obs_ids, obs_unique) = observed.get(&s.name).copied().unwrap_or((0, 0));
        let suggest = |obs: u64, largest: u64| {
            if obs > 0 {
                (obs.div_ceil(8) * 8).min(largest)
            } else {
                largest
            }
        };
        // Suggested limits: the observed maxima rounded up to 8, within what compiles; the unique
        // limit is searched with the suggested max_ids in place (a huge max_ids would leave none).
        let suggested_ids = suggest(obs_ids, fwd.largest_max_ids.min(bwd.largest_max_ids));
        let with_ids = |kind| CompileCase {
            max_ids: suggested_ids.max(1),
            max_unique: (s.max_unique_ids_per_partition as u64).min(suggested_ids.max(1)),
            ..case(kind)
        };
        let largest_unique = compile_check(&with_ids(ProgramKind::Fwd), &params)
            .largest_max_unique
            .min(compile_check(&with_ids(ProgramKind::GradSgd), &params).largest_max_unique)
            .min(suggested_ids);
        let suggested_unique = suggest(obs_unique, largest_unique);
        rows.push(json!({
            "stack": s.name,
            "max_ids_per_partition": s.max_ids_per_partition,
            "max_unique_ids_per_partition": s.max_unique_ids_per_partition,
            "compile_fwd": fwd,
            "compile_grad_sgd": bwd,
            "hbm_table_bytes_per_chip": table_bytes,
            "hbm_stack_bytes": stack_bytes,
            "observed_max_ids": obs_ids,
            "observed_max_unique_ids": obs_unique,
            "runtime": runtime.get(&s.name).cloned().unwrap_or_default(),
            "suggested": {
                "max_ids_per_partition": suggested_ids,
                "max_unique_ids_per_partition": suggested_unique,
            },
        }));
    }
    let hbm_fits = hbm_total <= chip.hbm_bytes;
    failed |= !hbm_fits;
    if json {
        println!(
            "{}",
            json!({"chip": chip.name, "ok": !failed, "hbm": {"bytes_needed": hbm_total, "capacity_bytes": chip.hbm_bytes, "fits": hbm_fits}, "stacks": rows})
        );
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
            "HBM: tables + SparseCore stacks {hbm_total} B of {} B on {}: {}",
            chip.hbm_bytes,
            chip.name,
            if hbm_fits { "fits" } else { "does NOT fit" }
        );
        println!("{}", if failed { "verdict: FAIL" } else { "verdict: OK" });
    }
    Ok(if failed { 1 } else { 0 })
}
