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
        // Keeps jax-tpu-embedding's rounding of the suggested size (to 8 x SparseCores) in range.
        let suggested = l
            .suggested_coo_buffer_size_per_device
            .map(|v| v.clamp(1, i32::MAX as u64));
        if stack.tables.len() == 1 {
            if let Some(t) = out.tables.iter_mut().find(|t| t.name == stack.tables[0].name) {
                t.max_ids_per_partition = clamp(l.max_ids_per_partition);
                t.max_unique_ids_per_partition = clamp(l.max_unique_ids_per_partition);
                t.suggested_coo_buffer_size_per_device = suggested;
            }
        } else {
            out.stack_limits.insert(
                stack.name.clone(),
                StackLimits {
                    max_ids_per_partition: Some(clamp(l.max_ids_per_partition)),
                    max_unique_ids_per_partition: Some(clamp(l.max_unique_ids_per_partition)),
                    suggested_coo_buffer_size_per_device: suggested,
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

/// Largest limit jax-tpu-embedding can hold (an int32), rounded down to a multiple of 8.
pub const MAX_LIMIT: u64 = (i32::MAX as u64) / 8 * 8;

fn with_headroom(x: u64, headroom: f64) -> u64 {
    // f64 -> u64 casts saturate (NaN -> 0); the cap keeps the rounding below from overflowing.
    let y = (x as f64 * (1.0 + headroom)).ceil() as u64;
    y.clamp(1, MAX_LIMIT).div_ceil(8) * 8
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
            let sc_per_device = sc_per_device.max(1);
            let req = with_headroom(percentile(&s.required_buffer_size, percentile_pct), headroom)
                .saturating_mul(sc_per_device);
            (
                k.clone(),
                StackLimit {
                    max_ids_per_partition: with_headroom(percentile(&s.max_ids, percentile_pct), headroom),
                    max_unique_ids_per_partition: with_headroom(
                        percentile(&s.max_unique_ids, percentile_pct),
                        headroom,
                    ),
                    suggested_coo_buffer_size_per_device: Some(
                        req.div_ceil(8 * sc_per_device).saturating_mul(8 * sc_per_device),
                    ),
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
    /// jax-tpu-embedding's abort message (stack, partition, observed count, limit) when it would abort.
    pub abort_message: Option<String>,
}

/// `consequences` without the batch, from its statistics (`observe`), where they decide it: no
/// stack's observed ids or unique ids per partition exceed its limits and every SparseCore's
/// required buffer fits its share of the COO buffer. Then the plain run succeeds and drops nothing,
/// minibatching keeps one minibatch (no bucket pass), and dropping has nothing to drop. None
/// otherwise: run `consequences` on the batch.
pub fn consequences_from_observed(
    spec: &PreprocessSpec,
    limits: &BTreeMap<String, StackLimit>,
    observed: &BTreeMap<String, FdoStack>,
) -> Option<BTreeMap<String, BatchConsequence>> {
    let mut plain = apply_limits(spec, limits);
    plain.allow_id_dropping = false;
    plain.enable_minibatching = false;
    let stacks = build_stacks(&plain);
    let mut out = BTreeMap::new();
    for (name, o) in observed {
        let stack = stacks.iter().find(|s| &s.name == name)?;
        let per_sc = crate::preprocess::coo_buffer_size(&plain, stack).ok()? / plain.num_sc_per_device.max(1) as u64;
        let fits = |rows: &[Vec<i64>], limit: u64| rows.iter().flatten().all(|&x| x >= 0 && x as u64 <= limit);
        if !fits(&o.max_ids, stack.max_ids_per_partition as u64)
            || !fits(&o.max_unique_ids, stack.max_unique_ids_per_partition as u64)
            || !fits(&o.required_buffer_size, per_sc)
            || o.id_drop_counters.iter().flatten().any(|&x| x != 0)
        {
            return None;
        }
        out.insert(
            name.clone(),
            BatchConsequence {
                minibatches: 1,
                ..Default::default()
            },
        );
    }
    Some(out)
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
        Err(PreprocessError::LimitExceeded(e)) => Some((e.stack.clone(), e.to_string())),
        Err(e) => return Err(e),
        Ok(_) => None,
    };
    // With minibatching, a batch that still exceeds a limit inside one bucket aborts: 0 minibatches.
    // The run stops at the first such stack, so that stack's limits are lifted and the run repeated
    // to learn the others' minibatch counts (at most one run per stack).
    let mut relaxed = limits.clone();
    let mut aborted_with_minibatching: Vec<String> = Vec::new();
    loop {
        let mut mb = apply_limits(spec, &relaxed);
        mb.allow_id_dropping = false;
        mb.enable_minibatching = true;
        match preprocess(&mb, ids, stats) {
            Ok(o) => {
                for (k, s) in o.stacks {
                    out.entry(k).or_default().minibatches = s.num_minibatches;
                }
                break;
            }
            Err(PreprocessError::LimitExceeded(e)) if !aborted_with_minibatching.contains(&e.stack) => {
                relaxed.insert(
                    e.stack.clone(),
                    StackLimit {
                        max_ids_per_partition: 1 << 30,
                        max_unique_ids_per_partition: 1 << 30,
                        suggested_coo_buffer_size_per_device: None,
                    },
                );
                aborted_with_minibatching.push(e.stack);
            }
            Err(e) => return Err(e),
        }
    }
    for stack in aborted_with_minibatching {
        out.entry(stack).or_default().minibatches = 0;
    }
    let mut drop = plain;
    drop.allow_id_dropping = true;
    for (k, s) in preprocess(&drop, ids, stats)?.stacks {
        // The plain run stops at the first stack over a limit; the dropping run's stats (observed
        // before dropping) show every other stack that would abort too.
        let observed_ids = s.max_ids_per_partition.iter().copied().max().unwrap_or(0) as u64;
        let observed_unique = s.max_unique_ids_per_partition.iter().copied().max().unwrap_or(0) as u64;
        let over = limits.get(&k).and_then(|l| {
            if observed_ids > l.max_ids_per_partition {
                Some(("max ids per partition", observed_ids, l.max_ids_per_partition))
            } else if observed_unique > l.max_unique_ids_per_partition {
                Some((
                    "max unique ids per partition",
                    observed_unique,
                    l.max_unique_ids_per_partition,
                ))
            } else {
                None
            }
        });
        let c = out.entry(k.clone()).or_default();
        c.dropped_ids = s.dropped_id_count;
        if let Some((what, observed, limit)) = over {
            c.would_abort = true;
            c.abort_message = Some(format!(
                "Observed {what}: {observed} for table: {k} is greater than the set {what}: {limit}."
            ));
        }
    }
    if let Some((stack, message)) = aborting {
        let c = out.entry(stack).or_default();
        c.would_abort = true;
        c.abort_message = Some(message);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(max_ids: &[i64]) -> FdoStats {
        [(
            "s".to_string(),
            FdoStack {
                max_ids: max_ids.iter().map(|&x| vec![x, 0]).collect(),
                max_unique_ids: max_ids.iter().map(|&x| vec![x / 2]).collect(),
                required_buffer_size: max_ids.iter().map(|&x| vec![x * 3]).collect(),
                id_drop_counters: vec![],
            },
        )]
        .into()
    }

    #[test]
    fn percentile_headroom_and_rounding() {
        let s = stats(&[10, 20, 30, 40, 100]);
        let l = &estimate_limits(&s, 100.0, 0.1, 4)["s"];
        // 100 x 1.1 = 110 -> 112; unique 50 x 1.1 = 55 -> 56; buffer 300 x 1.1 = 330 -> 336 x 4 SCs.
        assert_eq!(l.max_ids_per_partition, 112);
        assert_eq!(l.max_unique_ids_per_partition, 56);
        assert_eq!(l.suggested_coo_buffer_size_per_device, Some(1344));
        let l = &estimate_limits(&s, 50.0, 0.0, 4)["s"];
        assert!(l.max_ids_per_partition < 112, "{l:?}");
    }

    #[test]
    fn absurd_headroom_is_capped_at_int32() {
        let l = &estimate_limits(&stats(&[100]), 100.0, 1e30, 4)["s"];
        assert_eq!(l.max_ids_per_partition, MAX_LIMIT);
        assert_eq!(l.max_unique_ids_per_partition, MAX_LIMIT);
    }
}
