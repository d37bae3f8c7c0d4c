//! The test vectors V1-V14 of reference/sparsecore-preprocessing.md.

use super::*;

const P: i32 = PAD_VALUE;

fn table(name: &str, vocab: u64, max_ids: u32, max_unique: u32, combiner: Combiner) -> TableSpec {
    TableSpec {
        name: name.into(),
        vocabulary_size: vocab,
        embedding_dim: 8,
        combiner,
        max_ids_per_partition: max_ids,
        max_unique_ids_per_partition: max_unique,
        suggested_coo_buffer_size_per_device: None,
    }
}

fn spec1(nsc: u32, t: TableSpec, rows: u64, valency: u64) -> PreprocessSpec {
    PreprocessSpec {
        num_sc_per_device: nsc,
        local_device_count: 1,
        global_device_count: 1,
        allow_id_dropping: false,
        enable_minibatching: false,
        features: vec![FeatureSpec {
            name: "f".into(),
            table: t.name.clone(),
            input_shape: vec![rows, valency],
        }],
        tables: vec![t],
        stacks: vec![],
        stack_limits: Default::default(),
    }
}

fn dense(rows: &[Vec<i32>]) -> FeatureIds {
    let valency = rows[0].len();
    FeatureIds::dense(rows.iter().flatten().copied().collect(), rows.len(), valency).unwrap()
}

fn ragged(rows: &[Vec<i32>], weights: Option<&[Vec<f32>]>) -> FeatureIds {
    let mut splits = vec![0];
    for r in rows {
        splits.push(splits.last().unwrap() + r.len());
    }
    FeatureIds {
        values: rows.iter().flatten().copied().collect(),
        row_splits: splits,
        weights: weights.map(|w| w.iter().flatten().copied().collect()),
    }
}

fn run(spec: &PreprocessSpec, feats: Vec<(&str, FeatureIds)>) -> StackOutput {
    let ids: BatchIds = feats.into_iter().map(|(n, f)| (n.to_string(), f)).collect();
    preprocess(spec, &ids, Options::default()).unwrap().stacks.remove(0).1
}

/// (embedding id, sample id) at a COO position.
fn at(o: &StackOutput, i: usize) -> (i32, i32) {
    (o.embedding_ids[i], o.sample_ids[i])
}

#[test]
fn v1_uniform_rows() {
    let s = spec1(4, table("t", 32, 32, 32, Combiner::Sum), 8, 4);
    let o = run(&s, vec![("f", dense(&vec![vec![0, 1, 2, 3]; 8]))]);
    assert_eq!(o.embedding_ids.len(), 512);
    for sc in 0..4 {
        assert_eq!(o.row_pointers[sc * 8..sc * 8 + 8], [2, 10, 18, 26, 32, 32, 32, 32]);
        for p in 0..4 {
            let base = sc * 128 + p * 8;
            assert_eq!((at(&o, base), at(&o, base + 1)), ((0, 0), (0, 1)));
            assert_eq!(o.embedding_ids[base + 2], P);
            assert!(o.gains[base + 2].is_nan());
        }
    }
    assert_eq!(o.max_ids_per_partition, [2, 2, 2, 2]);
    assert_eq!(o.max_unique_ids_per_partition, [1, 1, 1, 1]);
    assert_eq!(o.required_buffer_sizes, [32, 32, 32, 32]);
    assert_eq!(o.dropped_id_count, 0);
}

#[test]
fn v2_single_ids() {
    let s = spec1(4, table("t", 16, 12, 12, Combiner::Sum), 16, 1);
    let ids = [5, 18, 0, 20, 6, 15, 12, 7, 3, 11, 8, 26, 0, 18, 7, 2];
    let o = run(
        &s,
        vec![("f", dense(&ids.iter().map(|&i| vec![i]).collect::<Vec<_>>()))],
    );
    let per_sc = o.embedding_ids.len() / 4;
    assert_eq!(o.row_pointers[0..4], [2, 9, 17, 24]);
    assert_eq!(o.row_pointers[8..12], [1, 8, 9, 18]);
    assert_eq!(o.row_pointers[16..20], [1, 8, 9, 18]);
    assert_eq!(o.row_pointers[24..28], [1, 8, 10, 17]);
    let c = |sc: usize, i: usize| at(&o, sc * per_sc + i);
    assert_eq!((c(0, 0), c(0, 1), c(0, 8), c(0, 16)), ((0, 2), (5, 3), (1, 0), (4, 1)));
    assert_eq!((c(1, 0), c(1, 8), c(1, 16), c(1, 17)), ((3, 2), (1, 0), (1, 3), (3, 1)));
    assert_eq!((c(2, 0), c(2, 8), c(2, 16), c(2, 17)), ((2, 2), (6, 3), (0, 0), (2, 1)));
    assert_eq!((c(3, 0), c(3, 8), c(3, 9), c(3, 16)), ((0, 0), (0, 3), (4, 1), (1, 2)));
    assert_eq!(o.max_ids_per_partition, [2, 1, 2, 2]);
}

fn v3_rows() -> Vec<Vec<i32>> {
    vec![
        vec![5, 18, 0, 20, 0, 2, 31, 3],
        vec![18, 0, 20, 6, 1, 28, 5, 8],
        vec![0, 20, 6, 15, 12, 7, 3, 11],
        vec![18, 0, 7, 3, 6, 4, 19, 2],
    ]
}

#[test]
fn v3_dedup_within_samples() {
    let s = spec1(4, table("t", 32, 32, 32, Combiner::Sum), 4, 8);
    let o = run(&s, vec![("f", dense(&v3_rows()))]);
    let per_sc = o.embedding_ids.len() / 4;
    assert_eq!(o.row_pointers[0..5], [2, 9, 18, 26, 32]);
    assert_eq!(o.row_pointers[8..12], [4, 10, 18, 24]);
    assert_eq!(o.row_pointers[16..21], [3, 8, 9, 20, 24]);
    assert_eq!(o.row_pointers[24..28], [2, 8, 11, 19]);
    let emb = |sc: usize, a: usize, n: usize| o.embedding_ids[sc * per_sc + a..sc * per_sc + a + n].to_vec();
    assert_eq!(emb(0, 0, 2), [0, 5]);
    assert_eq!(o.gains[0], 2.0);
    assert_eq!(emb(0, 8, 1), [1]);
    assert_eq!(emb(0, 16, 2), [0, 4]);
    assert_eq!(emb(0, 24, 2), [0, 7]);
    assert_eq!(emb(1, 0, 4), [0, 2, 5, 7]);
    assert_eq!(emb(2, 0, 3), [0, 3, 5]);
    assert_eq!(emb(2, 8, 1), [1]);
    assert_eq!(emb(2, 16, 4), [0, 1, 2, 3]);
    assert_eq!(emb(3, 16, 3), [0, 1, 4]);
    assert!(o.sample_ids.iter().all(|&x| x == 0 || x == P));
    assert_eq!(o.max_ids_per_partition, [4, 2, 3, 4]);
    assert_eq!(o.required_buffer_sizes, [32, 24, 24, 24]);
}

#[test]
fn v4_two_sparsecores_ragged() {
    let s = spec1(2, table("t", 16, 16, 16, Combiner::Sum), 2, 10);
    let o = run(
        &s,
        vec![(
            "f",
            ragged(&[vec![0, 0, 0, 2, 4, 1], vec![1, 1, 1, 3, 3, 5, 5, 7, 7, 0]], None),
        )],
    );
    let per_sc = o.embedding_ids.len() / 2;
    assert_eq!(o.row_pointers[0..8], [3, 9, 16, 16, 16, 16, 16, 16]);
    assert_eq!(o.row_pointers[8..16], [1, 12, 16, 16, 16, 16, 16, 16]);
    assert_eq!(o.embedding_ids[0..3], [0, 1, 2]);
    assert_eq!(o.gains[0..3], [3.0, 1.0, 1.0]);
    assert_eq!(o.embedding_ids[8], 0);
    assert_eq!(o.embedding_ids[per_sc], 0);
    assert_eq!(o.embedding_ids[per_sc + 8..per_sc + 12], [0, 1, 2, 3]);
    assert_eq!(o.gains[per_sc + 8..per_sc + 12], [3.0, 2.0, 2.0, 2.0]);
    assert_eq!(o.max_ids_per_partition, [3, 4]);
    assert_eq!(o.max_unique_ids_per_partition, [3, 4]);
    assert_eq!(o.required_buffer_sizes, [16, 16]);
}

#[test]
fn v5_dropping_and_abort() {
    let mut s = spec1(4, table("t", 32, 2, 1, Combiner::Sum), 16, 4);
    s.allow_id_dropping = true;
    let rows = vec![vec![0, 1, 2, 3]; 16];
    let o = run(&s, vec![("f", dense(&rows))]);
    for sc in 0..4 {
        assert_eq!(o.row_pointers[sc * 8..sc * 8 + 5], [2, 10, 18, 26, 32]);
    }
    assert_eq!(at(&o, 0), (0, 0));
    assert_eq!(at(&o, 1), (0, 1));
    assert_eq!(o.max_ids_per_partition, [4; 4]);
    assert_eq!(o.max_unique_ids_per_partition, [1; 4]);
    assert_eq!(o.dropped_id_count, 32);
    s.allow_id_dropping = false;
    let ids: BatchIds = [("f".to_string(), dense(&rows))].into_iter().collect();
    let err = preprocess(&s, &ids, Options::default()).unwrap_err();
    let PreprocessError::LimitExceeded(e) = err else {
        panic!("{err:?}")
    };
    assert_eq!((e.observed, e.limit, e.kind), (4, 2, LimitKind::MaxIds));
    assert!(e.to_string().starts_with(
        "Observed max ids per partition: 4 for table: t is greater than the set max ids per partition: 2"
    ));
}

fn v6_spec() -> (PreprocessSpec, BatchIds) {
    let mut s = spec1(4, table("t", 48, 16, 16, Combiner::Sum), 16, 8);
    s.global_device_count = 2;
    let a = dense(&[
        vec![5, 18, 0, 20, 0, 2, 31, 3],
        vec![18, 0, 20, 6, 1, 28, 5, 8],
        vec![0, 20, 6, 15, 12, 7, 3, 11],
        vec![18, 0, 7, 3, 6, 4, 19, 2],
        vec![18, 0, 20, 6, 1, 28, 5, 8],
        vec![0, 20, 6, 15, 12, 7, 3, 11],
        vec![5, 18, 0, 20, 0, 2, 31, 3],
        vec![18, 0, 20, 6, 1, 28, 5, 8],
    ]);
    let b = dense(&[
        vec![2, 4, 6, 8],
        vec![10, 12, 14, 14],
        vec![1, 3, 5, 7],
        vec![9, 11, 13, 15],
        vec![3, 4, 5, 6],
        vec![7, 8, 9, 10],
        vec![4, 5, 6, 7],
        vec![8, 9, 10, 11],
    ]);
    (s, [("a".to_string(), a), ("b".to_string(), b)].into_iter().collect())
}

#[test]
fn v6_two_features_with_transforms() {
    // Built directly on the grouping code with the vector's explicit transforms.
    let (s, ids) = v6_spec();
    let stack = Stack {
        name: "t".into(),
        tables: vec![],
        features: vec![
            stacking::FeatureInStack {
                feature: 0,
                row_offset: 0,
                col_offset: 0,
                col_shift: 0,
            },
            stacking::FeatureInStack {
                feature: 1,
                row_offset: 8,
                col_offset: 32,
                col_shift: 0,
            },
        ],
        combiner: Combiner::Sum,
        max_ids_per_partition: 16,
        max_unique_ids_per_partition: 16,
        suggested_coo_buffer_size_per_device: None,
        stack_vocab_size: 48,
        stack_embedding_dim: 8,
    };
    let feats = [&ids["a"], &ids["b"]];
    let g = group::group_stack(&s, &stack, &feats, false, false, false).unwrap();
    let o = group::fill_stack(&s, &stack, g, 0, Options::default()).unwrap();
    assert_eq!(o.max_ids_per_partition, [4, 2, 5, 6, 5, 3, 3, 5]);
    assert_eq!(o.max_unique_ids_per_partition, [3, 2, 4, 5, 4, 2, 3, 4]);
    assert_eq!(o.required_buffer_sizes, [64; 4]);
}

#[test]
fn v7_mean_gains() {
    let mut s = spec1(2, table("t", 16, 16, 16, Combiner::Mean), 4, 3);
    let rows = [vec![1, 2, 2], vec![3], vec![4, 5], vec![1, 1, 1]];
    let w = [vec![1.0, 2.0, 1.0], vec![4.0], vec![1.0, 3.0], vec![1.0, 1.0, 2.0]];
    let o = run(&s, vec![("f", ragged(&rows, Some(&w)))]);
    let per_sc = o.embedding_ids.len() / 2;
    assert_eq!(o.row_pointers[0..3], [1, 10, 16]);
    assert_eq!((at(&o, 0), o.gains[0]), ((1, 0), 0.75));
    assert_eq!((at(&o, 8), o.gains[8]), ((0, 0), 0.25));
    assert_eq!((at(&o, 9), o.gains[9]), ((1, 1), 1.0));
    assert_eq!((at(&o, per_sc), o.gains[per_sc]), ((2, 0), 0.25));
    assert_eq!((at(&o, per_sc + 8), o.gains[per_sc + 8]), ((0, 1), 1.0));
    assert_eq!((at(&o, per_sc + 9), o.gains[per_sc + 9]), ((2, 0), 0.75));
    // Unweighted: gains 1/row length (duplicates counted).
    s.tables[0].combiner = Combiner::Mean;
    let o = run(&s, vec![("f", ragged(&rows, None))]);
    let third = 1.0f32 / 3.0;
    assert_eq!(o.gains[0], third + third);
    assert_eq!(o.gains[8..10], [third, 1.0]);
    assert_eq!(o.gains[per_sc], 0.5);
    assert_eq!(o.gains[per_sc + 8..per_sc + 10], [third + third + third, 0.5]);
}

#[test]
fn v8_minibatching_not_needed() {
    let mut s = spec1(4, table("t", 32, 32, 32, Combiner::Sum), 16, 4);
    s.enable_minibatching = true;
    let o = run(&s, vec![("f", dense(&vec![vec![0, 1, 2, 3]; 16]))]);
    assert_eq!(o.num_minibatches, 1);
    assert_eq!(o.row_pointers.len(), 2048);
    assert_eq!(o.row_pointers[0..8], [4, 12, 20, 28, 32, 32, 32, 32]);
    assert_eq!(o.row_pointers[8..16], [36, 44, 52, 60, 64, 64, 64, 64]);
    assert_eq!(o.row_pointers[16..24], [68, 76, 84, 92, 96, 96, 96, 96]);
    assert_eq!(o.row_pointers[24..32], [100, 108, 116, 124, 128, 128, 128, 128]);
    assert_eq!(o.embedding_ids[0..4], [0, 0, 0, 0]);
    assert_eq!(o.sample_ids[0..4], [0, 1, 2, 3]);
}

#[test]
fn v9_minibatch_split() {
    let mut s = spec1(2, table("t", 1024, 8, 8, Combiner::Sum), 4, 16);
    s.enable_minibatching = true;
    let rows: Vec<Vec<i32>> = (0..4).map(|r| (16 * r..16 * r + 16).collect()).collect();
    let o = run(&s, vec![("f", dense(&rows))]);
    assert_eq!(o.num_minibatches, 4);
    let rp = |k: usize| o.row_pointers[k * 8..k * 8 + 3].to_vec();
    assert_eq!(
        [rp(0), rp(1), rp(2), rp(3)],
        [[7, 10, 16], [20, 27, 32], [35, 46, 48], [50, 61, 64]]
    );
    assert_eq!(
        [rp(4), rp(5), rp(6), rp(7)],
        [[68, 75, 80], [83, 92, 96], [101, 109, 112], [116, 124, 128]]
    );
    assert_eq!(o.embedding_ids[0..7], [0, 3, 9, 1, 11, 4, 7]);
    assert_eq!(o.sample_ids[0..7], [0, 0, 1, 0, 1, 0, 0]);
    assert_eq!(o.embedding_ids[7..10], [P, 9, 7]);
    assert_eq!(o.sample_ids[8..10], [1, 0]);
    assert_eq!(o.max_ids_per_partition, [16, 16]);
}

#[test]
fn v11_stacking_offsets() {
    let mut s = spec1(4, table("table_a", 64, 256, 256, Combiner::Sum), 16, 1);
    s.global_device_count = 2;
    s.local_device_count = 2;
    s.tables[0].embedding_dim = 12;
    let mut b = table("table_b", 120, 256, 256, Combiner::Sum);
    b.embedding_dim = 10;
    s.tables.push(b);
    s.stacks = vec![vec!["table_a".into(), "table_b".into()]];
    s.features = vec![
        FeatureSpec {
            name: "a".into(),
            table: "table_a".into(),
            input_shape: vec![16, 1],
        },
        FeatureSpec {
            name: "b".into(),
            table: "table_b".into(),
            input_shape: vec![16, 1],
        },
        FeatureSpec {
            name: "c".into(),
            table: "table_b".into(),
            input_shape: vec![16, 1],
        },
    ];
    let st = build_stacks(&s);
    assert_eq!(st.len(), 1);
    let x = &st[0];
    assert_eq!(
        (x.name.as_str(), x.stack_vocab_size, x.stack_embedding_dim),
        ("table_a_table_b", 192, 16)
    );
    assert_eq!(
        (
            x.tables[0].padded_vocab,
            x.tables[0].row_offset_in_shard,
            x.tables[0].shard_rotation
        ),
        (64, 0, 0)
    );
    assert_eq!(
        (
            x.tables[1].padded_vocab,
            x.tables[1].row_offset_in_shard,
            x.tables[1].shard_rotation
        ),
        (128, 8, 4)
    );
    let t: Vec<_> = x
        .features
        .iter()
        .map(|f| (f.row_offset, f.col_offset, f.col_shift))
        .collect();
    assert_eq!(t, [(0, 0, 0), (16, 64, 4), (32, 64, 4)]);
    assert_eq!((x.max_ids_per_partition, x.max_unique_ids_per_partition), (256, 256));
}

#[test]
fn v12_rotation() {
    let mut s = spec1(4, table("t1", 8, 256, 256, Combiner::Sum), 4, 1);
    s.tables.push(table("t2", 8, 256, 256, Combiner::Sum));
    s.stacks = vec![vec!["t1".into(), "t2".into()]];
    s.features = vec![
        FeatureSpec {
            name: "f1".into(),
            table: "t1".into(),
            input_shape: vec![4, 1],
        },
        FeatureSpec {
            name: "f2".into(),
            table: "t2".into(),
            input_shape: vec![4, 1],
        },
    ];
    let st = stacking::build_stacks_with_rotation(&s, 1);
    assert_eq!(
        (
            st[0].features[1].row_offset,
            st[0].features[1].col_offset,
            st[0].features[1].col_shift
        ),
        (4, 32, 1)
    );
    let one = |_| dense(&[vec![0], vec![1], vec![2], vec![3]]);
    let ids: BatchIds = [("f1".to_string(), one(())), ("f2".to_string(), one(()))]
        .into_iter()
        .collect();
    let feats = [&ids["f1"], &ids["f2"]];
    let g = group::group_stack(&s, &st[0], &feats, false, false, false).unwrap();
    let o = group::fill_stack(&s, &st[0], g, 0, Options::default()).unwrap();
    assert_eq!(o.embedding_ids.len(), 4096);
    assert_eq!(o.row_pointers[0..3], [1, 9, 16]);
    assert_eq!(o.row_pointers[8..12], [0, 1, 9, 16]);
    assert_eq!(o.row_pointers[16..21], [0, 0, 1, 9, 16]);
    assert_eq!(o.row_pointers[24..28], [1, 8, 8, 9]);
    let per_sc = 1024;
    for sc in 0..4usize {
        let t1 = o.row_pointers[sc * 8..sc * 8 + 4].to_vec();
        let _ = t1;
        // t1 id s -> partition s, local 0, sample 0; t2 -> partition (s+1)%4, local 8, sample 1.
        let p1 = sc;
        let start1 = if p1 == 0 {
            0
        } else {
            (o.row_pointers[sc * 8 + p1 - 1] as usize).div_ceil(8) * 8
        };
        assert_eq!(at(&o, sc * per_sc + start1), (0, 0));
        let p2 = (sc + 1) % 4;
        let start2 = if p2 == 0 {
            0
        } else {
            (o.row_pointers[sc * 8 + p2 - 1] as usize).div_ceil(8) * 8
        };
        assert_eq!(at(&o, sc * per_sc + start2), (8, 1));
    }
}

#[test]
fn v13_sizing() {
    let mk = |max_ids, g, nsc, mb, suggested| {
        let mut s = spec1(nsc, table("t", 1024, max_ids, max_ids, Combiner::Sum), 8, 1);
        s.global_device_count = g;
        s.enable_minibatching = mb;
        s.tables[0].suggested_coo_buffer_size_per_device = suggested;
        group::coo_buffer_size(&s, &build_stacks(&s)[0])
    };
    assert_eq!(mk(12, 1, 4, false, None), Ok(256));
    assert_eq!(mk(12, 1, 4, true, None), Ok(16384));
    assert_eq!(mk(100, 8, 2, false, None), Ok(3328));
    assert_eq!(mk(16, 1, 4, false, None), Ok(256));
    assert_eq!(mk(16, 1, 4, false, Some(48)), Ok(64));
    assert_eq!(mk(16, 1, 4, false, Some(96)), Ok(96));
    assert!(mk(16, 1, 4, false, Some(1024)).is_err());
    assert_eq!(mk(12, 1, 4, false, Some(40)), Ok(64));
    // Row pointer sizes: max(num_scs, 8) x nsc (x 64 with minibatching).
    let mut s = spec1(4, table("t", 32, 32, 32, Combiner::Sum), 8, 4);
    let ids: BatchIds = [("f".to_string(), dense(&vec![vec![0, 1, 2, 3]; 8]))]
        .into_iter()
        .collect();
    assert_eq!(
        preprocess(&s, &ids, Options::default()).unwrap().stacks[0]
            .1
            .row_pointers
            .len(),
        32
    );
    s.global_device_count = 4;
    s.features[0].input_shape = vec![8, 4];
    assert_eq!(
        preprocess(&s, &ids, Options::default()).unwrap().stacks[0]
            .1
            .row_pointers
            .len(),
        64
    );
}

#[test]
fn v14_static_buffer_overflow() {
    let mut t = table("t", 32, 32, 32, Combiner::Sum);
    t.suggested_coo_buffer_size_per_device = Some(64);
    let s = spec1(4, t, 8, 4);
    let o = run(&s, vec![("f", dense(&vec![vec![0, 1, 2, 3]; 8]))]);
    for sc in 0..4 {
        assert_eq!(o.row_pointers[sc * 8..sc * 8 + 8], [2, 10, 16, 16, 16, 16, 16, 16]);
    }
    assert_eq!(o.dropped_id_count, 16);
}

#[test]
fn stack_names_are_hashed_past_50_characters() {
    let names: Vec<String> = (0..8).map(|i| format!("table_number_{i}")).collect();
    let n = stack_name(&names);
    assert!(n.starts_with("table_number_0_table_number_1_table_number_2_table_...") || n.len() == 50 + 3 + 12);
    assert_eq!(n.len(), 65);
    assert_eq!(stack_name(&["a".into(), "b".into()]), "a_b");
}
