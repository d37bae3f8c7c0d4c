//! Limits from data: statistics over many batches (one batch in memory at a time), limits per stack at
//! a percentile plus headroom, rounded up to a multiple of 8, and what those limits do to each batch.

use std::collections::BTreeMap;

use serde::Serialize;

use super::files::{FdoStack, FdoStats, StackLimit};
use crate::preprocess::{build_stacks, preprocess, BatchIds, Options, PreprocessError, PreprocessSpec, StackLimits};

/// A spec with the given limits in force (single-table stacks through their table, others through
/// `stack_limits`), as jax-tpu-embedding would be configured with them.
pub fn apply_limits(spec: &PreprocessSpec, limits: &BTreeMap<String, StackLimit>) -> PreprocessSpec {
    let mut out = spec.clone();
    for stack in build_stacks(spec) {
        let Some(l) = limits.get(&stack.name) else { continue };
        let clamp = |x: u64| x.clamp(1, i32::MAX as u64) as u32;
        if stack.tables.len() == 1 {
            if let Some(t) = out.tables.iter_mut().find(|t| t.name == stack.tables[0].name) {
                t.max_ids_per_partition = clamp(l.max_ids_per_partition);
                t.max_unique_ids_per_partition = clamp(l.max_unique_ids_per_partition);
                t.suggested_coo_buffer_size_per_device = l.suggested_coo_buffer_size_per_device;
            }
        } else {
            out.stack_limits.insert(
                stack.name.clone(),
                StackLimits {
                    max_ids_per_partition: Some(clamp(l.max_ids_per_partition)),
                    max_unique_ids_per_partition: Some(clamp(l.max_unique_ids_per_partition)),
                    suggested_coo_buffer_size_per_device: l.suggested_coo_buffer_size_per_device,
                },
            );
        }
    }
    out
}

/// Observed statistics of one batch per stack (limits lifted so nothing aborts).
pub fn observe(spec: &PreprocessSpec, ids: &BatchIds) -> Result<BTreeMap<String, FdoStack>, PreprocessError> {
    let lifted: BTreeMap<String, StackLimit> = build_stacks(spec)
        .into_iter()
        .map(|s| {
            (
                s.name,
                StackLimit {
                    max_ids_per_partition: 1 << 30,
                    max_unique_ids_per_partition: 1 << 30,
                    suggested_coo_buffer_size_per_device: None,
                },
            )
        })
        .collect();
    let mut open = apply_limits(spec, &lifted);
    open.enable_minibatching = false;
    open.allow_id_dropping = false;
    let out = preprocess(&open, ids, Options { stats_only: true })?;
    Ok(out
        .stacks
        .into_iter()
        .map(|(name, o)| {
            let row = |v: &[u32]| vec![v.iter().map(|&x| x as i64).collect::<Vec<_>>()];
            (
                name,
                FdoStack {
                    max_ids: row(&o.max_ids_per_partition),
                    max_unique_ids: row(&o.max_unique_ids_per_partition),
                    required_buffer_size: row(&o.required_buffer_sizes),
                    id_drop_counters: vec![vec![o.dropped_id_count as i64]],
                },
            )
        })
        .collect())
}

/// Appends one batch's observation to running FDO stats.
pub fn accumulate(stats: &mut FdoStats, batch: BTreeMap<String, FdoStack>) {
    for (k, b) in batch {
        let s = stats.entry(k).or_default();
        s.max_ids.extend(b.max_ids);
        s.max_unique_ids.extend(b.max_unique_ids);
        s.required_buffer_size.extend(b.required_buffer_size);
        s.id_drop_counters.extend(b.id_drop_counters);
    }
}

/// Nearest-rank percentile (0 < p <= 100) of per-step maxima.
fn percentile(rows: &[Vec<i64>], p: f64) -> u64 {
    let mut v: Vec<i64> = rows.iter().map(|r| r.iter().copied().max().unwrap_or(0)).collect();
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1].max(0) as u64
}

fn with_headroom(x: u64, headroom: f64) -> u64 {
    let y = (x as f64 * (1.0 + headroom)).ceil() as u64;
    y.max(1).div_ceil(8) * 8
}

/// Limits per stack at `percentile` of the per-batch maxima, times (1 + headroom), rounded up to 8;
/// the suggested COO buffer from the required buffer sizes likewise (a multiple of 8 x SparseCores).
pub fn estimate_limits(
    stats: &FdoStats,
    percentile_pct: f64,
    headroom: f64,
    sc_per_device: u64,
) -> BTreeMap<String, StackLimit> {
    stats
        .iter()
        .map(|(k, s)| {
            let req = with_headroom(percentile(&s.required_buffer_size, percentile_pct), headroom) * sc_per_device;
            (
                k.clone(),
                StackLimit {
                    max_ids_per_partition: with_headroom(percentile(&s.max_ids, percentile_pct), headroom),
                    max_unique_ids_per_partition: with_headroom(
                        percentile(&s.max_unique_ids, percentile_pct),
                        headroom,
                    ),
                    suggested_coo_buffer_size_per_device: Some(req.div_ceil(8 * sc_per_device) * 8 * sc_per_device),
                },
            )
        })
        .collect()
}

/// What given limits do to one batch, per stack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BatchConsequence {
    /// Minibatches with minibatching on (1: fits; 0: a single bucket still exceeds a limit, so even
    /// minibatching aborts).
    pub minibatches: u32,
    /// Ids dropped with id dropping on and minibatching off.
    pub dropped_ids: u64,
    /// Whether jax-tpu-embedding would abort with neither on.
    pub would_abort: bool,
}

/// Runs one batch under `limits` three ways: plain, with minibatching, with id dropping.
pub fn consequences(
    spec: &PreprocessSpec,
    limits: &BTreeMap<String, StackLimit>,
    ids: &BatchIds,
) -> Result<BTreeMap<String, BatchConsequence>, PreprocessError> {
    let base = apply_limits(spec, limits);
    let mut out: BTreeMap<String, BatchConsequence> = BTreeMap::new();
    let stats = Options { stats_only: true };
    let mut plain = base.clone();
    plain.allow_id_dropping = false;
    plain.enable_minibatching = false;
    let aborting = match preprocess(&plain, ids, stats) {
        Err(PreprocessError::LimitExceeded(e)) => Some(e.stack),
        Err(e) => return Err(e),
        Ok(_) => None,
    };
    let mut mb = plain.clone();
    mb.enable_minibatching = true;
    // With minibatching, a batch that still exceeds a limit inside one bucket aborts: 0 minibatches.
    match preprocess(&mb, ids, stats) {
        Ok(o) => {
            for (k, s) in o.stacks {
                out.entry(k).or_default().minibatches = s.num_minibatches;
            }
        }
        Err(PreprocessError::LimitExceeded(e)) => {
            out.entry(e.stack).or_default().minibatches = 0;
        }
        Err(e) => return Err(e),
    }
    let mut drop = plain;
    drop.allow_id_dropping = true;
    for (k, s) in preprocess(&drop, ids, stats)?.stacks {
        let c = out.entry(k).or_default();
        c.dropped_ids = s.dropped_id_count;
    }
    if let Some(stack) = aborting {
        out.entry(stack).or_default().would_abort = true;
    }
    Ok(out)
}
