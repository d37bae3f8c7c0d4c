//! Stacking as jax-tpu-embedding's `stack_tables` does it: padded vocabularies and dims, row offsets
//! in shards, shard rotation, stack names and limits, and each feature's transform.

use sha2::{Digest, Sha256};

use super::spec::{Combiner, PreprocessSpec};

/// How a feature's ids map into its stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureInStack {
    /// Index into the spec's features.
    pub feature: usize,
    /// Samples of the preceding features of the stack (global batch).
    pub row_offset: u64,
    /// Column offset: row_offset_in_shard x number of shards.
    pub col_offset: u64,
    /// Column shift: the table's shard rotation.
    pub col_shift: u64,
}

/// A table's place in a stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInStack {
    /// Table name.
    pub name: String,
    /// Vocabulary padded to a multiple of 8 x SparseCores.
    pub padded_vocab: u64,
    /// Dim padded to a multiple of 8.
    pub padded_dim: u64,
    /// Rows of preceding tables in each shard.
    pub row_offset_in_shard: u64,
    /// Shard rotation.
    pub shard_rotation: u64,
}

/// A stack of tables processed together.
#[derive(Clone, Debug, PartialEq)]
pub struct Stack {
    /// Stack name (jax-tpu-embedding's).
    pub name: String,
    /// Member tables, in order.
    pub tables: Vec<TableInStack>,
    /// Features, in processing order.
    pub features: Vec<FeatureInStack>,
    /// Combiner shared by the tables.
    pub combiner: Combiner,
    /// max_ids_per_partition.
    pub max_ids_per_partition: u32,
    /// max_unique_ids_per_partition.
    pub max_unique_ids_per_partition: u32,
    /// Suggested COO buffer size per device.
    pub suggested_coo_buffer_size_per_device: Option<u64>,
    /// Sum of padded vocabularies.
    pub stack_vocab_size: u64,
    /// Largest padded dim.
    pub stack_embedding_dim: u64,
}

/// A stack name: names joined by `_`; longer than 50 characters: first 50 + "..." + 12 hex digits of sha256.
pub fn stack_name(tables: &[String]) -> String {
    let joined = tables.join("_");
    if joined.len() <= 50 {
        return joined;
    }
    let digest = Sha256::digest(joined.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let head: String = joined.chars().take(50).collect();
    format!("{head}...{}", &hex[..12])
}

/// Builds the stacks of a spec with the default rotation (num_sc_per_device).
pub fn build_stacks(spec: &PreprocessSpec) -> Vec<Stack> {
    build_stacks_with_rotation(spec, spec.num_sc_per_device as u64)
}

/// Builds the stacks with a given shard rotation step.
pub fn build_stacks_with_rotation(spec: &PreprocessSpec, rotation: u64) -> Vec<Stack> {
    let num_scs = spec.num_scs() as u64;
    let mut groups: Vec<Vec<String>> = spec.stacks.clone();
    let stacked: std::collections::BTreeSet<&String> = spec.stacks.iter().flatten().collect();
    // Tables in no list are stacks of their own; their features are ordered by name.
    let mut singles: Vec<String> = spec
        .tables
        .iter()
        .filter(|t| !stacked.contains(&t.name))
        .map(|t| t.name.clone())
        .collect();
    singles.sort();
    groups.extend(singles.into_iter().map(|t| vec![t]));
    let mut stacks = Vec::new();
    for group in groups {
        let name = stack_name(&group);
        let mut tables = Vec::new();
        let (mut row_offset_in_shard, mut rotation_acc) = (0u64, 0u64);
        for (k, tname) in group.iter().enumerate() {
            let t = spec.tables.iter().find(|t| &t.name == tname).expect("validated");
            if k > 0 {
                rotation_acc = (rotation_acc + rotation) % num_scs;
            }
            let padded_vocab = t.vocabulary_size.div_ceil(8 * num_scs) * 8 * num_scs;
            tables.push(TableInStack {
                name: tname.clone(),
                padded_vocab,
                padded_dim: t.embedding_dim.div_ceil(8) * 8,
                row_offset_in_shard,
                shard_rotation: rotation_acc,
            });
            row_offset_in_shard += padded_vocab / num_scs;
        }
        let first = spec.tables.iter().find(|t| t.name == group[0]).expect("validated");
        let (max_ids, max_unique, suggested) = if group.len() == 1 {
            (
                first.max_ids_per_partition,
                first.max_unique_ids_per_partition,
                first.suggested_coo_buffer_size_per_device,
            )
        } else {
            let l = spec.stack_limits.get(&name).cloned().unwrap_or_default();
            (
                l.max_ids_per_partition.unwrap_or(256),
                l.max_unique_ids_per_partition.unwrap_or(256),
                l.suggested_coo_buffer_size_per_device,
            )
        };
        // Features: listed order within a multi-table stack, name order for a single table.
        let mut feats: Vec<usize> = (0..spec.features.len())
            .filter(|&i| group.contains(&spec.features[i].table))
            .collect();
        if group.len() == 1 {
            feats.sort_by(|&a, &b| spec.features[a].name.cmp(&spec.features[b].name));
        }
        let mut row_offset = 0u64;
        let mut features = Vec::new();
        for fi in feats {
            let f = &spec.features[fi];
            let t = tables.iter().find(|t| t.name == f.table).expect("validated");
            features.push(FeatureInStack {
                feature: fi,
                row_offset,
                col_offset: t.row_offset_in_shard * num_scs,
                col_shift: t.shard_rotation,
            });
            row_offset += f.input_shape[0] * spec.global_device_count as u64 / spec.local_device_count as u64;
        }
        stacks.push(Stack {
            name,
            stack_vocab_size: tables.iter().map(|t| t.padded_vocab).sum(),
            stack_embedding_dim: tables.iter().map(|t| t.padded_dim).max().unwrap_or(0),
            tables,
            features,
            combiner: first.combiner,
            max_ids_per_partition: max_ids,
            max_unique_ids_per_partition: max_unique,
            suggested_coo_buffer_size_per_device: suggested,
        });
    }
    stacks
}
