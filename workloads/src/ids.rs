//! Id generators: per step, the ids one chip's host passes (dense or ragged per feature), from the
//! workload's valency and id distributions, deterministic for a seed.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Poisson, Zipf};
use sim_sparsecore::preprocess::{BatchIds, FeatureIds, FeatureSpec, PreprocessSpec, TableSpec};

use crate::spec::{IdDist, Valency, Workload};

/// Largest valency a feature is declared with (defined with the spec, which needs it too).
pub use crate::spec::max_valency;

/// The preprocessing spec of one chip of the workload (one local device of `chips`).
pub fn preprocess_spec(w: &Workload, sc_per_device: u32) -> PreprocessSpec {
    let limits = &w.limits;
    PreprocessSpec {
        num_sc_per_device: sc_per_device,
        local_device_count: 1,
        global_device_count: w.chips,
        allow_id_dropping: limits.allow_id_dropping,
        enable_minibatching: limits.enable_minibatching,
        tables: w
            .tables
            .iter()
            .map(|t| TableSpec {
                name: t.name.clone(),
                vocabulary_size: t.vocab,
                embedding_dim: t.dim,
                combiner: t.combiner,
                max_ids_per_partition: limits.max_ids_per_partition.unwrap_or(256),
                max_unique_ids_per_partition: limits.max_unique_ids_per_partition.unwrap_or(256),
                suggested_coo_buffer_size_per_device: None,
            })
            .collect(),
        features: w
            .features
            .iter()
            .map(|f| FeatureSpec {
                name: f.name.clone(),
                table: f.table.clone(),
                input_shape: vec![w.batch_per_chip(), max_valency(&f.valency)],
            })
            .collect(),
        stacks: if w.disable_table_stacking {
            vec![]
        } else {
            auto_stacks(w, sc_per_device)
        },
        stack_limits: Default::default(),
    }
    .with_default_stack_limits(limits.max_ids_per_partition, limits.max_unique_ids_per_partition)
}

/// What tables must share to be stacked: padded dim, optimizer, combiner, dtype.
type StackKey = (u64, String, String, String);

/// Activation memory a stack may use per SparseCore before jax-tpu-embedding splits it (2 MiB).
pub const STACK_ACTIVATION_LIMIT_BYTES: u64 = 2 << 20;

/// Automatic stacking as jax-tpu-embedding does it: tables grouped by (padded dim, optimizer, combiner,
/// dtype) in table order, each group split greedily so that its activations (padded dim x samples per
/// SparseCore x 4 B, summed) stay within 2 MiB. Groups of one table stay unstacked.
pub fn auto_stacks(w: &Workload, sc_per_device: u32) -> Vec<Vec<String>> {
    // (padded dim, optimizer, combiner, dtype), tables of the open stack, its activation bytes.
    let mut groups: Vec<(StackKey, Vec<String>, u64)> = Vec::new();
    let mut out = Vec::new();
    for t in &w.tables {
        let features = w.features.iter().filter(|f| f.table == t.name).count() as u64;
        if features == 0 {
            continue;
        }
        let padded_dim = t.dim.div_ceil(8) * 8;
        let activation = padded_dim * (w.batch_per_chip() * features / sc_per_device.max(1) as u64) * 4;
        let key = (
            padded_dim,
            format!("{:?}", t.optimizer),
            format!("{:?}", t.combiner),
            format!("{:?}", t.dtype),
        );
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) if g.2 + activation <= STACK_ACTIVATION_LIMIT_BYTES => {
                g.1.push(t.name.clone());
                g.2 += activation;
            }
            Some(g) => {
                out.push(std::mem::replace(&mut g.1, vec![t.name.clone()]));
                g.2 = activation;
            }
            None => groups.push((key, vec![t.name.clone()], activation)),
        }
    }
    out.extend(groups.into_iter().map(|g| g.1));
    out.retain(|g| g.len() >= 2);
    out
}

trait WithStackLimits {
    fn with_default_stack_limits(self, max_ids: Option<u32>, max_unique: Option<u32>) -> Self;
}

impl WithStackLimits for PreprocessSpec {
    /// Multi-table stacks take the workload's limits (the contract reads stack limits from stack_limits).
    fn with_default_stack_limits(mut self, max_ids: Option<u32>, max_unique: Option<u32>) -> Self {
        for group in &self.stacks {
            let name = sim_sparsecore::preprocess::stack_name(group);
            self.stack_limits
                .entry(name)
                .or_insert(sim_sparsecore::preprocess::StackLimits {
                    max_ids_per_partition: max_ids,
                    max_unique_ids_per_partition: max_unique,
                    suggested_coo_buffer_size_per_device: None,
                });
        }
        self
    }
}

/// Scatters Zipf ranks over the vocabulary so hot ids do not all land in one partition.
fn scatter(rank: u64, vocab: u64) -> u64 {
    (rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) % vocab
}

/// Steps after which the ids of `features` repeat, when that is certain: each feature reading NPZ
/// files reads file `step mod files` ([`batch_for_step`]), so when all of them do, step `i` and step
/// `i + period` read the same files and get the same ids (the least common multiple of the file
/// counts; 1 with one file each, or with no features). None when any feature's ids are generated
/// (new ids every step) or the multiple exceeds `u32`.
pub fn id_period(features: &[crate::spec::FeatureDef]) -> Option<u32> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut period = 1u64;
    for f in features {
        let IdDist::Npz(files) = &f.ids else {
            return None;
        };
        let n = files.len().max(1) as u64;
        period = (period / gcd(period, n)).checked_mul(n)?;
    }
    u32::try_from(period).ok()
}

/// The ids of one chip for one step (generated, or read from the feature's NPZ files).
pub fn batch_for_step(w: &Workload, step: u32) -> Result<BatchIds, crate::spec::WorkloadError> {
    let mut out = generate_batch(w, step);
    for f in &w.features {
        if let IdDist::Npz(files) = &f.ids {
            let path = &files[step as usize % files.len()];
            let mut batch = sim_sparsecore::preprocess::read_npz(path).map_err(|e| {
                crate::spec::WorkloadError::Spec(format!("features.{}: {}: {e}", f.name, path.display()))
            })?;
            let ids = batch.remove(&f.name).ok_or_else(|| {
                crate::spec::WorkloadError::Spec(format!(
                    "features.{}: {} has no array '{}'",
                    f.name,
                    path.display(),
                    f.name
                ))
            })?;
            if ids.rows() as u64 != w.batch_per_chip() {
                return Err(crate::spec::WorkloadError::Spec(format!(
                    "features.{}: {} has {} rows, the batch per chip is {}",
                    f.name,
                    path.display(),
                    ids.rows(),
                    w.batch_per_chip()
                )));
            }
            // With the on-device id bound check asked for, out-of-range ids are what the run models
            // (the check fails the step); without it they would be read silently, so they are bad input.
            if let Some(t) = w.tables.iter().find(|t| t.name == f.table) {
                if !w.xla_sparse_core_enable_id_bound_check {
                    sim_sparsecore::crosscheck::check_feature_vocabulary(&f.name, &t.name, t.vocab, &ids.values)
                        .map_err(|e| {
                            crate::spec::WorkloadError::Spec(format!(
                                "features.{}: {}: {e} (set xla_sparse_core_enable_id_bound_check = true to model the device's id bound check instead)",
                                f.name,
                                path.display()
                            ))
                        })?;
                }
            }
            let widest = ids.row_splits.windows(2).map(|r| r[1] - r[0]).max().unwrap_or(0) as u64;
            if widest > max_valency(&f.valency) {
                return Err(crate::spec::WorkloadError::Spec(format!(
                    "features.{}: {} has rows of {widest} ids, but features.{}.valency allows at most {}",
                    f.name,
                    path.display(),
                    f.name,
                    max_valency(&f.valency)
                )));
            }
            out.insert(f.name.clone(), ids);
        }
    }
    if w.shuffle_ids {
        for f in &w.features {
            let Some(t) = w.tables.iter().position(|t| t.name == f.table) else {
                continue;
            };
            if let Some(ids) = out.get_mut(&f.name) {
                let vocab = w.tables[t].vocab;
                for v in &mut ids.values {
                    if *v >= 0 && (*v as u64) < vocab {
                        *v = shuffle_id(*v as u64, vocab, t as u64) as i32;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A fixed bijection of [0, vocab): odd multiplies and xor-shifts are bijections of [0, 2^k), and
/// cycle-walking keeps the result inside the vocabulary. Unlike an affine map mod vocab it does not
/// keep ids' residues mod the partition count, so ids that shared a partition spread out.
pub fn shuffle_id(id: u64, vocab: u64, salt: u64) -> u64 {
    if vocab <= 1 {
        return id;
    }
    let bits = 64 - (vocab - 1).leading_zeros();
    let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let shift = bits.div_ceil(2).max(1);
    let mult = (0x9E37_79B9_7F4A_7C15u64 ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93)) | 1;
    let mut x = id;
    loop {
        x = x.wrapping_mul(mult) & mask;
        x ^= x >> shift;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9) & mask;
        x ^= x >> shift;
        if x < vocab {
            return x;
        }
    }
}

/// Caps each stack's per-partition limits by its tables' `max_ids_per_table` /
/// `max_unique_ids_per_table` (summed over the stack's tables, rounded up to 8): a SparseCore can never
/// send a partition more ids of a table than it sends all partitions together. Stacks with a table
/// lacking a table-level limit keep their per-partition limit.
pub fn apply_table_limits(spec: &mut PreprocessSpec, w: &Workload) {
    let limits = &w.limits;
    if limits.max_ids_per_table.is_empty() && limits.max_unique_ids_per_table.is_empty() {
        return;
    }
    for stack in sim_sparsecore::preprocess::build_stacks(spec) {
        let cap = |m: &std::collections::BTreeMap<String, u32>| -> Option<u32> {
            stack
                .tables
                .iter()
                .map(|t| m.get(&t.name).map(|&v| v as u64))
                .sum::<Option<u64>>()
                .map(|v| v.div_ceil(8).saturating_mul(8).min(u32::MAX as u64) as u32)
        };
        let (ids_cap, unique_cap) = (cap(&limits.max_ids_per_table), cap(&limits.max_unique_ids_per_table));
        let ids = ids_cap.map_or(stack.max_ids_per_partition, |c| c.min(stack.max_ids_per_partition));
        let unique = unique_cap.map_or(stack.max_unique_ids_per_partition, |c| {
            c.min(stack.max_unique_ids_per_partition)
        });
        if stack.tables.len() == 1 {
            if let Some(t) = spec.tables.iter_mut().find(|t| t.name == stack.tables[0].name) {
                t.max_ids_per_partition = ids;
                t.max_unique_ids_per_partition = unique;
            }
        } else {
            let e = spec.stack_limits.entry(stack.name.clone()).or_default();
            e.max_ids_per_partition = Some(ids);
            e.max_unique_ids_per_partition = Some(unique);
        }
    }
}

/// Generated ids of one chip for one step (features with NPZ ids get none here).
pub fn generate_batch(w: &Workload, step: u32) -> BatchIds {
    let rows = w.batch_per_chip() as usize;
    let mut out = BatchIds::new();
    for (fi, f) in w.features.iter().enumerate() {
        if matches!(f.ids, IdDist::Npz(_)) {
            continue;
        }
        let vocab = w.tables.iter().find(|t| t.name == f.table).map_or(1, |t| t.vocab);
        let mut rng = ChaCha8Rng::seed_from_u64(w.seed ^ ((step as u64) << 32) ^ (fi as u64 * 0x51_7CC1_B727_220A));
        let zipf = match f.ids {
            IdDist::Zipf(a) => Zipf::new(vocab, a).ok(),
            _ => None,
        };
        let poisson = match f.valency {
            Valency::Poisson(m) => Poisson::new(m).ok(),
            _ => None,
        };
        let cap = max_valency(&f.valency);
        let mut values = Vec::new();
        let mut splits = vec![0usize];
        for _ in 0..rows {
            let n = match f.valency {
                Valency::Fixed(n) => n,
                Valency::Uniform([lo, hi]) => rng.gen_range(lo..=hi),
                Valency::Poisson(_) => (poisson.map_or(1.0, |p| p.sample(&mut rng)) as u64).clamp(1, cap),
            };
            for _ in 0..n {
                let id = match &f.ids {
                    IdDist::Uniform => rng.gen_range(0..vocab),
                    IdDist::Zipf(_) => scatter(zipf.map_or(1.0, |z| z.sample(&mut rng)) as u64, vocab),
                    IdDist::Npz(_) => 0,
                    IdDist::HotSet { fraction, size, stride } => {
                        if rng.gen_bool(fraction.clamp(0.0, 1.0)) {
                            let k = rng.gen_range(0..(*size).clamp(1, vocab));
                            if *stride == 0 {
                                scatter(k, vocab)
                            } else {
                                (k * stride) % vocab
                            }
                        } else {
                            rng.gen_range(0..vocab)
                        }
                    }
                };
                values.push(id.min(i32::MAX as u64) as i32);
            }
            splits.push(values.len());
        }
        out.insert(
            f.name.clone(),
            FeatureIds {
                values,
                row_splits: splits,
                weights: None,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_period_is_the_lcm_of_the_file_counts() {
        let mut w = Workload::preset("dlrm-small").unwrap();
        // Generated ids: new every step.
        assert_eq!(id_period(&w.features), None);
        let files = |n: usize| IdDist::Npz((0..n).map(|i| format!("{i}.npz").into()).collect());
        for f in &mut w.features {
            f.ids = files(1);
        }
        assert_eq!(id_period(&w.features), Some(1));
        w.features[0].ids = files(4);
        w.features[1].ids = files(6);
        assert_eq!(id_period(&w.features), Some(12));
        w.features[2].ids = IdDist::Uniform;
        assert_eq!(id_period(&w.features), None);
        assert_eq!(id_period(&[]), Some(1));
    }

    #[test]
    fn shuffle_is_a_bijection_of_the_vocabulary() {
        for vocab in [1u64, 2, 7, 16, 100, 4096, 5000, 65_537] {
            for salt in 0..3 {
                let mut seen: Vec<u64> = (0..vocab).map(|i| shuffle_id(i, vocab, salt)).collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..vocab).collect::<Vec<_>>(), "vocab {vocab} salt {salt}");
            }
        }
    }

    #[test]
    fn shuffle_spreads_ids_of_one_residue() {
        // 64 ids that are all 0 mod 16 land on 16 partitions after shuffling.
        let mut parts: Vec<u64> = (0..64).map(|k| shuffle_id(k * 16, 1_000_000, 0) % 16).collect();
        parts.sort_unstable();
        parts.dedup();
        assert!(parts.len() >= 12, "{parts:?}");
    }
}
