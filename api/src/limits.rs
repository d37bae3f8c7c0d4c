//! `tpusim limits compile-check --json` and `tpusim limits validate --json`: the compile-time verdict
//! of one case, and the verdict per stack of a spec (compile-time, HBM, run-time on id batches).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::{json, Value};
use sim_sparsecore::limits::estimate::{
    accumulate, apply_limits, consequences, consequences_from_observed, estimate_limits, observe, BatchConsequence,
};
use sim_sparsecore::limits::files::{limits_from_fdo, load_fdo_dir, FdoStats};
use sim_sparsecore::limits::hbm::{sparsecore_hbm, StackHbmInput};
use sim_sparsecore::limits::{compile_check as check, stack_compile_case, LimitsFile, ProgramKind, StackLimit};

pub use sim_sparsecore::limits::{CompileCase, CompileVerdict, ScCompileParams};
use sim_sparsecore::preprocess::{build_stacks, BatchIds, PreprocessSpec};
use sim_tpu::chips::{Chip, ChipSpec};

/// The SparseCore facts of a chip the compile-time verdict needs.
pub fn compile_params(chip: &ChipSpec) -> crate::Result<ScCompileParams> {
    if chip.sparsecores_per_chip == 0 {
        return Err(anyhow::anyhow!("{} has no SparseCores", chip.name).into());
    }
    Ok(ScCompileParams {
        num_sc_per_device: chip.sc_per_device() as u64,
        tilespmem_bytes: chip.sc_tilespmem_bytes_available,
        scratchpad_bytes: chip.sc_tilespmem_scratchpad_bytes,
        spmem_fixed_overhead_bytes: chip.sc_spmem_fixed_overhead_bytes,
        simd_lanes_f32: u64::from(chip.sc_simd_lanes_f32),
    })
}

/// The chip preset and its compile parameters.
pub fn chip_params(chip: &str) -> crate::Result<(ChipSpec, ScCompileParams)> {
    let spec = Chip::preset(chip).map_err(anyhow::Error::from)?.spec;
    let params = compile_params(&spec)?;
    Ok((spec, params))
}

/// Parses one compile-check case (`{"kind", "vocab", "dim", "batch", "max_ids", "max_unique"}`).
pub fn parse_case(text: &str) -> crate::Result<CompileCase> {
    let case: CompileCase = serde_json::from_str(text).map_err(anyhow::Error::from)?;
    check_case(&case)?;
    Ok(case)
}

/// Checks a case's values are in the range the model handles.
pub fn check_case(case: &CompileCase) -> crate::Result<()> {
    if case.dim == 0 || case.vocab == 0 || case.batch == 0 || case.max_ids == 0 || case.max_unique == 0 {
        return Err(anyhow::anyhow!("vocab, dim, batch, max_ids and max_unique must be positive").into());
    }
    // Keeps every byte count of the model inside u64 (the largest real values are ~2^30).
    const MAX_VALUE: u64 = 1 << 40;
    if [case.vocab, case.dim, case.batch, case.max_ids, case.max_unique]
        .iter()
        .any(|&v| v > MAX_VALUE)
    {
        return Err(anyhow::anyhow!("vocab, dim, batch, max_ids and max_unique must be at most {MAX_VALUE}").into());
    }
    Ok(())
}

/// Will the XLA TPU compiler accept this case, checked with [`check_case`], on a chip with these
/// SparseCore facts ([`chip_params`])?
pub fn compile_verdict(case: &CompileCase, params: &ScCompileParams) -> CompileVerdict {
    check(case, params)
}

/// Writes an estimate's statistics as jax-tpu-embedding FDO stats (`fdo_stats_0_0.npz`) at `path`.
pub fn write_fdo(path: &std::path::Path, e: &Estimate) -> crate::Result<()> {
    Ok(sim_sparsecore::limits::files::write_fdo_npz(path, &e.stats).map_err(anyhow::Error::from)?)
}

/// Will the XLA TPU compiler accept this case on `chip`? (one `compile-check --json` line)
pub fn compile_check(case_text: &str, chip: &str) -> crate::Result<CompileVerdict> {
    let (_, params) = chip_params(chip)?;
    let case = parse_case(case_text)?;
    Ok(check(&case, &params))
}

/// Where `validate` takes limits from, overriding the spec's own.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LimitsSource {
    /// The spec's limits.
    #[default]
    Spec,
    /// A limits file (JSON or TOML).
    File(PathBuf),
    /// A directory of jax-tpu-embedding FDO stats (NPZ or CSV).
    Fdo(PathBuf),
}

/// One id batch to check the run-time behaviour on.
#[derive(Clone, Debug)]
pub enum IdsSource {
    /// An NPZ file, read when its turn comes (one batch in memory at a time).
    Path(PathBuf),
    /// Ids already in memory, with the label the verdicts name them by.
    Batch {
        /// Label in the run-time verdicts (the CLI uses the path).
        label: String,
        /// The ids.
        ids: BatchIds,
    },
}

impl IdsSource {
    /// The batch and its label (a path is read now, its arrays' shapes checked against `spec`).
    fn load(&self, spec: &PreprocessSpec) -> anyhow::Result<(String, BatchIds)> {
        let (label, batch) = self.read(spec)?;
        sim_sparsecore::crosscheck::check_vocabulary(spec, &batch).with_context(|| label.clone())?;
        Ok((label, batch))
    }

    fn read(&self, spec: &PreprocessSpec) -> anyhow::Result<(String, BatchIds)> {
        match self {
            IdsSource::Path(p) => {
                sim_sparsecore::crosscheck::check_npz_shapes(spec, p)?;
                let batch = sim_sparsecore::preprocess::read_npz(p).with_context(|| p.display().to_string())?;
                Ok((p.display().to_string(), batch))
            }
            IdsSource::Batch { label, ids } => Ok((label.clone(), ids.clone())),
        }
    }
}

/// Headroom over the observed maxima that `limits estimate` and `limits validate` suggest by default.
pub const DEFAULT_HEADROOM: f64 = 0.1;
/// Percentile of the per-batch maxima limits are suggested at by default (100: the maximum).
pub const DEFAULT_PERCENTILE: f64 = 100.0;

/// How limits are suggested from observed data. `limits estimate` and `limits validate` both go
/// through [`suggest_limits`] with these, so the same data and headroom give the same limits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SuggestOptions {
    /// Percentile of the per-batch maxima, in (0, 100].
    pub percentile: f64,
    /// Headroom over the observed value (0.1 = 10 %), finite and >= 0.
    pub headroom: f64,
}

impl Default for SuggestOptions {
    fn default() -> Self {
        SuggestOptions {
            percentile: DEFAULT_PERCENTILE,
            headroom: DEFAULT_HEADROOM,
        }
    }
}

impl SuggestOptions {
    /// Checks the values are in range (errors name the CLI flags).
    pub fn check(&self) -> crate::Result<()> {
        if !(self.percentile > 0.0 && self.percentile <= 100.0) {
            return Err(anyhow::anyhow!("--percentile must be in (0, 100], got {}", self.percentile).into());
        }
        if !(self.headroom.is_finite() && self.headroom >= 0.0) {
            return Err(anyhow::anyhow!("--headroom must be a finite number >= 0, got {}", self.headroom).into());
        }
        Ok(())
    }
}

/// Limits per stack from observed statistics: the percentile of the per-batch maxima times
/// (1 + headroom), rounded up to 8, and the suggested COO buffer. The one source of suggested limits.
pub fn suggest_limits(spec: &PreprocessSpec, stats: &FdoStats, opts: SuggestOptions) -> BTreeMap<String, StackLimit> {
    estimate_limits(stats, opts.percentile, opts.headroom, spec.num_sc_per_device as u64)
}

/// What `limits estimate` found.
#[derive(Clone, Debug)]
pub struct Estimate {
    /// The observed statistics (what `--fdo-out` writes).
    pub stats: FdoStats,
    /// The suggested limits, as a limits file with its sources.
    pub file: LimitsFile,
    /// Per batch (label), what those limits do to it per stack.
    pub batches: Vec<(String, BTreeMap<String, BatchConsequence>)>,
}

/// `limits estimate`: observes every batch (one in memory at a time), suggests limits with
/// [`suggest_limits`], and runs every batch again under them.
pub fn estimate(
    spec: &PreprocessSpec,
    spec_origin: &str,
    ids: &[IdsSource],
    opts: SuggestOptions,
) -> crate::Result<Estimate> {
    estimate_with_progress(spec, spec_origin, &expand_sources(ids)?, opts, &|| {})
}

/// Directories among `ids` replaced by the `.npz` files in them, sorted by name (a directory without
/// any is an error naming it).
pub fn expand_sources(ids: &[IdsSource]) -> crate::Result<Vec<IdsSource>> {
    let mut out = Vec::new();
    for s in ids {
        match s {
            IdsSource::Path(p) if p.is_dir() => {
                let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                    .with_context(|| p.display().to_string())?
                    .map(|e| e.map(|e| e.path()))
                    .collect::<Result<_, _>>()
                    .with_context(|| p.display().to_string())?;
                found.retain(|f| f.is_file() && f.extension().is_some_and(|e| e == "npz"));
                found.sort();
                if found.is_empty() {
                    return Err(anyhow::anyhow!("{}: a directory without .npz files", p.display()).into());
                }
                out.extend(found.into_iter().map(IdsSource::Path));
            }
            other => out.push(other.clone()),
        }
    }
    Ok(out)
}

/// Runs `f` over `sources` a pool's worth at a time (so at most that many batches are in memory),
/// results in input order; stops after the first group with an error.
fn in_parallel<T: Send>(
    sources: &[&IdsSource],
    f: impl Fn(&IdsSource) -> anyhow::Result<T> + Sync,
) -> Vec<anyhow::Result<T>> {
    use rayon::prelude::*;
    let group = rayon::current_num_threads().max(1);
    let mut out = Vec::with_capacity(sources.len());
    for chunk in sources.chunks(group) {
        out.extend(chunk.par_iter().map(|s| f(s)).collect::<Vec<_>>());
        if out.iter().any(|r| r.is_err()) {
            break;
        }
    }
    out
}

/// [`estimate`] over already expanded sources (see [`expand_sources`]), calling `tick` twice per
/// source (once per pass) for a progress display. Batches are read in parallel a pool's worth at a
/// time; a batch whose statistics already decide what the limits do to it is not read again.
pub fn estimate_with_progress(
    spec: &PreprocessSpec,
    spec_origin: &str,
    sources: &[IdsSource],
    opts: SuggestOptions,
    tick: &(dyn Fn() + Sync),
) -> crate::Result<Estimate> {
    opts.check()?;
    let all: Vec<&IdsSource> = sources.iter().collect();
    let mut stats = FdoStats::new();
    let mut observed = Vec::with_capacity(all.len());
    for r in in_parallel(&all, |s| {
        let (label, batch) = s.load(spec)?;
        let o = observe(spec, &batch).with_context(|| label.clone())?;
        tick();
        Ok((label, o))
    }) {
        let (label, o) = r?;
        accumulate(&mut stats, o.clone());
        observed.push((label, o));
    }
    let limits = suggest_limits(spec, &stats, opts);
    let decided: Vec<_> = observed
        .iter()
        .map(|(_, o)| consequences_from_observed(spec, &limits, o))
        .collect();
    let to_read: Vec<&IdsSource> = all
        .iter()
        .zip(&decided)
        .filter(|(_, d)| d.is_none())
        .map(|(s, _)| *s)
        .collect();
    for _ in to_read.len()..all.len() {
        tick();
    }
    let mut reread = in_parallel(&to_read, |s| {
        let (label, batch) = s.load(spec)?;
        let c = consequences(spec, &limits, &batch).with_context(|| label.clone())?;
        tick();
        Ok(c)
    })
    .into_iter();
    let mut batches = Vec::with_capacity(observed.len());
    for ((label, _), d) in observed.into_iter().zip(decided) {
        let c = match d {
            Some(c) => c,
            None => reread
                .next()
                .unwrap_or_else(|| Err(anyhow::anyhow!("a batch was not read")))?,
        };
        batches.push((label, c));
    }
    let labels: Vec<&str> = batches.iter().map(|(l, _)| l.as_str()).collect();
    let mut file = LimitsFile {
        stacks: limits,
        ..Default::default()
    };
    file.source.insert("command".into(), "tpusim limits estimate".into());
    file.source.insert("spec".into(), spec_origin.to_string());
    file.source.insert("ids".into(), labels.join(" "));
    file.source.insert("percentile".into(), opts.percentile.to_string());
    file.source.insert("headroom".into(), opts.headroom.to_string());
    Ok(Estimate { stats, file, batches })
}

/// The `limits estimate --json` object: `{"limits": <limits file>, "batches": [{"ids", "stacks"}]}`.
pub fn estimate_json(e: &Estimate) -> Value {
    json!({
        "limits": e.file,
        "batches": e.batches.iter().map(|(p, c)| json!({"ids": p, "stacks": c})).collect::<Vec<_>>(),
    })
}

/// The verdict of `limits validate`.
#[derive(Clone, Debug)]
pub struct Validation {
    /// Whether a check fails (the CLI exits 1).
    pub failed: bool,
    /// The `--json` object: `{"chip", "ok", "suggestion": {"percentile", "headroom"}, "hbm": {...},
    /// "stacks": [...]}`.
    pub json: Value,
}

/// Validates a spec's limits on a chip: compile-time per stack (lookup and backward), HBM (tables and
/// SparseCore stacks), the run-time behaviour on each batch, and suggested limits (default
/// percentile and headroom, as `limits estimate`'s). `spec_origin` names the spec in errors.
pub fn validate(
    spec: &PreprocessSpec,
    spec_origin: &str,
    chip: &str,
    limits: &LimitsSource,
    ids: Vec<IdsSource>,
) -> crate::Result<Validation> {
    validate_with(spec, spec_origin, chip, limits, ids, SuggestOptions::default())
}

/// [`validate`] with limits suggested at this percentile and headroom ([`suggest_limits`], then
/// capped at what compiles).
pub fn validate_with(
    spec: &PreprocessSpec,
    spec_origin: &str,
    chip: &str,
    limits: &LimitsSource,
    ids: Vec<IdsSource>,
    opts: SuggestOptions,
) -> crate::Result<Validation> {
    opts.check()?;
    Ok(validate_inner(spec, spec_origin, chip, limits, ids, opts)?)
}

/// What id batches show against a spec's stacks: per stack the largest ids and unique ids seen, the
/// run-time verdict per batch, whether any batch would abort, and the statistics for suggestions.
struct Observed {
    observed: BTreeMap<String, (u64, u64)>,
    runtime: BTreeMap<String, Vec<String>>,
    runtime_fail: bool,
    stats: FdoStats,
}

/// Reads each id source and checks it against the stacks' current limits.
fn observe_batches(
    spec: &PreprocessSpec,
    stacks: &[sim_sparsecore::preprocess::Stack],
    ids: Vec<IdsSource>,
) -> anyhow::Result<Observed> {
    let mut out = Observed {
        observed: BTreeMap::new(),
        runtime: BTreeMap::new(),
        runtime_fail: false,
        stats: FdoStats::new(),
    };
    for source in ids {
        let (label, batch) = source.load(spec)?;
        let seen = observe(spec, &batch).with_context(|| label.clone())?;
        for (k, s) in &seen {
            let o = out.observed.entry(k.clone()).or_default();
            o.0 = o.0.max(s.max_ids.iter().flatten().copied().max().unwrap_or(0) as u64);
            o.1 =
                o.1.max(s.max_unique_ids.iter().flatten().copied().max().unwrap_or(0) as u64);
        }
        accumulate(&mut out.stats, seen);
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
        for (k, c) in consequences(spec, &current, &batch)? {
            let text = if !c.would_abort {
                "ok".to_string()
            } else if spec.enable_minibatching && c.minibatches > 0 {
                format!("needs {} minibatches", c.minibatches)
            } else if spec.allow_id_dropping {
                format!("drops {} ids", c.dropped_ids)
            } else {
                out.runtime_fail = true;
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
            out.runtime.entry(k).or_default().push(format!("{label}: {text}"));
        }
    }
    Ok(out)
}

fn validate_inner(
    spec: &PreprocessSpec,
    spec_origin: &str,
    chip: &str,
    limits: &LimitsSource,
    ids: Vec<IdsSource>,
    opts: SuggestOptions,
) -> anyhow::Result<Validation> {
    let (chip, params) = chip_params(chip)?;
    if spec.num_sc_per_device as u64 != params.num_sc_per_device {
        anyhow::bail!(
            "{spec_origin}: num_sc_per_device is {}, but a {} device has {} SparseCores",
            spec.num_sc_per_device,
            chip.name,
            params.num_sc_per_device
        );
    }
    let overrides: BTreeMap<String, StackLimit> = match limits {
        LimitsSource::File(p) => LimitsFile::read(p)?.stacks,
        LimitsSource::Fdo(d) => limits_from_fdo(&load_fdo_dir(d)?, spec.num_sc_per_device as u64),
        LimitsSource::Spec => BTreeMap::new(),
    };
    if let LimitsSource::File(p) | LimitsSource::Fdo(p) = limits {
        sim_sparsecore::crosscheck::check_limit_names(
            spec,
            overrides.keys().map(String::as_str),
            &p.display().to_string(),
        )
        .map_err(anyhow::Error::msg)?;
    }
    let spec = apply_limits(spec, &overrides);
    let stacks = build_stacks(&spec);
    let Observed {
        observed,
        runtime,
        runtime_fail,
        stats,
    } = observe_batches(&spec, &stacks, ids)?;
    let suggested = suggest_limits(&spec, &stats, opts);
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
        // The case `tpusim run` checks too: a feature's rows are split between the host's devices.
        let case = |kind| stack_compile_case(&spec, s, spec.local_device_count, kind);
        let fwd = check(&case(ProgramKind::Fwd), &params);
        let bwd = check(&case(ProgramKind::GradSgd), &params);
        failed |= !fwd.compiles || !bwd.compiles;
        let first_table: usize = stacks[..si].iter().map(|x| x.tables.len()).sum();
        let table_bytes: u64 = sizing.tables[first_table..first_table + s.tables.len()]
            .iter()
            .map(|t| t.1)
            .sum();
        let stack_bytes = sizing.stack_estimates[si].1.max(sizing.stack_estimates[si].2);
        let (obs_ids, obs_unique) = observed.get(&s.name).copied().unwrap_or((0, 0));
        let from_data = suggested.get(&s.name);
        let suggest = |obs: u64, data: Option<u64>, largest: u64| match data {
            Some(d) if obs > 0 => d.min(largest),
            _ => largest,
        };
        // Suggested limits: what `limits estimate` suggests from the same batches (percentile and
        // headroom), within what compiles; without data, the largest that compiles. The unique limit
        // is searched with the suggested max_ids in place (a huge max_ids would leave none).
        let suggested_ids = suggest(
            obs_ids,
            from_data.map(|l| l.max_ids_per_partition),
            fwd.largest_max_ids.min(bwd.largest_max_ids),
        );
        let with_ids = |kind| CompileCase {
            max_ids: suggested_ids.max(1),
            max_unique: (s.max_unique_ids_per_partition as u64).min(suggested_ids.max(1)),
            ..case(kind)
        };
        let largest_unique = check(&with_ids(ProgramKind::Fwd), &params)
            .largest_max_unique
            .min(check(&with_ids(ProgramKind::GradSgd), &params).largest_max_unique)
            .min(suggested_ids);
        let suggested_unique = suggest(
            obs_unique,
            from_data.map(|l| l.max_unique_ids_per_partition),
            largest_unique,
        );
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
    Ok(Validation {
        failed,
        json: json!({"chip": chip.name, "ok": !failed, "suggestion": {"percentile": opts.percentile, "headroom": opts.headroom}, "hbm": {"bytes_needed": hbm_total, "capacity_bytes": chip.hbm_bytes, "fits": hbm_fits}, "stacks": rows}),
    })
}
