//! Property: statistics streamed from an NPZ file (`preprocess_stats_npz`) are bit-identical to the
//! reference path's on the same file (read whole, then preprocessed), errors included; inputs it
//! leaves to the reference path are only those it documents, and plain inputs are streamed.

use std::io::Write;

use proptest::prelude::*;

mod cases;
use cases::{skewed_id, tables, xorshift};
use sim_sparsecore::preprocess::{
    preprocess, preprocess_stats_npz, read_npz, Combiner, FeatureSpec, Options, PreprocessOutput, PreprocessSpec,
    StackOutput,
};

/// An NPY v1 int32 [rows, valency] array.
fn npy_i32(rows: usize, valency: usize, values: &[i32]) -> Vec<u8> {
    let mut h = format!("{{'descr': '<i4', 'fortran_order': False, 'shape': ({rows}, {valency}), }}").into_bytes();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    out
}

/// Writes members (name, bytes) as np.savez does (stored), or deflated as np.savez_compressed.
fn write_npz(path: &std::path::Path, members: &[(String, Vec<u8>)], deflate: bool) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    for (name, bytes) in members {
        z.start_file(name, zip::write::FileOptions::default().compression_method(method))
            .unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

fn stats(o: &PreprocessOutput) -> Vec<(String, StackOutput)> {
    o.stacks
        .iter()
        .map(|(n, s)| {
            (
                n.clone(),
                StackOutput {
                    row_pointers: vec![],
                    embedding_ids: vec![],
                    sample_ids: vec![],
                    gains: vec![],
                    ..s.clone()
                },
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn streamed_statistics_equal_the_reference(
        nsc in prop_oneof![Just(1u32), Just(2), Just(4)],
        ldev in prop_oneof![Just(1u32), Just(2)],
        g_extra in prop_oneof![Just(1u32), Just(2)],
        vocabs in proptest::collection::vec(1u64..3000, 1..4),
        stacked in any::<bool>(),
        limit in 1u32..300,
        unique_limit in 1u32..300,
        mb in any::<bool>(),
        suggested in proptest::option::of(1u64..4000),
        rows_per_sc in 0usize..40,
        extra_rows in prop_oneof![4 => Just(0usize), 1 => 1usize..3],
        valency in 0usize..40,
        flaw in prop_oneof![8 => Just(0u8), 1 => 1u8..6],
        seed in any::<u64>(),
    ) {
        let gdev = ldev * g_extra;
        let rows = rows_per_sc * (nsc * ldev) as usize + extra_rows;
        let mut next = xorshift(seed);
        let tables = tables(&vocabs, Combiner::Sum, (limit, unique_limit), suggested);
        let stacks = if stacked { vec![tables.iter().map(|t| t.name.clone()).collect()] } else { vec![] };
        let mut features = Vec::new();
        let mut members = Vec::new();
        // skewed_id draws 0..4 for a third of ids, so a table under 4 rows gets ids past its
        // vocabulary without a flaw: the reference accepts those in the padded rows, streaming
        // documents leaving them to it.
        let mut past_vocab = false;
        for (i, &v) in vocabs.iter().enumerate() {
            // Two features on the first table; skewed ids so columns repeat within a row.
            for k in 0..if i == 0 { 2 } else { 1 } {
                let name = format!("f{i}_{k}");
                let mut values: Vec<i32> = (0..rows * valency).map(|_| skewed_id(next(), v)).collect();
                // Flaws: an id past the vocabulary, a negative id.
                if !values.is_empty() {
                    let at = (next() % values.len() as u64) as usize;
                    match flaw {
                        1 => values[at] = v as i32 + 5,
                        2 => values[at] = -3,
                        _ => {}
                    }
                }
                past_vocab |= values.iter().any(|&x| x as u64 >= v);
                features.push(FeatureSpec { name: name.clone(), table: format!("t{i}"), input_shape: vec![rows as u64, valency as u64] });
                members.push((format!("{name}.npy"), npy_i32(rows, valency, &values)));
            }
        }
        match flaw {
            // A flipped data byte (the checksum must catch it), an extra array, a deflated file.
            3 => { let m = &mut members[0].1; let n = m.len(); if n > 128 { m[n - 1] ^= 0x40; } }
            4 => members.push(("extra.npy".into(), npy_i32(1, 1, &[0]))),
            _ => {}
        }
        let spec = PreprocessSpec {
            num_sc_per_device: nsc, local_device_count: ldev, global_device_count: gdev,
            allow_id_dropping: false, enable_minibatching: mb,
            tables, features, stacks, stack_limits: Default::default(),
        };
        let dir = std::env::temp_dir().join(format!("tpusim-stream-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{seed:x}.npz"));
        write_npz(&path, &members, flaw == 5);
        let reference = read_npz(&path).and_then(|ids| preprocess(&spec, &ids, Options { stats_only: true }));
        let streamed = preprocess_stats_npz(&spec, &path);
        std::fs::remove_file(&path).unwrap();
        match (&reference, streamed) {
            (Ok(r), Some(Ok(s))) => prop_assert_eq!(stats(r), stats(&s)),
            (Err(a), Some(Err(b))) => prop_assert_eq!(a, &b),
            (_, None) => {
                // Left to the reference path: a flaw, an id past its vocabulary, a batch it refuses,
                // or a COO buffer too small.
                prop_assert!(flaw != 0 || past_vocab || extra_rows != 0 || reference.is_err() || suggested.is_some() || mb,
                    "a plain input was not streamed: {:?}", reference.map(|_| ()));
            }
            (r, Some(s)) => prop_assert!(false, "reference {:?} vs streamed {:?}", r.as_ref().map(|_| ()), s.map(|_| ())),
        }
    }
}
