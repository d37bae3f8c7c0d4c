//! Property: no id is lost or invented. With unit weights and the sum combiner every output entry's
//! gain counts the raw ids merged into it, so gains plus dropped ids equal the ids given, whatever the
//! limits, dropping, minibatching and devices.

use proptest::prelude::*;
use sim_sparsecore::preprocess::{
    preprocess, BatchIds, Combiner, FeatureIds, FeatureSpec, Options, PreprocessSpec, TableSpec,
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
        let mut x = seed | 1;
        let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
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
