//! Property: no id is lost or invented. With unit weights and the sum combiner every output entry's
//! gain counts the raw ids merged into it, so gains plus dropped ids equal the ids given, whatever the
//! limits, dropping, minibatching and devices.

use proptest::prelude::*;

mod cases;
use cases::{skewed_id, tables, xorshift};
use sim_sparsecore::preprocess::{
    preprocess, preprocess_or_drop, BatchIds, Combiner, FeatureIds, FeatureSpec, LimitExceeded, Options,
    PreprocessError, PreprocessOutput, PreprocessSpec, StackOutput, TableSpec,
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn ids_are_conserved(
        nsc in prop_oneof![Just(1u32), Just(2), Just(4)],
        g in prop_oneof![Just(1u32), Just(2)],
        vocab in 1u64..200,
        limit in 1u32..40,
        mb in any::<bool>(),
        rows_per_sc in 1usize..5,
        valency in 1usize..9,
        seed in any::<u64>(),
    ) {
        let rows = rows_per_sc * nsc as usize;
        let mut next = xorshift(seed);
        let values: Vec<i32> = (0..rows * valency).map(|_| (next() % vocab) as i32).collect();
        let spec = PreprocessSpec {
            num_sc_per_device: nsc, local_device_count: 1, global_device_count: g,
            allow_id_dropping: true, enable_minibatching: mb,
            tables: vec![TableSpec { name: "t".into(), vocabulary_size: vocab, embedding_dim: 8, combiner: Combiner::Sum,
                max_ids_per_partition: limit, max_unique_ids_per_partition: limit.div_ceil(2),
                suggested_coo_buffer_size_per_device: None }],
            features: vec![FeatureSpec { name: "f".into(), table: "t".into(), input_shape: vec![rows as u64, valency as u64] }],
            stacks: vec![], stack_limits: Default::default(),
        };
        let ids: BatchIds = [("f".to_string(), FeatureIds::dense(values, rows, valency).unwrap())].into_iter().collect();
        let out = preprocess(&spec, &ids, Options::default()).unwrap();
        let o = &out.stacks[0].1;
        let kept: f64 = o.gains.iter().filter(|g| !g.is_nan()).map(|&g| g as f64).sum();
        prop_assert_eq!(kept as u64 + o.dropped_id_count, (rows * valency) as u64);
        // Stats-only mode agrees on every statistic.
        let s = preprocess(&spec, &ids, Options { stats_only: true }).unwrap();
        let so = &s.stacks[0].1;
        prop_assert_eq!(&so.max_ids_per_partition, &o.max_ids_per_partition);
        prop_assert_eq!(so.dropped_id_count, o.dropped_id_count);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Statistics by counting (`stats_only`) are bit-identical to the full CSR path's (the
    /// reference), errors included: several stacks and features, ragged rows with duplicates,
    /// weights, devices, limits that bind or not, dropping, minibatching, small COO buffers.
    #[test]
    fn counted_statistics_equal_the_full_path(
        nsc in prop_oneof![Just(1u32), Just(2), Just(4)],
        ldev in prop_oneof![Just(1u32), Just(2)],
        g_extra in prop_oneof![Just(1u32), Just(2)],
        vocabs in proptest::collection::vec(1u64..3000, 1..4),
        stacked in any::<bool>(),
        limit in 1u32..300,
        unique_limit in 1u32..300,
        drop in any::<bool>(),
        mb in any::<bool>(),
        sqrtn in any::<bool>(),
        weighted in any::<bool>(),
        suggested in proptest::option::of(1u64..4000),
        rows_per_sc in 1usize..40,
        max_len in 1usize..80,
        seed in any::<u64>(),
    ) {
        let (spec, ids) = case(nsc, ldev, g_extra, &vocabs, stacked, (limit, unique_limit), (drop, mb, sqrtn, weighted), suggested, rows_per_sc, max_len, seed);
        let full = preprocess(&spec, &ids, Options::default());
        let counted = preprocess(&spec, &ids, Options { stats_only: true });
        match (full, counted) {
            (Ok(f), Ok(c)) => {
                prop_assert_eq!(f.stacks.len(), c.stacks.len());
                for ((n1, a), (n2, b)) in f.stacks.iter().zip(&c.stacks) {
                    prop_assert_eq!(n1, n2);
                    let strip = |o: &StackOutput| StackOutput {
                        row_pointers: vec![], embedding_ids: vec![], sample_ids: vec![], gains: vec![], ..o.clone()
                    };
                    prop_assert_eq!(strip(a), strip(b));
                }
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "full {:?} vs counted {:?}", a.map(|_| ()), b.map(|_| ())),
        }
    }
}

/// A random multi-stack case: the spec and its ids.
#[allow(clippy::too_many_arguments)]
fn case(
    nsc: u32,
    ldev: u32,
    g_extra: u32,
    vocabs: &[u64],
    stacked: bool,
    (limit, unique_limit): (u32, u32),
    (drop, mb, sqrtn, weighted): (bool, bool, bool, bool),
    suggested: Option<u64>,
    rows_per_sc: usize,
    max_len: usize,
    seed: u64,
) -> (PreprocessSpec, BatchIds) {
    let gdev = ldev * g_extra;
    let rows = rows_per_sc * (nsc * gdev) as usize;
    let mut next = xorshift(seed);
    let combiner = if sqrtn { Combiner::Sqrtn } else { Combiner::Sum };
    let tables = tables(vocabs, combiner, (limit, unique_limit), suggested);
    let mut features = Vec::new();
    let mut ids = BatchIds::new();
    for (i, &v) in vocabs.iter().enumerate() {
        // Two features on the first table; skewed ids so some columns repeat within a row.
        for k in 0..if i == 0 { 2 } else { 1 } {
            let name = format!("f{i}_{k}");
            let mut values = Vec::new();
            let mut splits = vec![0usize];
            for _ in 0..rows {
                let len = (next() % (max_len as u64 + 1)) as usize;
                for _ in 0..len {
                    values.push(skewed_id(next(), v));
                }
                splits.push(values.len());
            }
            let weights = weighted.then(|| values.iter().map(|_| (next() % 5) as f32 * 0.5).collect());
            features.push(FeatureSpec {
                name: name.clone(),
                table: format!("t{i}"),
                input_shape: vec![rows as u64, max_len as u64],
            });
            ids.insert(
                name,
                FeatureIds {
                    values,
                    row_splits: splits,
                    weights,
                },
            );
        }
    }
    // One stack of every table (rotated shards, column offsets), or a stack per table.
    let stacks = if stacked {
        vec![tables.iter().map(|t| t.name.clone()).collect()]
    } else {
        vec![]
    };
    let spec = PreprocessSpec {
        num_sc_per_device: nsc,
        local_device_count: ldev,
        global_device_count: gdev,
        allow_id_dropping: drop,
        enable_minibatching: mb,
        tables,
        features,
        stacks,
        stack_limits: Default::default(),
    };
    (spec, ids)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// `preprocess_or_drop` is `preprocess`, or where that fails on a limit, `preprocess` with
    /// dropping and that limit: both paths, errors included.
    #[test]
    fn preprocess_or_drop_is_preprocess_then_dropping(
        nsc in prop_oneof![Just(1u32), Just(2), Just(4)],
        ldev in prop_oneof![Just(1u32), Just(2)],
        g_extra in prop_oneof![Just(1u32), Just(2)],
        vocabs in proptest::collection::vec(1u64..3000, 1..4),
        limit in 1u32..300,
        unique_limit in 1u32..300,
        drop in any::<bool>(),
        mb in any::<bool>(),
        sqrtn in any::<bool>(),
        weighted in any::<bool>(),
        suggested in proptest::option::of(1u64..4000),
        rows_per_sc in 1usize..40,
        max_len in 1usize..80,
        seed in any::<u64>(),
        stats_only in any::<bool>(),
    ) {
        let (spec, ids) = case(nsc, ldev, g_extra, &vocabs, false, (limit, unique_limit), (drop, mb, sqrtn, weighted), suggested, rows_per_sc, max_len, seed);
        let opts = Options { stats_only };
        let reference = match preprocess(&spec, &ids, opts) {
            Ok(o) => Ok((o, None)),
            Err(PreprocessError::LimitExceeded(e)) => {
                let mut dropping = spec.clone();
                dropping.allow_id_dropping = true;
                preprocess(&dropping, &ids, opts).map(|o| (o, Some(e)))
            }
            Err(e) => Err(e),
        };
        // Gains compared by bits: padding holds NaN.
        let bits = |r: Result<(PreprocessOutput, Option<LimitExceeded>), PreprocessError>| {
            r.map(|(o, e)| {
                let stacks: Vec<_> = o
                    .stacks
                    .into_iter()
                    .map(|(n, s)| {
                        let gains: Vec<u32> = s.gains.iter().map(|g| g.to_bits()).collect();
                        (n, StackOutput { gains: vec![], ..s }, gains)
                    })
                    .collect();
                (stacks, e)
            })
        };
        prop_assert_eq!(bits(preprocess_or_drop(&spec, &ids, opts)), bits(reference));
    }
}
