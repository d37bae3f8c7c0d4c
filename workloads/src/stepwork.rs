//! The SparseCore work of one step: the real preprocessing of the step's ids (vocabulary- or
//! sample-dimension minibatching), the load every partition sees (so hot ids make a straggler), and
//! the guide's host-side checks (table- and chip-level limits, id bounds).

use std::collections::BTreeMap;

use sim_sparsecore::model::ScWork;
use sim_sparsecore::preprocess::{
    preprocess, preprocess_or_drop, BatchIds, FeatureIds, Options, PreprocessSpec, StackOutput,
};

use sim_core::summary::RuntimeVerdict;

use crate::spec::{MinibatchDimension, Workload, WorkloadError};

/// Largest number of sample groups sample-dimension minibatching tries (as many as vocabulary buckets).
pub const MAX_SAMPLE_MINIBATCHES: u64 = 64;

/// Per stack, what one step costs and what it ran into.
#[derive(Clone, Debug, Default)]
pub struct StackStep {
    /// SparseCore passes (minibatches) of the stack.
    pub minibatches: u32,
    /// Ids dropped.
    pub dropped: u64,
    /// What the limits did, with the reason in `message` when not ok.
    pub runtime: RuntimeVerdict,
    /// Why, when not ok.
    pub message: String,
    /// A table-level limit (`max_ids_per_table`, `max_unique_ids_per_table`) was exceeded; `message` says which.
    pub table_limit_hit: bool,
    /// Largest observed ids / unique ids a source SparseCore sends one partition.
    pub observed_max_ids: u64,
    /// As above, unique ids.
    pub observed_max_unique: u64,
    /// Load of every global partition: ids and unique ids, summed over one chip's source SparseCores.
    pub ids_per_partition: Vec<u64>,
    /// Unique ids per global partition.
    pub unique_per_partition: Vec<u64>,
    /// Ids after padding every partition's list to 8, on the chip (the static CSR buffer's fill).
    pub padded_ids_per_chip: u64,
}

/// An id outside its table's vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfRangeId {
    /// Feature that carried it.
    pub feature: String,
    /// Table it looks up.
    pub table: String,
    /// Sample (row of the chip's batch).
    pub sample: u64,
    /// The id.
    pub id: i64,
    /// The table's vocabulary.
    pub vocab: u64,
}

/// One step's SparseCore work.
#[derive(Clone, Debug, Default)]
pub struct StepWork {
    /// Per stack (in build order).
    pub stacks: Vec<(String, StackStep)>,
    /// Raw ids of the chip's batch.
    pub ids: u64,
    /// Per table: the largest ids / unique ids one SparseCore sent all its partitions.
    pub table_ids_per_sc: BTreeMap<String, (u64, u64)>,
    /// Ids outside their table's vocabulary (only the first few are kept).
    pub out_of_range: Vec<OutOfRangeId>,
    /// How many ids were outside their vocabulary.
    pub out_of_range_count: u64,
}

/// The id held by the most samples (once per sample), over all tables.
pub fn hottest_id(w: &Workload, batch: &BatchIds) -> Option<(String, i32, u64)> {
    let mut best: Option<(String, i32, u64)> = None;
    for t in &w.tables {
        // Every sample's distinct ids, then sorted: runs are the samples per id.
        let mut all: Vec<i32> = Vec::new();
        let mut sample: Vec<i32> = Vec::new();
        for f in w.features.iter().filter(|f| f.table == t.name) {
            let Some(ids) = batch.get(&f.name) else { continue };
            for r in 0..ids.rows() {
                sample.clear();
                sample.extend_from_slice(&ids.values[ids.row_splits[r]..ids.row_splits[r + 1]]);
                sample.sort_unstable();
                sample.dedup();
                all.extend_from_slice(&sample);
            }
        }
        all.sort_unstable();
        // Ties: the smallest id, for determinism (runs come in id order; only a larger count wins).
        let mut top: Option<(i32, u64)> = None;
        for run in all.chunk_by(|a, b| a == b) {
            if top.is_none_or(|(_, n)| run.len() as u64 > n) {
                top = Some((run[0], run.len() as u64));
            }
        }
        if let Some((id, n)) = top {
            if best.as_ref().is_none_or(|b| n > b.2) {
                best = Some((t.name.clone(), id, n));
            }
        }
    }
    best
}

/// The rows `[lo, hi)` of a ragged feature.
fn slice_rows(f: &FeatureIds, ranges: &[(usize, usize)]) -> FeatureIds {
    let mut values = Vec::new();
    let mut weights = f.weights.as_ref().map(|_| Vec::new());
    let mut splits = vec![0usize];
    for &(lo, hi) in ranges {
        for r in lo..hi {
            let (a, b) = (f.row_splits[r], f.row_splits[r + 1]);
            values.extend_from_slice(&f.values[a..b]);
            if let (Some(out), Some(w)) = (weights.as_mut(), f.weights.as_ref()) {
                out.extend_from_slice(&w[a..b]);
            }
            splits.push(values.len());
        }
    }
    FeatureIds {
        values,
        row_splits: splits,
        weights,
    }
}

/// Sample group `j` of `k`: from every SparseCore's share of the batch, its j-th slice (so every
/// SparseCore keeps its own samples, k times fewer of them).
pub fn sample_group(batch: &BatchIds, rows: usize, scs: usize, j: usize, k: usize) -> BatchIds {
    let per_sc = rows / scs;
    let ranges: Vec<(usize, usize)> = (0..scs)
        .map(|s| {
            let base = s * per_sc;
            (base + j * per_sc / k, base + (j + 1) * per_sc / k)
        })
        .collect();
    batch.iter().map(|(n, f)| (n.clone(), slice_rows(f, &ranges))).collect()
}

fn stack_step(o: &StackOutput) -> StackStep {
    StackStep {
        minibatches: o.num_minibatches,
        dropped: o.dropped_id_count,
        runtime: RuntimeVerdict::Ok,
        message: String::new(),
        table_limit_hit: false,
        observed_max_ids: o.max_ids_per_partition.iter().copied().max().unwrap_or(0) as u64,
        observed_max_unique: o.max_unique_ids_per_partition.iter().copied().max().unwrap_or(0) as u64,
        ids_per_partition: o.ids_per_partition.clone(),
        unique_per_partition: o.unique_per_partition.clone(),
        padded_ids_per_chip: o.required_buffer_sizes.iter().map(|&x| x as u64).sum(),
    }
}

fn classify(s: &mut StackStep, allow_dropping: bool) {
    // A verdict set on the way (an abort, drops) stays unless this one is worse. Ids over a limit
    // with dropping off are an abort (set on the way), never drops.
    let counted = if s.dropped > 0 && allow_dropping {
        RuntimeVerdict::DropsIds
    } else if s.minibatches > 1 {
        RuntimeVerdict::Minibatching
    } else {
        RuntimeVerdict::Ok
    };
    s.runtime = s.runtime.max(counted);
}

/// Vocabulary-dimension minibatching: jax-tpu-embedding's algorithm as it is. Where the library
/// would abort on a limit, the timing goes on as if the ids over the limit were dropped.
fn vocabulary_step(spec: &PreprocessSpec, batch: &BatchIds) -> Result<Vec<(String, StackStep)>, WorkloadError> {
    let (o, exceeded) =
        preprocess_or_drop(spec, batch, Options { stats_only: true }).map_err(|e| WorkloadError::Run(e.to_string()))?;
    // The library stops at the first stack over a limit; the dropping run shows every other stack
    // that is over one too (it drops ids), and each of those would abort as well.
    let stacks = sim_sparsecore::preprocess::build_stacks(spec);
    Ok(o.stacks
        .iter()
        .map(|(n, s)| {
            let mut st = stack_step(s);
            if let Some(e) = exceeded.as_ref().filter(|e| e.stack == *n) {
                st.runtime = RuntimeVerdict::WouldAbort;
                st.message = e.to_string();
            } else if exceeded.is_some() && st.dropped > 0 && !spec.allow_id_dropping {
                let (ids, unique) = stacks
                    .iter()
                    .find(|d| &d.name == n)
                    .map_or((0, 0), |d| (d.max_ids_per_partition, d.max_unique_ids_per_partition));
                st.runtime = RuntimeVerdict::WouldAbort;
                st.message = format!(
                    "Observed up to {} ids and {} unique ids per partition for table: {n}, over the set max ids per partition {ids} or max unique ids per partition {unique} ({} ids over them).",
                    st.observed_max_ids, st.observed_max_unique, st.dropped
                );
            }
            classify(&mut st, spec.allow_id_dropping);
            (n.clone(), st)
        })
        .collect())
}

/// Sample-dimension minibatching: each stack takes the fewest sample groups (powers of two, up to
/// 64, dividing every SparseCore's share) in which no group exceeds its limits; a group is one pass.
/// Unique ids are deduplicated per group only, so a split stack gathers more rows than one pass would.
fn sample_step(
    spec: &PreprocessSpec,
    batch: &BatchIds,
    rows: usize,
    allow_dropping: bool,
) -> Result<Vec<(String, StackStep)>, WorkloadError> {
    let scs = spec.num_sc_per_device as usize;
    let mut trial = spec.clone();
    trial.enable_minibatching = false;
    trial.allow_id_dropping = true;
    let mut resolved: BTreeMap<String, StackStep> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut k = 1usize;
    loop {
        let mut acc: BTreeMap<String, StackStep> = BTreeMap::new();
        for f in &mut trial.features {
            if let Some(r) = f.input_shape.first_mut() {
                *r = (rows / k) as u64;
            }
        }
        for j in 0..k {
            let group = if k == 1 {
                batch.clone()
            } else {
                sample_group(batch, rows, scs, j, k)
            };
            let o = preprocess(&trial, &group, Options { stats_only: true })
                .map_err(|e| WorkloadError::Run(e.to_string()))?;
            for (n, s) in &o.stacks {
                if order.len() < o.stacks.len() && !order.contains(n) {
                    order.push(n.clone());
                }
                let st = stack_step(s);
                let a = acc.entry(n.clone()).or_insert_with(|| StackStep {
                    ids_per_partition: vec![0; st.ids_per_partition.len()],
                    unique_per_partition: vec![0; st.unique_per_partition.len()],
                    ..Default::default()
                });
                a.minibatches += 1;
                a.dropped += st.dropped;
                a.observed_max_ids = a.observed_max_ids.max(st.observed_max_ids);
                a.observed_max_unique = a.observed_max_unique.max(st.observed_max_unique);
                a.padded_ids_per_chip += st.padded_ids_per_chip;
                for (x, y) in a.ids_per_partition.iter_mut().zip(&st.ids_per_partition) {
                    *x += y;
                }
                for (x, y) in a.unique_per_partition.iter_mut().zip(&st.unique_per_partition) {
                    *x += y;
                }
            }
        }
        let next = k * 2;
        let can_split = (next as u64) <= MAX_SAMPLE_MINIBATCHES && (rows / scs.max(1)).is_multiple_of(next);
        for (n, mut st) in acc {
            if resolved.contains_key(&n) {
                continue;
            }
            if st.dropped == 0 || !can_split {
                if st.dropped > 0 && !allow_dropping {
                    st.runtime = RuntimeVerdict::WouldAbort;
                    st.message = format!(
                        "stack {n}: {} ids over its limits even in {k} sample groups (a single id's count in one group exceeds max_ids_per_partition, or the groups cannot be split further)",
                        st.dropped
                    );
                }
                classify(&mut st, allow_dropping);
                resolved.insert(n, st);
            }
        }
        if resolved.len() >= order.len() || !can_split {
            break;
        }
        k = next;
    }
    Ok(order
        .into_iter()
        .filter_map(|n| resolved.remove(&n).map(|s| (n, s)))
        .collect())
}

/// Per table: the largest (ids after within-sample dedup, unique ids) one SparseCore sends all of the
/// table's partitions.
fn table_ids_per_sc(w: &Workload, batch: &BatchIds, scs: usize) -> BTreeMap<String, (u64, u64)> {
    let rows = w.batch_per_chip() as usize;
    let per_sc = (rows / scs.max(1)).max(1);
    let mut out = BTreeMap::new();
    let limited =
        |t: &str| w.limits.max_ids_per_table.contains_key(t) || w.limits.max_unique_ids_per_table.contains_key(t);
    for t in w.tables.iter().filter(|t| limited(&t.name)) {
        let feats: Vec<&FeatureIds> = w
            .features
            .iter()
            .filter(|f| f.table == t.name)
            .filter_map(|f| batch.get(&f.name))
            .collect();
        if feats.is_empty() {
            continue;
        }
        let (mut max_ids, mut max_unique) = (0u64, 0u64);
        for s in 0..scs {
            let mut ids = 0u64;
            let mut all: Vec<i32> = Vec::new();
            let mut sample: Vec<i32> = Vec::new();
            for f in &feats {
                for r in s * per_sc..((s + 1) * per_sc).min(f.rows()) {
                    sample.clear();
                    sample.extend_from_slice(&f.values[f.row_splits[r]..f.row_splits[r + 1]]);
                    sample.sort_unstable();
                    sample.dedup();
                    ids += sample.len() as u64;
                    all.extend_from_slice(&sample);
                }
            }
            all.sort_unstable();
            all.dedup();
            max_ids = max_ids.max(ids);
            max_unique = max_unique.max(all.len() as u64);
        }
        out.insert(t.name.clone(), (max_ids, max_unique));
    }
    out
}

/// Ids outside their table's vocabulary (what `xla_sparse_core_enable_id_bound_check` looks for).
fn out_of_range(w: &Workload, batch: &BatchIds) -> (Vec<OutOfRangeId>, u64) {
    let mut found = Vec::new();
    let mut count = 0u64;
    for f in &w.features {
        let (Some(ids), Some(t)) = (batch.get(&f.name), w.tables.iter().find(|t| t.name == f.table)) else {
            continue;
        };
        for r in 0..ids.rows() {
            for &v in &ids.values[ids.row_splits[r]..ids.row_splits[r + 1]] {
                if v < 0 || v as u64 >= t.vocab {
                    count += 1;
                    if found.len() < 8 {
                        found.push(OutOfRangeId {
                            feature: f.name.clone(),
                            table: t.name.clone(),
                            sample: r as u64,
                            id: v as i64,
                            vocab: t.vocab,
                        });
                    }
                }
            }
        }
    }
    (found, count)
}

/// Preprocesses one step's batch and applies the guide's table-level limits.
pub fn step_work(w: &Workload, spec: &PreprocessSpec, batch: &BatchIds) -> Result<StepWork, WorkloadError> {
    let ids: u64 = batch.values().map(|f| f.len() as u64).sum();
    let rows = w.batch_per_chip() as usize;
    let mut stacks = match (w.limits.enable_minibatching, w.limits.minibatching_dimension) {
        (true, MinibatchDimension::Sample) => sample_step(spec, batch, rows, w.limits.allow_id_dropping)?,
        _ => vocabulary_step(spec, batch)?,
    };
    // Only tables with a table-level limit are counted (the count sorts every sample's ids).
    let table_ids = if w.limits.max_ids_per_table.is_empty() && w.limits.max_unique_ids_per_table.is_empty() {
        BTreeMap::new()
    } else {
        table_ids_per_sc(w, batch, spec.num_sc_per_device as usize)
    };
    // Table-level limits: a SparseCore sending a table more ids than max_ids_per_table overflows the
    // buffers sized from it; the stack holding the table drops them or aborts.
    let stack_defs = sim_sparsecore::preprocess::build_stacks(spec);
    for (name, st) in &mut stacks {
        let Some(def) = stack_defs.iter().find(|s| &s.name == name) else {
            continue;
        };
        for t in &def.tables {
            let Some(&(obs_ids, obs_unique)) = table_ids.get(&t.name) else {
                continue;
            };
            for (what, limit, observed) in [
                ("max_ids_per_table", w.limits.max_ids_per_table.get(&t.name), obs_ids),
                (
                    "max_unique_ids_per_table",
                    w.limits.max_unique_ids_per_table.get(&t.name),
                    obs_unique,
                ),
            ] {
                let Some(&limit) = limit else { continue };
                if observed <= limit as u64 {
                    continue;
                }
                let over = observed - limit as u64;
                if w.limits.allow_id_dropping {
                    st.dropped += over;
                    st.runtime = st.runtime.max(RuntimeVerdict::DropsIds);
                } else {
                    st.runtime = RuntimeVerdict::WouldAbort;
                }
                let table_msg = format!(
                        "table {}: a SparseCore sends {observed} ids over {what} = {limit}{}; raise {what}.{} to at least {}",
                        t.name,
                        if w.limits.allow_id_dropping { " (the excess is dropped)" } else { "" },
                        t.name,
                        observed.div_ceil(8) * 8
                    );
                st.table_limit_hit = true;
                st.message = if st.message.is_empty() {
                    table_msg
                } else {
                    format!("{table_msg}; {}", st.message)
                };
            }
        }
    }
    let (out_of_range, out_of_range_count) = out_of_range(w, batch);
    Ok(StepWork {
        stacks,
        ids,
        table_ids_per_sc: table_ids,
        out_of_range,
        out_of_range_count,
    })
}

/// What the chip whose SparseCores carry the heaviest partitions does, per SparseCore.
#[derive(Clone, Debug, Default)]
pub struct ChipWork {
    /// The chip (index among `chips`).
    pub chip: u32,
    /// Per stack, per SparseCore of the chip: its work.
    pub per_stack: Vec<Vec<ScWork>>,
    /// The busiest partition: (global partition, its load over the mean partition's).
    pub straggler: (u32, f64),
    /// Ids the busiest partition takes beyond the mean partition, from all chips.
    pub excess_ids: f64,
}

/// Scales one chip's partition loads to the load from every chip. The batch of one chip stands for
/// all: a partition's systematic excess (beyond 3 sigma of Poisson noise around the median partition,
/// as hot ids give) is the same on every chip and adds up; the rest is noise that averages out over
/// chips (sqrt scaling). The total is conserved: chips x the chip's ids.
fn global_load(load: &[u64], chips: u64) -> Vec<f64> {
    if load.is_empty() {
        return Vec::new();
    }
    let mut sorted = load.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2] as f64
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) as f64 / 2.0
    };
    let threshold = median + 3.0 * median.sqrt();
    let systematic: Vec<f64> = load.iter().map(|&l| (l as f64 - threshold).max(0.0)).collect();
    let base = load.iter().zip(&systematic).map(|(&l, s)| l as f64 - s).sum::<f64>() / n as f64;
    let c = chips as f64;
    load.iter()
        .zip(&systematic)
        .map(|(&l, &s)| {
            let noise = l as f64 - s - base;
            (c * base + c.sqrt() * noise + c * s).max(0.0)
        })
        .collect()
}

/// Per SparseCore work of the chip holding the busiest partition (every chip waits for it at the
/// all-to-all, so it sets the step time).
pub fn chip_work(sw: &StepWork, chips: u32, sc_per_chip: u32, samples_per_sc: u64) -> ChipWork {
    let parts = sw.stacks.first().map_or(0, |(_, s)| s.ids_per_partition.len());
    if parts == 0 {
        return ChipWork {
            per_stack: vec![vec![ScWork::default(); sc_per_chip as usize]; sw.stacks.len()],
            ..Default::default()
        };
    }
    let scaled: Vec<(Vec<f64>, Vec<f64>)> = sw
        .stacks
        .iter()
        .map(|(_, s)| {
            let ids = global_load(&s.ids_per_partition, chips as u64);
            let unique = s
                .unique_per_partition
                .iter()
                .zip(&s.ids_per_partition)
                .zip(&ids)
                .map(|((&u, &l), &g)| if l > 0 { u as f64 * g / l as f64 } else { 0.0 })
                .collect();
            (ids, unique)
        })
        .collect();
    let total: Vec<f64> = (0..parts).map(|p| scaled.iter().map(|(i, _)| i[p]).sum()).collect();
    let mean = total.iter().sum::<f64>() / parts as f64;
    // First partition of the largest load (ties: the lowest index, for determinism).
    let hot = total
        .iter()
        .enumerate()
        .fold(0, |best, (p, &v)| if v > total[best] { p } else { best });
    let per_chip = sc_per_chip.max(1) as usize;
    let chip = (hot / per_chip) as u32;
    let first = chip as usize * per_chip;
    let per_stack = scaled
        .iter()
        .map(|(ids, unique)| {
            (0..per_chip)
                .map(|s| {
                    let p = (first + s).min(parts - 1);
                    ScWork {
                        ids: ids[p].round() as u64,
                        unique: unique[p].round() as u64,
                        samples: samples_per_sc,
                    }
                })
                .collect()
        })
        .collect();
    ChipWork {
        chip,
        per_stack,
        straggler: (hot as u32, if mean > 0.0 { total[hot] / mean } else { 1.0 }),
        excess_ids: (total[hot] - mean).max(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_load_keeps_hot_partitions_and_damps_noise() {
        // 8 partitions, one with a hot excess far beyond Poisson noise.
        let load = [100, 104, 96, 100, 900, 98, 102, 100];
        let g = global_load(&load, 16);
        let mean = load.iter().sum::<u64>() as f64 / 8.0;
        assert!((g.iter().sum::<f64>() - 16.0 * mean * 8.0).abs() < 1e-6 * g.iter().sum::<f64>());
        // The hot partition keeps (almost) all its excess, x16.
        assert!(g[4] / (16.0 * mean) > 4.0);
        // Noise is damped: 104 vs mean 200 -> the 16-chip partition deviates by 4 x sqrt(16), not 4 x 16.
        assert!((g[1] - g[0] - 4.0 * 4.0).abs() < 1e-9);
        assert_eq!(
            global_load(&load, 1).iter().map(|&x| x as u64).collect::<Vec<_>>(),
            load
        );
    }

    #[test]
    fn sample_groups_partition_every_sparsecores_share() {
        let f = FeatureIds {
            values: (0..16).collect(),
            row_splits: (0..=16).collect(),
            weights: None,
        };
        let batch: BatchIds = [("f".to_string(), f)].into_iter().collect();
        let mut seen = Vec::new();
        for j in 0..4 {
            let g = sample_group(&batch, 16, 2, j, 4);
            let v = &g["f"].values;
            assert_eq!(v.len(), 4);
            // Two rows from SparseCore 0's half, two from SparseCore 1's.
            assert!(v[0] < 8 && v[1] < 8 && v[2] >= 8 && v[3] >= 8);
            seen.extend_from_slice(v);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..16).collect::<Vec<_>>());
    }
}
