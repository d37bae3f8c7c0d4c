//! Stage 5a: the limits' verdicts per stack: compile-time (the compiler's Spmem/TileSpmem checks),
//! the static CSR buffer, and what the run's steps did; and, where a step would abort, every limit
//! the whole run needs raised (so the advice is one round, not one stack at a time).

use sim_core::summary::{LimitName, LimitNeed, RuntimeVerdict, StackVerdict};
use sim_sparsecore::limits::{compile_check, stack_compile_case, ProgramKind, ScCompileParams};

use super::resolve::Plan;
use super::work::RunWork;

/// Verdicts of every stack.
#[derive(Clone, Debug, Default)]
pub struct LimitsOutcome {
    /// Per stack, in build order.
    pub stacks: Vec<StackVerdict>,
    /// Largest TileSpmem a stack's program needs.
    pub tilespmem_peak: u64,
    /// Largest fill of a stack's static CSR buffer (padded ids over its size).
    pub chip_buffer_fill: f64,
    /// Every limit a step would abort on, with what the whole run needs.
    pub needed: Vec<LimitNeed>,
}

/// The compile parameters of the plan's chip.
fn compile_params(p: &Plan) -> ScCompileParams {
    let spec = p.spec();
    ScCompileParams {
        num_sc_per_device: p.sc_per_device as u64,
        tilespmem_bytes: spec.sc_tilespmem_bytes_available,
        scratchpad_bytes: spec.sc_tilespmem_scratchpad_bytes,
        spmem_fixed_overhead_bytes: spec.sc_spmem_fixed_overhead_bytes,
        simd_lanes_f32: u64::from(spec.sc_simd_lanes_f32),
    }
}

/// The `limits.stacks` key of a stack: its tables joined by `_` (never hashed, so it reads back).
fn stack_key(tables: &[String]) -> String {
    tables.join("_")
}

/// `--set` for one limit (a JSON object when the key holds a '.', which a dotted path cannot).
fn set_arg(key: &str, limit: LimitName, value: u64) -> String {
    if key.contains('.') {
        format!(
            "limits.stacks={{\"{}\":{{\"{}\":{value}}}}}",
            key.replace('"', "\\\""),
            limit.as_str()
        )
    } else {
        format!("limits.stacks.{key}.{}={value}", limit.as_str())
    }
}

/// Checks every stack.
pub fn check(p: &Plan, work: &RunWork) -> LimitsOutcome {
    let w = &p.w;
    let b = w.batch_per_chip();
    let params = compile_params(p);
    let mut out = LimitsOutcome::default();
    let mut per_sample_need = 0u64;
    for st in &p.stacks {
        let sd = &st.def;
        let max_ids = sd.max_ids_per_partition as u64;
        let max_unique = sd.max_unique_ids_per_partition as u64;
        // The case `limits validate` checks too: a feature's rows are the chip's batch, split
        // between its compiler devices.
        let case = |kind| stack_compile_case(&p.pspec, sd, p.devices_per_chip, kind);
        let vf = compile_check(&case(ProgramKind::Fwd), &params);
        let vb = compile_check(&case(ProgramKind::GradSgd), &params);
        out.tilespmem_peak = out
            .tilespmem_peak
            .max(vf.tilespmem_bytes_needed)
            .max(vb.tilespmem_bytes_needed);
        let run = work.stacks.get(&sd.name).cloned().unwrap_or_default();
        let (mut runtime, mut message) = (run.runtime, run.message.clone());
        // The static CSR buffer of the stack on a chip: max_ids_per_chip_per_sample x its samples
        // (stacked features are concatenated along the samples).
        let rows = b * sd.features.len() as u64;
        let chip_buffer = w.limits.max_ids_per_chip_per_sample as u64 * rows;
        out.chip_buffer_fill = out
            .chip_buffer_fill
            .max(run.padded_ids_per_chip as f64 / chip_buffer.max(1) as f64);
        if run.padded_ids_per_chip > chip_buffer {
            runtime = RuntimeVerdict::WouldAbort;
            per_sample_need = per_sample_need.max(run.padded_ids_per_chip.div_ceil(rows.max(1)));
            message = format!(
                "stack {}: Got {} ids after padding but the max_ids_per_chip is set to be {chip_buffer} which is smaller (max_ids_per_chip_per_sample {} x {rows} samples); raise max_ids_per_chip_per_sample to at least {}",
                sd.name,
                run.padded_ids_per_chip,
                w.limits.max_ids_per_chip_per_sample,
                run.padded_ids_per_chip.div_ceil(rows.max(1))
            );
        }
        let compiles = vf.compiles && vb.compiles;
        if compiles && runtime == RuntimeVerdict::WouldAbort {
            let tables: Vec<String> = sd.tables.iter().map(|t| t.name.clone()).collect();
            let needs = partition_needs(&tables, max_ids, max_unique, &run);
            if !needs.is_empty() {
                let said: Vec<String> = needs
                    .iter()
                    .map(|n| format!("{} >= {}", n.limit.as_str(), n.needed))
                    .collect();
                // What the step itself hit first (the static buffer, or a per-table cap that lowered the
                // partition limit) stays in front of what the whole run needs.
                let buffer_message = if run.padded_ids_per_chip > chip_buffer || run.table_limit_hit {
                    format!("{message}; ")
                } else {
                    String::new()
                };
                message = format!(
                    "{buffer_message}over the run's {} steps a partition gets up to {} ids and {} unique ids, over the limits {max_ids} and {max_unique}: needs {}{}",
                    w.steps,
                    run.observed_max_ids,
                    run.observed_max_unique,
                    said.join(", "),
                    compile_note(&case, &params, max_ids.max(run.observed_max_ids), max_unique.max(run.observed_max_unique))
                );
            }
            out.needed.extend(needs);
        }
        out.stacks.push(StackVerdict {
            stack: sd.name.clone(),
            compiles,
            runtime: if compiles {
                runtime
            } else {
                RuntimeVerdict::DoesNotCompile
            },
            message: if !vf.compiles {
                vf.message.clone()
            } else if !vb.compiles {
                vb.message.clone()
            } else if !message.is_empty() && runtime != RuntimeVerdict::Ok {
                message
            } else {
                vf.message.clone()
            },
            max_ids_per_partition: max_ids,
            max_unique_ids_per_partition: max_unique,
            observed_max_ids: run.observed_max_ids,
            observed_max_unique_ids: run.observed_max_unique,
            limits_from: p.limits_from.get(&sd.name).cloned().unwrap_or_default(),
        });
    }
    if per_sample_need > 0 {
        let v = per_sample_need;
        out.needed.push(LimitNeed {
            limit: LimitName::MaxIdsPerChipPerSample,
            stack: None,
            table: None,
            current: u64::from(w.limits.max_ids_per_chip_per_sample),
            needed: v,
            set: format!("limits.max_ids_per_chip_per_sample={v}"),
        });
    }
    out.needed.extend(table_needs(p, work));
    out
}

/// What the compiler says of the raised limits, when it refuses them.
fn compile_note(
    case: &dyn Fn(ProgramKind) -> sim_sparsecore::limits::CompileCase,
    params: &ScCompileParams,
    max_ids: u64,
    max_unique: u64,
) -> String {
    for kind in [ProgramKind::Fwd, ProgramKind::GradSgd] {
        let v = compile_check(
            &sim_sparsecore::limits::CompileCase {
                max_ids,
                max_unique,
                ..case(kind)
            },
            params,
        );
        if !v.compiles {
            return format!(
                ", which does not compile ({}); turn on minibatching or id dropping, or use a smaller batch per chip",
                v.message
            );
        }
    }
    String::new()
}

/// The per-partition limits of an aborting stack the run's observed maxima exceed.
fn partition_needs(tables: &[String], max_ids: u64, max_unique: u64, run: &super::work::StackRun) -> Vec<LimitNeed> {
    let key = stack_key(tables);
    [
        (LimitName::MaxIdsPerPartition, max_ids, run.observed_max_ids),
        (LimitName::MaxUniqueIdsPerPartition, max_unique, run.observed_max_unique),
    ]
    .into_iter()
    .filter(|(_, current, observed)| observed > current)
    .map(|(limit, current, needed)| LimitNeed {
        limit,
        stack: Some(key.clone()),
        table: None,
        current,
        needed,
        set: set_arg(&key, limit, needed),
    })
    .collect()
}

/// Table-level limits (`max_ids_per_table`, `max_unique_ids_per_table`) some step exceeded, with
/// the largest count over the run.
fn table_needs(p: &Plan, work: &RunWork) -> Vec<LimitNeed> {
    let l = &p.w.limits;
    let mut out = Vec::new();
    for (t, &(ids, unique)) in &work.table_ids_max {
        for (limit, map, observed) in [
            (LimitName::MaxIdsPerTable, &l.max_ids_per_table, ids),
            (LimitName::MaxUniqueIdsPerTable, &l.max_unique_ids_per_table, unique),
        ] {
            let Some(&current) = map.get(t) else { continue };
            if observed > u64::from(current) && !l.allow_id_dropping {
                out.push(LimitNeed {
                    limit,
                    stack: None,
                    table: Some(t.clone()),
                    current: u64::from(current),
                    needed: observed,
                    set: format!("limits.{}.{t}={observed}", limit.as_str()),
                });
            }
        }
    }
    out
}
