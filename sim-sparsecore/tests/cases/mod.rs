//! Pieces of the random preprocessing cases the property tests share (`preprocess_props.rs`,
//! `stream_props.rs`): the id stream, the tables, and the skewed ids.

use sim_sparsecore::preprocess::{Combiner, TableSpec};

/// A xorshift64 stream seeded by `seed` (made odd, so never the all-zero state).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// One table per vocabulary size, named `t0`, `t1`, ..., embedding dim 8.
pub fn tables(
    vocabs: &[u64],
    combiner: Combiner,
    (limit, unique_limit): (u32, u32),
    suggested: Option<u64>,
) -> Vec<TableSpec> {
    vocabs
        .iter()
        .enumerate()
        .map(|(i, &v)| TableSpec {
            name: format!("t{i}"),
            vocabulary_size: v,
            embedding_dim: 8,
            combiner,
            max_ids_per_partition: limit,
            max_unique_ids_per_partition: unique_limit,
            suggested_coo_buffer_size_per_device: suggested,
        })
        .collect()
}

/// An id below `vocab` from the random draw `r`: a third of them among the first four, so columns
/// repeat within a row.
pub fn skewed_id(r: u64, vocab: u64) -> i32 {
    (if r.is_multiple_of(3) { r % 4 } else { (r >> 8) % vocab }) as i32
}
