//! Host preprocessing of embedding ids, bit-exact with jax-tpu-embedding 0.1.0
//! (reference/sparsecore-preprocessing.md and preprocess-contract.md): stacking, splitting rows
//! across devices and SparseCores, mod sharding, within-sample dedup, gains, sort order, id dropping,
//! CSR row pointers with 8-alignment, static-buffer overflow, minibatching, and statistics.

pub(crate) mod error;
mod group;
pub mod input;
pub mod minibatch;
pub mod npy;
mod radix;
pub mod spec;
pub mod stacking;
mod stream;
mod tally;
mod validate;

use rayon::prelude::*;
use serde::Serialize;

pub use error::{LimitExceeded, LimitKind, PreprocessError};
pub use group::coo_buffer_size;
pub use input::{read_npz, BatchIds, FeatureIds};
pub use spec::{Combiner, FeatureSpec, PreprocessSpec, StackLimits, TableSpec};
pub use stacking::{build_stacks, stack_name, Stack};
pub use stream::preprocess_stats_npz;

/// Padding written into the COO buffers (embedding and sample ids; gains are NaN).
pub const PAD_VALUE: i32 = i32::MAX;
/// Row pointers and COO segments are aligned to this many entries (a vector register's sublanes).
pub const ALIGNMENT: usize = 8;
/// Buckets used by minibatching.
pub const MINIBATCH_BUCKETS: usize = 64;

/// Per-stack output, as jax-tpu-embedding returns it (arrays flattened over local devices).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StackOutput {
    /// CSR row pointers.
    pub row_pointers: Vec<i32>,
    /// Local embedding ids (row in the partition's shard).
    pub embedding_ids: Vec<i32>,
    /// Sample ids within the SparseCore's batch.
    pub sample_ids: Vec<i32>,
    /// Gains (NaN in padding).
    pub gains: Vec<f32>,
    /// Minibatches per SparseCore.
    pub num_minibatches: u32,
    /// Per (local device, partition): max over source SparseCores of ids after dedup.
    pub max_ids_per_partition: Vec<u32>,
    /// Per (local device, partition): max over source SparseCores of unique ids.
    pub max_unique_ids_per_partition: Vec<u32>,
    /// Per local SparseCore: sum over partitions of ids rounded up to 8.
    pub required_buffer_sizes: Vec<u32>,
    /// Raw ids dropped (limits with dropping, or static buffer overflow).
    pub dropped_id_count: u64,
    /// Per local SparseCore: ids after dedup, summed over partitions (work for the timing model).
    #[serde(skip)]
    pub ids_per_sc: Vec<u32>,
    /// Per local SparseCore: unique ids summed over partitions.
    #[serde(skip)]
    pub unique_per_sc: Vec<u32>,
    /// Per global partition (destination SparseCore): ids after dedup, summed over every local source
    /// SparseCore; the load a partition's owner sees, so skew shows here and not in `ids_per_sc`.
    #[serde(skip)]
    pub ids_per_partition: Vec<u64>,
    /// Per global partition: unique ids summed over local source SparseCores.
    #[serde(skip)]
    pub unique_per_partition: Vec<u64>,
}

/// The result of preprocessing one batch.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PreprocessOutput {
    /// Stacks in processing order, with names.
    pub stacks: Vec<(String, StackOutput)>,
}

/// Options beyond the spec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Compute statistics only (no COO buffers written; dropped counts still exact).
    pub stats_only: bool,
}

/// Preprocesses one batch of ids for every stack of the spec.
pub fn preprocess(spec: &PreprocessSpec, ids: &BatchIds, opts: Options) -> Result<PreprocessOutput, PreprocessError> {
    run(spec, ids, opts, false).map(|(o, _)| o)
}

/// [`preprocess`], or where it would fail on a limit, what it gives with `allow_id_dropping` set,
/// with the limit it failed on: `Ok((output, None))` or `Ok((dropping output, Some(limit)))`. One
/// grouping serves both, since the statistics before dropping are the same and dropping changes
/// nothing where no limit is exceeded (the timing model goes on past a failing step this way).
pub fn preprocess_or_drop(
    spec: &PreprocessSpec,
    ids: &BatchIds,
    opts: Options,
) -> Result<(PreprocessOutput, Option<LimitExceeded>), PreprocessError> {
    if spec.allow_id_dropping {
        return run(spec, ids, opts, false);
    }
    let mut dropping = spec.clone();
    dropping.allow_id_dropping = true;
    run(&dropping, ids, opts, true)
}

/// `preprocess`; with `report_limits` (a spec that drops ids), also the first limit the spec
/// without dropping fails on.
fn run(
    spec: &PreprocessSpec,
    ids: &BatchIds,
    opts: Options,
    report_limits: bool,
) -> Result<(PreprocessOutput, Option<LimitExceeded>), PreprocessError> {
    spec.validate()?;
    crate::crosscheck::check_batch(spec, ids)?;
    // Stacks without features produce nothing, as in jax-tpu-embedding.
    let stacks: Vec<Stack> = build_stacks(spec)
        .into_iter()
        .filter(|s| !s.features.is_empty())
        .collect();
    let features: Vec<&FeatureIds> = spec.features.iter().map(|f| &ids[&f.name]).collect();
    // Statistics alone are counted (no sort, no buffers) unless counting cannot be exact for a stack
    // (ids dropped, a column out of range, a COO buffer overflowing): that stack is sorted as the
    // full path does. Stacks run in parallel; results and the first error are taken in stack order.
    let group_all = |buckets_on: bool| -> Result<Vec<group::StackGroups>, PreprocessError> {
        let results: Vec<Result<group::StackGroups, PreprocessError>> = stacks
            .par_iter()
            .map(|s| {
                let g = group::group_stack(spec, s, &features, buckets_on, opts.stats_only, report_limits)?;
                if g.needs_sort {
                    return group::group_stack(spec, s, &features, buckets_on, false, report_limits);
                }
                Ok(g)
            })
            .collect();
        results.into_iter().collect()
    };
    // Pass 1: no buckets.
    let mut grouped = group_all(false)?;
    let mut split = 0u64;
    let buckets_on = spec.enable_minibatching && grouped.iter().any(|g| g.exceeds_limits);
    if buckets_on {
        // Pass 2: bucketed, with the split tree ORed over every stack, SparseCore and partition.
        grouped = group_all(true)?;
        split = grouped.iter().fold(0, |acc, g| acc | g.split);
    }
    // The failing run stops at the first stack in order over a limit.
    let violation = grouped.iter_mut().find_map(|g| g.violation.take());
    let filled: Vec<Result<StackOutput, PreprocessError>> = stacks
        .par_iter()
        .zip(grouped)
        .map(|(stack, g)| {
            let g = if g.counted_only && !group::counts_fit_buffer(spec, stack, &g)? {
                group::group_stack(spec, stack, &features, buckets_on, false, false)?
            } else {
                g
            };
            group::fill_stack(spec, stack, g, split, opts)
        })
        .collect();
    let mut out = PreprocessOutput::default();
    for (stack, o) in stacks.iter().zip(filled) {
        out.stacks.push((stack.name.clone(), o?));
    }
    Ok((out, violation))
}

#[cfg(test)]
mod tests;
