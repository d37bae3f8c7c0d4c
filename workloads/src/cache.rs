//! Work shared by runs of one sweep: generated ids and preprocessed step work.
//!
//! Generated ids are a prefix-stable stream: each feature draws row after row from its own generator
//! seeded by (seed, step, feature), so the ids of a batch of R rows are the first R rows of any larger
//! batch. One generation at the largest batch per chip serves every smaller one by slicing. Step work
//! depends only on the SparseCore part of the workload, its preprocessing spec and the ids, so chips
//! with the same preprocessing spec and batch per chip (v4 and v5p; tpu7x x N and v6e x 2N) share it,
//! and the hottest id of a batch is shared by every configuration with that batch per chip. Task graphs
//! of one shape are rebuilt in place run after run (only durations differ).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sim_sparsecore::preprocess::{BatchIds, FeatureIds};

use crate::spec::{IdDist, Workload, WorkloadError};
use crate::stepwork::StepWork;

/// Shared work of runs; cheap to clone (an `Arc` inside).
#[derive(Clone, Default)]
pub struct RunCache {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (id fingerprint, step) -> the largest batch generated so far.
    ids: Mutex<HashMap<(String, u32), Arc<BatchIds>>>,
    /// (work fingerprint, step) -> step work.
    work: Mutex<HashMap<(String, u32), Arc<StepWork>>>,
    /// (SparseCore workload fingerprint, step) -> the hottest id of the chip's batch.
    hottest: Mutex<HashMap<(String, u32), Hottest>>,
    /// Graph shape key -> task graphs of finished runs, rebuilt in place by the next runs.
    /// Held as `Any` so the cache depends on no builder (the builder depends on the cache).
    graphs: Mutex<HashMap<String, Vec<Box<dyn std::any::Any + Send>>>>,
}

/// The id held by the most samples: table, id, samples.
type Hottest = Option<(String, i32, u64)>;

impl std::fmt::Debug for RunCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunCache")
    }
}

/// What the generated ids depend on (everything but the batch size).
fn id_fingerprint(w: &Workload) -> Option<String> {
    if w.features.iter().any(|f| matches!(f.ids, IdDist::Npz(_))) {
        return None;
    }
    let tables: Vec<(&str, u64)> = w.tables.iter().map(|t| (t.name.as_str(), t.vocab)).collect();
    serde_json::to_string(&(w.seed, w.shuffle_ids, &w.features, tables)).ok()
}

/// The first `rows` rows of a batch.
fn prefix(batch: &BatchIds, rows: usize) -> BatchIds {
    batch
        .iter()
        .map(|(name, f)| {
            let end = f.row_splits[rows.min(f.row_splits.len() - 1)];
            (
                name.clone(),
                FeatureIds {
                    values: f.values[..end].to_vec(),
                    row_splits: f.row_splits[..=rows.min(f.row_splits.len() - 1)].to_vec(),
                    weights: f.weights.as_ref().map(|x| x[..end].to_vec()),
                },
            )
        })
        .collect()
}

impl RunCache {
    /// A new, empty cache.
    pub fn new() -> RunCache {
        RunCache::default()
    }

    /// The workload's ids for a step: sliced from a cached larger batch, or generated and kept.
    pub fn batch_for_step(&self, w: &Workload, step: u32) -> Result<BatchIds, WorkloadError> {
        let Some(fp) = id_fingerprint(w) else {
            return crate::ids::batch_for_step(w, step);
        };
        let rows = w.batch_per_chip() as usize;
        let key = (fp, step);
        let cached = self.inner.ids.lock().ok().and_then(|m| m.get(&key).cloned());
        if let Some(b) = cached {
            if b.values().all(|f| f.row_splits.len() > rows) {
                return Ok(prefix(&b, rows));
            }
        }
        let fresh = Arc::new(crate::ids::batch_for_step(w, step)?);
        if let Ok(mut m) = self.inner.ids.lock() {
            let bigger = m
                .get(&key)
                .is_none_or(|old| old.values().next().map_or(0, |f| f.row_splits.len()) < rows + 1);
            if bigger {
                m.insert(key, fresh.clone());
            }
        }
        Ok(Arc::try_unwrap(fresh).unwrap_or_else(|a| (*a).clone()))
    }

    /// Step work keyed by what it depends on; `compute` runs on a miss.
    pub fn step_work(
        &self,
        fingerprint: &str,
        step: u32,
        compute: impl FnOnce() -> Result<StepWork, WorkloadError>,
    ) -> Result<Arc<StepWork>, WorkloadError> {
        let key = (fingerprint.to_string(), step);
        if let Some(sw) = self.inner.work.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(sw);
        }
        let sw = Arc::new(compute()?);
        if let Ok(mut m) = self.inner.work.lock() {
            m.insert(key, sw.clone());
        }
        Ok(sw)
    }

    /// A finished run's task graph of this shape, to rebuild in place (None: build one).
    pub fn take_graph<G: std::any::Any + Send>(&self, shape: &str) -> Option<G> {
        let g = self.inner.graphs.lock().ok()?.get_mut(shape)?.pop()?;
        g.downcast::<G>().ok().map(|b| *b)
    }

    /// Keeps a finished run's task graph for the next run of its shape (one per concurrent run).
    pub fn keep_graph<G: std::any::Any + Send>(&self, shape: String, g: G) {
        if let Ok(mut m) = self.inner.graphs.lock() {
            m.entry(shape).or_default().push(Box::new(g));
        }
    }

    /// The hottest id of a step's batch keyed by what it depends on; `compute` runs on a miss.
    pub fn hottest_id(&self, fingerprint: &str, step: u32, compute: impl FnOnce() -> Hottest) -> Hottest {
        let key = (fingerprint.to_string(), step);
        if let Some(h) = self.inner.hottest.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return h;
        }
        let h = compute();
        if let Ok(mut m) = self.inner.hottest.lock() {
            m.insert(key, h.clone());
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smaller_batch_is_the_prefix_of_a_larger_one() {
        let mut w = Workload::preset("dlrm-small").unwrap();
        let cache = RunCache::new();
        w.global_batch = 16_384;
        let big = cache.batch_for_step(&w, 3).unwrap();
        w.global_batch = 4_096;
        // Served from the cache by slicing, equal to a fresh generation.
        let sliced = cache.batch_for_step(&w, 3).unwrap();
        assert_eq!(sliced, crate::ids::batch_for_step(&w, 3).unwrap());
        assert_ne!(sliced, big);
        let mut other_seed = w.clone();
        other_seed.seed += 1;
        assert_eq!(
            cache.batch_for_step(&other_seed, 3).unwrap(),
            crate::ids::batch_for_step(&other_seed, 3).unwrap()
        );
    }
}
