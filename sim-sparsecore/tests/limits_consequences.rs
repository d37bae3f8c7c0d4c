//! What given limits do to a batch: every stack over a limit is reported as aborting, with
//! jax-tpu-embedding's message, not only the first one the preprocessing stops at.

use std::collections::BTreeMap;

use sim_sparsecore::limits::estimate::consequences;
use sim_sparsecore::limits::StackLimit;
use sim_sparsecore::preprocess::{read_npz, PreprocessSpec};

fn example() -> (PreprocessSpec, sim_sparsecore::preprocess::BatchIds) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/preprocess/example");
    let spec = PreprocessSpec::from_json(&std::fs::read_to_string(format!("{dir}/spec.json")).unwrap()).unwrap();
    let ids = read_npz(std::path::Path::new(&format!("{dir}/ids_hot.npz"))).unwrap();
    (spec, ids)
}

fn limit(ids: u64, unique: u64) -> StackLimit {
    StackLimit {
        max_ids_per_partition: ids,
        max_unique_ids_per_partition: unique,
        suggested_coo_buffer_size_per_device: None,
    }
}

#[test]
fn every_stack_over_a_limit_would_abort() {
    let (spec, ids) = example();
    let limits: BTreeMap<String, StackLimit> = [
        ("user_item".to_string(), limit(16, 8)),
        ("country".to_string(), limit(12, 12)),
    ]
    .into();
    let c = consequences(&spec, &limits, &ids).unwrap();
    let user = &c["user_item"];
    assert!(user.would_abort);
    assert_eq!(user.minibatches, 8, "46 ids over 16: minibatching splits them");
    assert_eq!(user.dropped_ids, 270);
    assert!(user.abort_message.as_deref().unwrap().starts_with(
        "Observed max ids per partition: 46 for table: user_item is greater than the set max ids per partition: 16"
    ));
    let country = &c["country"];
    assert!(country.would_abort);
    // country's 16 ids are one hot id: one bucket, so minibatching cannot split them (0). That run
    // stops there, yet user_item's count above is still known.
    assert_eq!(country.minibatches, 0);
    assert_eq!(country.dropped_ids, 25);
    assert_eq!(
        country.abort_message.as_deref(),
        Some(
            "Observed max ids per partition: 16 for table: country is greater than the set max ids per partition: 12."
        )
    );
}

#[test]
fn limits_at_the_observed_maxima_are_ok() {
    let (spec, ids) = example();
    let limits: BTreeMap<String, StackLimit> = [
        ("user_item".to_string(), limit(46, 27)),
        ("country".to_string(), limit(16, 8)),
    ]
    .into();
    for (stack, c) in consequences(&spec, &limits, &ids).unwrap() {
        assert!(!c.would_abort, "{stack}: {:?}", c.abort_message);
        assert_eq!(c.dropped_ids, 0, "{stack}");
        assert_eq!(c.minibatches, 1, "{stack}");
    }
}

/// Where the batch's statistics decide the consequences, they equal running the batch: limits
/// from below the observed maxima to above them, with suggested buffers small and large.
#[test]
fn consequences_from_statistics_equal_running_the_batch() {
    use sim_sparsecore::limits::estimate::{consequences_from_observed, observe};
    let (spec, ids) = example();
    let observed = observe(&spec, &ids).unwrap();
    let mut decided = 0;
    for (a, b) in [(8, 4), (16, 8), (46, 27), (48, 32), (64, 64), (1 << 20, 1 << 20)] {
        for suggested in [None, Some(64), Some(1 << 16)] {
            let limits: BTreeMap<String, StackLimit> = observed
                .keys()
                .map(|k| {
                    let mut l = limit(a, b);
                    l.suggested_coo_buffer_size_per_device = suggested;
                    (k.clone(), l)
                })
                .collect();
            let full = consequences(&spec, &limits, &ids);
            if let Some(c) = consequences_from_observed(&spec, &limits, &observed) {
                assert_eq!(Ok(c), full, "limits {a}/{b}, suggested {suggested:?}");
                decided += 1;
            }
        }
    }
    assert!(decided >= 4, "only {decided} cases decided from statistics");
}
