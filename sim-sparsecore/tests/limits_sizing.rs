//! jax-tpu-embedding's COO-buffer sizing (test vector V13 of the reference), seen through the
//! buffers `preprocess` returns: the theoretical maximum by default, a suggested size rounded up to
//! a multiple of 8 x SparseCores per device, and the CHECK failure above the maximum.

use sim_sparsecore::limits::hbm::{row_pointers_len, theoretical_max_coo};
use sim_sparsecore::preprocess::{preprocess, BatchIds, FeatureIds, Options, PreprocessSpec};

fn spec(suggested: Option<u64>) -> PreprocessSpec {
    let suggested = suggested.map_or("null".to_string(), |s| s.to_string());
    PreprocessSpec::from_json(&format!(
        r#"{{"num_sc_per_device": 4, "local_device_count": 1, "global_device_count": 1,
            "allow_id_dropping": false, "enable_minibatching": false,
            "tables": [{{"name": "t", "vocabulary_size": 32, "embedding_dim": 8, "combiner": "sum",
                         "max_ids_per_partition": 16, "max_unique_ids_per_partition": 16,
                         "suggested_coo_buffer_size_per_device": {suggested}}}],
            "features": [{{"name": "f", "table": "t", "input_shape": [8, 4]}}]}}"#
    ))
    .unwrap()
}

fn ids() -> BatchIds {
    let values: Vec<i32> = (0..8).flat_map(|_| 0..4).collect();
    [("f".to_string(), FeatureIds::dense(values, 8, 4).unwrap())].into()
}

fn coo_len(suggested: Option<u64>) -> Result<usize, String> {
    preprocess(&spec(suggested), &ids(), Options { stats_only: false })
        .map(|o| o.stacks[0].1.embedding_ids.len())
        .map_err(|e| e.to_string())
}

#[test]
fn v13_suggested_sizes() {
    assert_eq!(theoretical_max_coo(16, 1, 4, false), 256);
    assert_eq!(coo_len(None), Ok(256));
    assert_eq!(coo_len(Some(48)), Ok(64));
    assert_eq!(coo_len(Some(96)), Ok(96));
    assert_eq!(coo_len(Some(40)), Ok(64));
    let err = coo_len(Some(1024)).unwrap_err();
    assert!(
        err.contains("Suggested Coo Buffer Size is larger than the theoretical max"),
        "{err}"
    );
    assert!(err.contains("1024 vs 256"), "{err}");
}

#[test]
fn v13_row_pointer_lengths_match_the_buffers() {
    let o = preprocess(&spec(None), &ids(), Options { stats_only: false }).unwrap();
    assert_eq!(o.stacks[0].1.row_pointers.len() as u64, row_pointers_len(1, 4, false));
    assert_eq!(row_pointers_len(1, 4, false), 32);
}
