//! Stage 2: every step's SparseCore work from the real preprocessing of its ids, and what the limits
//! did to it (verdicts, drops, minibatches, the straggler partition).

use std::collections::BTreeMap;

use sim_core::summary::RuntimeVerdict;
use sim_sparsecore::model::ScWork;

use super::resolve::Plan;
use crate::cache::RunCache;
use crate::ids::batch_for_step;
use crate::spec::WorkloadError;
use crate::stepwork::OutOfRangeId;

/// One step's SparseCore work on the simulated chip.
#[derive(Clone, Debug, Default)]
pub struct StepWork {
    /// [stack] -> per SparseCore work.
    pub per_stack: Vec<Vec<ScWork>>,
    /// [stack] -> SparseCore passes.
    pub minibatches: Vec<u32>,
    /// Ids dropped (sum over stacks).
    pub dropped: u64,
    /// Ids the host preprocesses (all SparseCore features of the chip's batch).
    pub ids: u64,
}

/// What a stack's limits did over the run.
#[derive(Clone, Debug, Default)]
pub struct StackRun {
    /// The worst run-time verdict of any step.
    pub runtime: RuntimeVerdict,
    /// Its reason.
    pub message: String,
    /// That reason's step exceeded a table-level limit.
    pub table_limit_hit: bool,
    /// Largest ids in a partition.
    pub observed_max_ids: u64,
    /// Largest unique ids in a partition.
    pub observed_max_unique: u64,
    /// Largest padded ids of the chip in a step (against the static CSR buffer).
    pub padded_ids_per_chip: u64,
}

/// The busiest partition over the run.
#[derive(Clone, Debug, Default)]
pub struct Straggler {
    /// Global partition index.
    pub partition: u32,
    /// Its ids over the mean partition's.
    pub ratio: f64,
    /// The chip holding it.
    pub chip: u32,
    /// Its ids beyond noise, over all chips.
    pub excess_ids: f64,
    /// The hottest id at that step: table, id, samples of the chip holding it.
    pub hottest: Option<(String, i32, u64)>,
}

/// The run's SparseCore work and limit outcomes.
#[derive(Clone, Debug, Default)]
pub struct RunWork {
    /// Per step.
    pub steps: Vec<StepWork>,
    /// Per stack name.
    pub stacks: BTreeMap<String, StackRun>,
    /// The straggler.
    pub straggler: Straggler,
    /// First out-of-range ids (up to 8) with their step.
    pub out_of_range: Vec<(u32, OutOfRangeId)>,
    /// Out-of-range ids over the run.
    pub out_of_range_count: u64,
    /// Per table: largest ids / unique ids one SparseCore sent it in a step.
    pub table_ids_max: BTreeMap<String, (u64, u64)>,
    /// Steps after which the work repeats: step `i`'s work is step `i mod period`'s (the ids
    /// repeat, [`crate::ids::id_period`], and the work is a pure function of them). None: ids are
    /// generated anew every step.
    pub period: Option<u32>,
}

/// Preprocesses every step's ids (the bit-exact algorithm) and counts each SparseCore's work; a
/// sweep's `cache` shares generated ids and step work between its runs.
pub fn run_work(p: &Plan, cache: Option<&RunCache>) -> Result<RunWork, WorkloadError> {
    let w = &p.w;
    let mut out = RunWork::default();
    if !p.has_sparsecore_tables() {
        out.steps = vec![StepWork::default(); w.steps as usize];
        out.period = Some(1);
        return Ok(out);
    }
    out.period = crate::ids::id_period(&p.sc_w.features);
    let spec = p.spec();
    let samples_per_sc = w.batch_per_chip() / spec.sparsecores_per_chip.max(1) as u64;
    // Step work depends on the SparseCore workload and its preprocessing spec, and of the slice only
    // on the batch per chip (the spec carries the partition count): configurations of other chips
    // or chip counts with the same spec share it (tpu7x x N and v6e x 2N, v4 and v5p).
    let sc_key = cache.map(|_| {
        let mut sc = p.sc_w.clone();
        sc.chip.clear();
        (sc.global_batch, sc.chips, sc.topology) = (sc.batch_per_chip(), 1, None);
        sc
    });
    let work_key = sc_key
        .as_ref()
        .and_then(|sc| serde_json::to_string(&(sc, &p.pspec)).ok());
    // The hottest id depends on the SparseCore tables and features and the chip's batch only.
    let hot_key = sc_key.as_ref().and_then(|sc| serde_json::to_string(sc).ok());
    // The batch of the step with the worst straggler, for its hottest id.
    let mut worst_batch = None;
    // The first period's work: later steps read the same ids, so their work is a copy, not a rerun
    // of the preprocessing (nor a read of the files).
    let mut first_period: Vec<crate::stepwork::StepWork> = Vec::new();
    for step in 0..w.steps {
        let repeat = out
            .period
            .filter(|&q| step >= q)
            .and_then(|q| first_period.get((step % q) as usize));
        let (mut sw, batch) = match repeat {
            Some(sw) => (sw.clone(), None),
            None => {
                let mut batch = match cache {
                    Some(c) => c.batch_for_step(w, step)?,
                    None => batch_for_step(w, step)?,
                };
                batch.retain(|name, _| p.sc_w.features.iter().any(|f| &f.name == name));
                let mut sw = match (cache, &work_key) {
                    (Some(c), Some(key)) => {
                        (*c.step_work(key, step, || crate::stepwork::step_work(&p.sc_w, &p.pspec, &batch))?).clone()
                    }
                    _ => crate::stepwork::step_work(&p.sc_w, &p.pspec, &batch)?,
                };
                sw.stacks
                    .sort_by_key(|(n, _)| p.stacks.iter().position(|d| &d.def.name == n).unwrap_or(usize::MAX));
                if out.period.is_some() {
                    first_period.push(sw.clone());
                }
                (sw, Some(batch))
            }
        };
        let cw = crate::stepwork::chip_work(&sw, w.chips, spec.sparsecores_per_chip, samples_per_sc);
        let new_worst = cw.straggler.1 > out.straggler.ratio;
        if new_worst {
            out.straggler = Straggler {
                partition: cw.straggler.0,
                ratio: cw.straggler.1,
                chip: cw.chip,
                excess_ids: cw.excess_ids,
                hottest: None,
            };
        }
        for (t, &(i, u)) in &sw.table_ids_per_sc {
            let e = out.table_ids_max.entry(t.clone()).or_default();
            *e = (e.0.max(i), e.1.max(u));
        }
        out.out_of_range_count += sw.out_of_range_count;
        for o in sw.out_of_range.drain(..) {
            if out.out_of_range.len() < 8 {
                out.out_of_range.push((step, o));
            }
        }
        for (name, st) in &sw.stacks {
            let v = out.stacks.entry(name.clone()).or_default();
            v.observed_max_ids = v.observed_max_ids.max(st.observed_max_ids);
            v.observed_max_unique = v.observed_max_unique.max(st.observed_max_unique);
            v.padded_ids_per_chip = v.padded_ids_per_chip.max(st.padded_ids_per_chip);
            if st.runtime > v.runtime || (v.message.is_empty() && st.runtime == v.runtime) {
                v.runtime = st.runtime;
                v.message = st.message.clone();
                v.table_limit_hit = st.table_limit_hit;
            }
        }
        // A repeated step has its period's straggler ratio, never a larger one: its batch is not needed.
        if let (true, Some(batch)) = (new_worst, batch) {
            worst_batch = Some((step, batch));
        }
        out.steps.push(StepWork {
            per_stack: cw.per_stack,
            minibatches: sw.stacks.iter().map(|(_, s)| s.minibatches.max(1)).collect(),
            // Without id dropping, ids over the limits abort the step (a verdict), not drops.
            dropped: if w.limits.allow_id_dropping {
                sw.stacks.iter().map(|(_, s)| s.dropped).sum()
            } else {
                0
            },
            ids: sw.ids,
        });
    }
    // The hottest id explains a straggler; it costs a pass over the batch, so only then, and once.
    if out.straggler.ratio > 1.25 {
        if let Some((step, b)) = &worst_batch {
            out.straggler.hottest = match (cache, &hot_key) {
                (Some(c), Some(key)) => c.hottest_id(key, *step, || crate::stepwork::hottest_id(&p.sc_w, b)),
                _ => crate::stepwork::hottest_id(&p.sc_w, b),
            };
        }
    }
    Ok(out)
}
