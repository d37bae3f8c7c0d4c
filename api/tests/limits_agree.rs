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

/// Per stack: (compiles, message) as `run` says it and as `limits validate` says it.
fn verdicts(w: &Workload) -> Vec<(String, (bool, String), (bool, String))> {
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

/// The largest max_unique_ids_per_partition `limits validate` finds compiling for each stack.
fn largest_unique(w: &Workload) -> Vec<(String, u64)> {
    let plan = resolve(w, None).unwrap();
    let v = validate(&contract_spec(&plan), &w.name, &w.chip, &LimitsSource::Spec, vec![]).unwrap();
    v.json["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let l = |c: &Value| c["largest_max_unique"].as_u64().unwrap();
            (
                row["stack"].as_str().unwrap().to_string(),
                l(&row["compile_fwd"]).min(l(&row["compile_grad_sgd"])),
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

#[test]
fn run_and_validate_agree_at_the_edge_of_what_compiles() {
    // Where the verdict turns: each stack's largest compiling max_unique_ids_per_partition by
    // `limits validate`, and 8 past it. A stack of several features is checked on the samples of
    // all of them (they are concatenated); one feature's batch would move the edge.
    for name in ["dlrm-small", "balanced", "skewed", "tc-heavy"] {
        let base = Workload::preset(name).unwrap();
        for (stack, edge) in largest_unique(&base) {
            if edge == 0 || edge >= (i32::MAX as u64) - 8 {
                continue;
            }
            for unique in [edge, edge + 8] {
                let mut w = base.clone();
                w.limits.stacks.insert(
                    stack.clone(),
                    workloads::spec::StackLimitDef {
                        max_ids_per_partition: None,
                        max_unique_ids_per_partition: Some(unique as u32),
                    },
                );
                for (s, run, validated) in verdicts(&w) {
                    assert_eq!(run, validated, "{name}: stack {s} at max_unique {unique} on {stack}");
                }
            }
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
