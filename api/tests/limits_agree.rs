//! `tpusim run` and `tpusim limits validate` judge a stack's compile check alike, and presets follow
//! the chip they are run on.

use serde_json::Value;
use sim_sparsecore::preprocess::PreprocessSpec;
use tpusim_api::limits::{validate, LimitsSource};
use workloads::program::limits::check;
use workloads::program::resolve::{resolve, Plan};
use workloads::program::work::RunWork;
use workloads::Workload;

/// The SPEC.json a run's chip stands for: one host holding the chip's compiler devices, each
/// feature's rows the chip's batch.
fn contract_spec(p: &Plan) -> PreprocessSpec {
    let mut s = p.pspec.clone();
    s.local_device_count = p.devices_per_chip;
    s
}

/// A compile verdict: whether it compiles, and the message.
type Verdict = (bool, String);

/// Per stack: its verdict as `run` says it and as `limits validate` says it.
fn verdicts(w: &Workload) -> Vec<(String, Verdict, Verdict)> {
    let plan = resolve(w, None).unwrap_or_else(|e| panic!("{}: {e}", w.name));
    if !plan.has_sparsecore_tables() {
        return Vec::new();
    }
    let run = check(&plan, &RunWork::default());
    let v = validate(&contract_spec(&plan), &w.name, &w.chip, &LimitsSource::Spec, vec![])
        .unwrap_or_else(|e| panic!("{}: {e}", w.name));
    let rows = v.json["stacks"].as_array().unwrap().clone();
    assert_eq!(rows.len(), run.stacks.len(), "{}", w.name);
    run.stacks
        .iter()
        .zip(&rows)
        .map(|(r, row)| {
            assert_eq!(row["stack"], r.stack.as_str());
            let (fwd, bwd) = (&row["compile_fwd"], &row["compile_grad_sgd"]);
            let ok = |c: &Value| c["compiles"].as_bool().unwrap();
            let message = if !ok(fwd) {
                &fwd["message"]
            } else if !ok(bwd) {
                &bwd["message"]
            } else {
                &fwd["message"]
            };
            (
                r.stack.clone(),
                (r.compiles, r.message.clone()),
                (ok(fwd) && ok(bwd), message.as_str().unwrap().to_string()),
            )
        })
        .collect()
}

#[test]
fn run_and_validate_give_every_stack_of_every_preset_the_same_verdict() {
    for name in Workload::preset_names() {
        let w = Workload::preset(name).unwrap();
        for (stack, run, validated) in verdicts(&w) {
            assert_eq!(run, validated, "{name}: stack {stack}");
        }
    }
}

/// One v6e table of width 1024 looked up by two features, 32,768 samples each per chip (a v6e chip
/// is one device of 2 SparseCores), at `max_unique` ids and unique ids per partition.
fn two_feature_table(max_unique: u32) -> Workload {
    Workload::parse(&format!(
        r#"
name = "two-features"
chip = "v6e"
chips = 4
global_batch = 131072
steps = 1
pipelining = "sequential"
[dense]
dense_features = 13
bottom = [64]
interaction = "dot"
top = [64, 1]
[limits]
max_ids_per_partition = {max_unique}
max_unique_ids_per_partition = {max_unique}
[[tables]]
name = "wide"
vocab = 100000
dim = 1024
[[features]]
name = "f0"
table = "wide"
valency = {{ fixed = 1 }}
ids = "uniform"
[[features]]
name = "f1"
table = "wide"
valency = {{ fixed = 1 }}
ids = "uniform"
"#
    ))
    .unwrap()
}

#[test]
fn a_stack_of_two_features_is_compiled_on_the_samples_of_both() {
    // The two features are concatenated along the samples: 2 x 32,768 samples over 2 SparseCores
    // are 32,768 activation rows per SparseCore, the compiler's f32[32768,1024] scatter window.
    // Past 6,096 ids that window does not fit (`limits compile-check` at batch 65536 says so; at
    // one feature's 32,768 samples it would fit up to 7,120), and both commands must say it.
    for (unique, compiles) in [(6096, true), (6104, false)] {
        let v = verdicts(&two_feature_table(unique));
        assert_eq!(v.len(), 1);
        let (stack, run, validated) = &v[0];
        assert_eq!(run, validated, "stack {stack} at max_unique {unique}");
        assert_eq!(run.0, compiles, "{}", run.1);
        if !compiles {
            assert!(run.1.contains("f32[32768,1024]"), "{}", run.1);
        }
    }
}

#[test]
fn presets_take_the_default_slice_of_another_chip_or_count() {
    // The README's Ray and shard sweeps: dlrm-criteo on v5p, v6e and tpu7x at 16, 32 and 64 chips.
    for chip in ["v5p", "v6e", "tpu7x"] {
        for chips in [16u32, 32, 64] {
            let mut w = Workload::preset("dlrm-criteo").unwrap();
            (w.chip, w.chips, w.global_batch) = (chip.to_string(), chips, 16384);
            let plan = resolve(&w, None).unwrap_or_else(|e| panic!("{chips} x {chip}: {e}"));
            assert_eq!(plan.slice.chips(), chips as u64);
        }
    }
    // 64 v6e chips: the 2D Cloud default, 8x8.
    let mut w = Workload::preset("dlrm-criteo").unwrap();
    w.chip = "v6e".into();
    assert_eq!(resolve(&w, None).unwrap().slice.dims, vec![8, 8]);
    // A shape the chip cannot have is refused, naming the ones it can.
    w.topology = Some("4x4x4".into());
    let e = resolve(&w, None).unwrap_err().to_string();
    assert!(e.contains("1x64, 2x32, 4x16, 8x8"), "{e}");
}
