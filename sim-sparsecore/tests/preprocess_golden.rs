//! Golden cases computed by the real jax-tpu-embedding 0.1.0 (tools/golden-preprocess/generate.py):
//! statistics exactly, buffers exactly at every position the contract calls meaningful, gains by bits.

use std::io::Read;

use serde_json::Value;
use sim_sparsecore::preprocess::{
    preprocess, BatchIds, FeatureIds, Options, PreprocessError, PreprocessSpec, StackOutput,
};

fn ids_of(v: &Value) -> BatchIds {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(name, x)| {
            let weights = x.get("weights").map(|w| {
                w.as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_f64().unwrap() as f32)
                    .collect()
            });
            let mut f = if let Some(d) = x.get("dense") {
                let rows: Vec<Vec<i32>> = serde_json::from_value(d.clone()).unwrap();
                let valency = rows.first().map_or(0, |r| r.len());
                FeatureIds::dense(rows.concat(), rows.len(), valency).unwrap()
            } else {
                FeatureIds {
                    values: serde_json::from_value(x["values"].clone()).unwrap(),
                    row_splits: serde_json::from_value(x["row_splits"].clone()).unwrap(),
                    weights: None,
                }
            };
            f.weights = weights;
            (name.clone(), f)
        })
        .collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

fn as_i64<T: Copy + Into<i64>>(v: &[T]) -> Vec<i64> {
    v.iter().map(|&x| x.into()).collect()
}

#[test]
fn golden_cases_from_jax_tpu_embedding() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/preprocess/golden/cases.jsonl.gz"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let (mut n, mut aborts) = (0, 0);
    for (line_no, line) in text.lines().enumerate() {
        let case: Value = serde_json::from_str(line).unwrap();
        let spec: PreprocessSpec = serde_json::from_value(case["spec"].clone()).unwrap();
        let ids = ids_of(&case["ids"]);
        let got = preprocess(&spec, &ids, Options::default());
        let ctx = format!("case {line_no}: {}", case["spec"]);
        // Statistics by counting (stats-only) equal the full CSR path's, aborts included.
        let stats = preprocess(&spec, &ids, Options { stats_only: true });
        // Whatever the thread count, the same output (stacks and SparseCores run in parallel).
        let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        for opts in [Options { stats_only: true }, Options::default()] {
            let a = one_thread.install(|| preprocess(&spec, &ids, opts));
            let b = preprocess(&spec, &ids, opts);
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{ctx}: 1 thread vs the pool");
        }
        match (&got, &stats) {
            (Ok(full), Ok(counted)) => {
                for ((n1, a), (n2, b)) in full.stacks.iter().zip(&counted.stacks) {
                    assert_eq!(n1, n2, "{ctx}");
                    let strip = |o: &StackOutput| StackOutput {
                        row_pointers: vec![],
                        embedding_ids: vec![],
                        sample_ids: vec![],
                        gains: vec![],
                        ..o.clone()
                    };
                    assert_eq!(strip(a), strip(b), "{ctx}: stats-only statistics");
                }
                assert_eq!(full.stacks.len(), counted.stacks.len(), "{ctx}");
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "{ctx}: stats-only error"),
            _ => panic!("{ctx}: full path {got:?} but stats-only {stats:?}"),
        }
        n += 1;
        if case["expected"].get("abort").is_some() {
            assert!(
                matches!(got, Err(PreprocessError::LimitExceeded(_))),
                "{ctx}: expected a limit abort, got {got:?}"
            );
            aborts += 1;
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let exp = case["expected"].as_object().unwrap();
        assert_eq!(got.stacks.len(), exp.len(), "{ctx}: stack count");
        let nsc = spec.num_sc_per_device as usize;
        let r = (spec.num_scs() as usize).max(8);
        let ldev = spec.local_device_count as usize;
        for (name, o) in &got.stacks {
            let e = exp
                .get(name)
                .unwrap_or_else(|| panic!("{ctx}: no stack {name} in {:?}", exp.keys()));
            let c = format!("{ctx} stack {name}");
            assert_eq!(
                as_i64(&o.max_ids_per_partition),
                ints(&e["max_ids_per_partition"]),
                "{c}: max ids"
            );
            assert_eq!(
                as_i64(&o.max_unique_ids_per_partition),
                ints(&e["max_unique_ids_per_partition"]),
                "{c}: unique"
            );
            assert_eq!(
                as_i64(&o.required_buffer_sizes),
                ints(&e["required_buffer_sizes"]),
                "{c}: required"
            );
            assert_eq!(
                o.dropped_id_count as i64,
                e["dropped_id_count"].as_i64().unwrap(),
                "{c}: dropped"
            );
            assert_eq!(
                o.num_minibatches as i64,
                e["num_minibatches"].as_i64().unwrap(),
                "{c}: minibatches"
            );
            let (erp, eemb) = (ints(&e["row_pointers"]), ints(&e["embedding_ids"]));
            let (esmp, egain) = (ints(&e["sample_ids"]), ints(&e["gains_bits"]));
            assert_eq!(o.embedding_ids.len(), eemb.len(), "{c}: COO buffer length");
            let rp_dev = o.row_pointers.len() / ldev;
            let buf = o.embedding_ids.len() / ldev;
            for d in 0..ldev {
                let used = if spec.enable_minibatching {
                    nsc * o.num_minibatches as usize * r
                } else {
                    nsc * r
                };
                let (a, b) = (d * rp_dev, d * rp_dev + used);
                assert_eq!(
                    as_i64(&o.row_pointers[a..b]),
                    erp[a..b].to_vec(),
                    "{c}: row pointers of device {d}"
                );
                let regions: Vec<(usize, usize)> = if spec.enable_minibatching {
                    vec![(0, o.row_pointers[a..b].iter().copied().max().unwrap_or(0) as usize)]
                } else {
                    let per_sc = buf / nsc;
                    (0..nsc)
                        .map(|s| (s * per_sc, s * per_sc + o.row_pointers[a + s * r + r - 1] as usize))
                        .collect()
                };
                for (x, y) in regions {
                    for i in d * buf + x..d * buf + y {
                        assert_eq!(o.embedding_ids[i] as i64, eemb[i], "{c}: embedding_ids[{i}]");
                        assert_eq!(o.sample_ids[i] as i64, esmp[i], "{c}: sample_ids[{i}]");
                        assert_eq!(o.gains[i].to_bits() as i64, egain[i], "{c}: gains[{i}]");
                    }
                }
            }
        }
    }
    assert!(n >= 100, "only {n} golden cases");
    assert!(aborts > 0, "no abort case covered");
}
