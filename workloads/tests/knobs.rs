//! The SparseCore guide's knobs move time and memory the way the guide says.

use sim_core::summary::RuntimeVerdict;
use workloads::{simulate, RunOptions, Workload};

fn run(w: &Workload) -> sim_core::summary::RunSummary {
    simulate(w, &RunOptions::default()).unwrap().summary
}

#[test]
fn table_stacking_means_fewer_sparsecore_passes() {
    let w = Workload::preset("dlrm-small").unwrap();
    let stacked = run(&w);
    let mut off = w.clone();
    off.disable_table_stacking = true;
    let unstacked = run(&off);
    assert_eq!(stacked.limits.len(), 1, "dlrm-small's 8 tables stack into one");
    assert_eq!(unstacked.limits.len(), 8);
    // One pass per stack: eight stacks cost more SparseCore time per step.
    assert!(unstacked.busy_fraction.sc * unstacked.step_time_us > stacked.busy_fraction.sc * stacked.step_time_us);
}

#[test]
fn serialising_tables_lowers_peak_hbm_and_costs_time() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.disable_table_stacking = true;
    let all = run(&w);
    w.xla_sc_num_serialized_tables_to_optimize_hbm = 2;
    let serial = run(&w);
    assert!(serial.peak_memory_bytes["hbm"] < all.peak_memory_bytes["hbm"]);
    assert!(serial.busy_fraction.sc * serial.step_time_us > all.busy_fraction.sc * all.step_time_us);
}

#[test]
fn bf16_tables_move_fewer_bytes() {
    let w = Workload::preset("balanced").unwrap();
    let f32_run = run(&w);
    let mut b = w.clone();
    for t in &mut b.tables {
        t.dtype = workloads::spec::Dtype::Bf16;
    }
    let bf16_run = run(&b);
    assert!(bf16_run.hbm_bytes_per_step < f32_run.hbm_bytes_per_step);
    assert!(bf16_run.step_time_us <= f32_run.step_time_us);
}

fn result(w: &Workload, functional: bool) -> workloads::RunResult {
    simulate(
        w,
        &RunOptions {
            functional,
            ..Default::default()
        },
    )
    .unwrap()
}

fn knob<'a>(r: &'a workloads::RunResult, name: &str) -> &'a (String, String, String) {
    r.knobs
        .iter()
        .find(|k| k.0.starts_with(name))
        .unwrap_or_else(|| panic!("knob {name} missing from {:?}", r.knobs))
}

#[test]
fn stacks_outside_five_to_hundred_tables_warn() {
    let w = Workload::preset("dlrm-small").unwrap();
    assert!(result(&w, false).warnings.iter().all(|x| !x.contains("5-100")));
    let mut off = w.clone();
    off.disable_table_stacking = true;
    let r = result(&off, false);
    let warning = r
        .warnings
        .iter()
        .find(|x| x.contains("5-100"))
        .expect("a stacking warning");
    assert!(warning.contains("8 of 8 stacks") && warning.contains("disable_table_stacking"));
    assert!(knob(&r, "disable_table_stacking").2.contains("8 stacks"));
}

#[test]
fn max_ids_per_chip_per_sample_sizes_the_static_buffer() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    assert!(run(&w).fits);
    // 27 ids per sample over the stack's 8 features: one id per feature-sample row cannot hold them.
    w.limits.max_ids_per_chip_per_sample = 1;
    let s = run(&w);
    assert!(!s.fits);
    let l = &s.limits[0];
    assert_eq!(l.runtime, RuntimeVerdict::WouldAbort);
    assert!(
        l.message
            .contains("ids after padding but the max_ids_per_chip is set to be 8192"),
        "{}",
        l.message
    );
    assert!(l.message.contains("raise max_ids_per_chip_per_sample to at least"));
}

#[test]
fn table_level_limits_cap_partitions_and_abort_or_drop() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.disable_table_stacking = true;
    let base = run(&w);
    let t2 = base.limits.iter().find(|l| l.stack == "t2").unwrap().clone();
    assert_eq!(t2.max_ids_per_partition, 512);
    // Table t2 (valency 8, 256 samples per SparseCore): about 2,000 ids per SparseCore.
    w.limits.max_ids_per_table.insert("t2".into(), 100);
    let capped = run(&w);
    let t2c = capped.limits.iter().find(|l| l.stack == "t2").unwrap();
    assert_eq!(
        t2c.max_ids_per_partition, 104,
        "the table limit caps the partition limit (rounded to 8)"
    );
    assert_eq!(t2c.runtime, RuntimeVerdict::WouldAbort);
    assert!(t2c.message.contains("max_ids_per_table = 100"), "{}", t2c.message);
    assert!(!capped.fits);
    w.limits.allow_id_dropping = true;
    let dropping = run(&w);
    assert!(dropping.dropped_ids_per_step > 0);
    assert!(dropping.limits.iter().find(|l| l.stack == "t2").unwrap().runtime == RuntimeVerdict::DropsIds);
    // Unknown tables are bad input.
    w.limits.max_unique_ids_per_table.insert("nope".into(), 8);
    assert!(w.validate().unwrap_err().to_string().contains("unknown table 'nope'"));
}

#[test]
fn more_parallel_iterations_hold_more_heap() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    let two = result(&w, false);
    w.host.prefetch = 8;
    let eight = result(&w, false);
    let heap = |r: &workloads::RunResult| {
        r.memory_breakdown
            .iter()
            .find(|(k, _)| k.starts_with("heap: prefetched"))
            .unwrap()
            .1
    };
    assert_eq!(heap(&eight), heap(&two) * 4);
    assert!(eight.summary.peak_memory_bytes["hbm"] > two.summary.peak_memory_bytes["hbm"]);
    // `maximum_parallel_iterations` is the guide's name for it.
    let text = include_str!("../presets/dlrm-small.toml").replace("prefetch = 2", "maximum_parallel_iterations = 8");
    assert_eq!(Workload::parse(&text).unwrap().host.prefetch, 8);
}

#[test]
fn a_slow_host_shows_as_gaps_on_the_device() {
    let mut w = Workload::preset("balanced").unwrap();
    let fast = result(&w, false);
    w.host.threads = 1;
    let slow = result(&w, false);
    assert!(slow.summary.step_time_us > 2.0 * fast.summary.step_time_us);
    assert!(slow.summary.busy_fraction.host > 0.95);
    assert!(slow.summary.busy_fraction.sc < fast.summary.busy_fraction.sc / 2.0);
    assert!(
        slow.bottleneck.starts_with("host input pipeline-bound"),
        "{}",
        slow.bottleneck
    );
}

#[test]
fn width_one_tables_waste_seven_eighths() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.tables[3].dim = 1;
    let r = result(&w, false);
    let (_, padded, unpadded) = r
        .padding_per_buffer
        .iter()
        .find(|(n, _, _)| n.starts_with("table t3"))
        .unwrap();
    // A width-1 f32 row takes a 32-byte granule (and the vocabulary is padded to 8 x SparseCores).
    let ratio = *padded as f64 / *unpadded as f64;
    assert!((ratio - 8.0).abs() < 0.01, "{ratio}");
    assert!(knob(&r, "padding").2.contains("of table HBM is padding"));
}

/// Hot ids that are all multiples of the partition count land on one partition (the `skewed` preset:
/// half of every feature's ids from 64 hot ids with stride 16).
fn skewed() -> Workload {
    let w = Workload::preset("skewed").unwrap();
    assert!(w.features.iter().all(|f| matches!(
        f.ids,
        workloads::spec::IdDist::HotSet { fraction, size: 64, stride: 16 } if fraction == 0.5
    )));
    w
}

#[test]
fn skew_names_the_straggler_and_shuffling_spreads_it() {
    let w = skewed();
    let hot = result(&w, false);
    assert!(hot.straggler.contains("is the straggler"), "{}", hot.straggler);
    assert!(hot.straggler.contains("shuffle_ids = true"));
    let mut shuffled = w.clone();
    shuffled.shuffle_ids = true;
    let spread = result(&shuffled, false);
    assert!(spread.straggler.starts_with("no straggler"), "{}", spread.straggler);
    // The SparseCore stage waits for its slowest SparseCore: spreading the hot partition shortens it.
    assert!(
        spread.summary.step_time_us < hot.summary.step_time_us * 0.9,
        "{} vs {}",
        spread.summary.step_time_us,
        hot.summary.step_time_us
    );
}

#[test]
fn sample_minibatching_splits_what_vocabulary_minibatching_cannot() {
    // One very hot id: 90% of a feature's ids. Every sample holds it once, so a SparseCore sends its
    // partition 512 ids: vocabulary buckets cannot split one id, sample groups can.
    let mut w = Workload::preset("balanced").unwrap();
    w.limits.max_ids_per_partition = Some(256);
    w.limits.max_unique_ids_per_partition = Some(256);
    for f in &mut w.features {
        f.ids = workloads::spec::IdDist::HotSet {
            fraction: 0.9,
            size: 1,
            stride: 0,
        };
    }
    let vocab = run(&w);
    assert!(vocab.limits.iter().any(|l| l.runtime == RuntimeVerdict::WouldAbort));
    assert!(!vocab.fits);
    w.limits.minibatching_dimension = workloads::spec::MinibatchDimension::Sample;
    let sample = run(&w);
    assert!(sample.fits, "{:?}", sample.limits);
    assert!(sample.minibatches_per_step >= 2);
    assert_eq!(sample.dropped_ids_per_step, 0);
}

#[test]
fn fast_initialisation_starts_sooner() {
    let mut w = Workload::preset("balanced").unwrap();
    let host = result(&w, false);
    w.enable_fast_table_initialization = true;
    let device = result(&w, false);
    assert!(
        device.startup_ps * 10 < host.startup_ps,
        "{} vs {}",
        device.startup_ps,
        host.startup_ps
    );
    assert!(knob(&device, "initialize_tables_on_host").2.contains("on the device"));
}

#[test]
fn id_bound_check_reports_where_and_costs_host_time() {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/workloads"));
    let mut w = Workload::parse(&std::fs::read_to_string(dir.join("npz-example.toml")).unwrap()).unwrap();
    w.resolve_paths(dir);
    // The data's item ids run to about 5,000: a 100-row table puts most of them out of range.
    w.tables[1].vocab = 100;
    // Without the device's bound check the ids would be read silently: refused as bad input, naming
    // the feature, the table and the knob that models the check.
    let refused = simulate(&w, &RunOptions::default()).unwrap_err().to_string();
    assert!(
        refused.contains("features.history")
            && refused.contains("table 'item'")
            && refused.contains("xla_sparse_core_enable_id_bound_check"),
        "{refused}"
    );
    let mut in_range = w.clone();
    in_range.tables[1].vocab = 1 << 20;
    let unchecked = result(&in_range, false);
    w.xla_sparse_core_enable_id_bound_check = true;
    let checked = result(&w, false);
    assert!(!checked.summary.fits);
    let msg = checked
        .warnings
        .iter()
        .find(|x| x.starts_with("id bound check failed"))
        .unwrap();
    assert!(
        msg.contains("feature history") && msg.contains("table item of 100 rows"),
        "{msg}"
    );
    let host_time = |r: &workloads::RunResult| {
        r.recorder
            .spans
            .iter()
            .filter(|s| s.category == "host")
            .map(|s| s.end.0 - s.start.0)
            .sum::<u64>()
    };
    assert!(host_time(&checked) > host_time(&unchecked));
    assert!(knob(&checked, "xla_sparse_core_enable_id_bound_check")
        .2
        .contains("host time per step"));
}

#[test]
fn nan_detection_stops_at_the_first_nan_and_costs_sparsecore_time() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.functional_learning_rate = Some(1e38);
    let silent = result(&w, true);
    assert!(silent.nan.is_none());
    assert!(silent.summary.loss.iter().any(|l| !l.is_finite()) || silent.summary.fits);
    let base_sc = silent.summary.busy_fraction.sc * silent.summary.step_time_us;
    w.xla_sc_detect_nan = true;
    let caught = result(&w, true);
    let msg = caught.nan.clone().expect("a NaN is caught");
    assert!(msg.contains("NaN at step") && msg.contains("table t"), "{msg}");
    assert!(!caught.summary.fits);
    assert!(caught.summary.loss.len() < w.steps as usize);
    assert!(caught.summary.busy_fraction.sc * caught.summary.step_time_us > base_sc);
}

#[test]
fn simulated_quantization_costs_time_and_coarse_levels_cost_loss() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.steps = 12;
    // Sequential: every earlier update is visible, so only the quantization changes the numerics.
    w.pipelining = workloads::Pipelining::Sequential;
    let plain = result(&w, true);
    let q = |buckets, range: f32| workloads::spec::QuantizationDef {
        quantization_config_num_buckets: buckets,
        quantization_config_low: -range,
        quantization_config_high: range,
    };
    w.quantization = Some(q(65_536, 1.0));
    let fine = result(&w, true);
    w.quantization = Some(q(2, 0.1));
    let coarse = result(&w, true);
    let last = |r: &workloads::RunResult| *r.summary.loss.last().unwrap();
    assert!(
        (last(&fine) - last(&plain)).abs() < 2e-3,
        "{} vs {}",
        last(&fine),
        last(&plain)
    );
    // Two levels move every looked-up value to +-0.1: the loss curve changes measurably (on this
    // planted task the larger magnitudes happen to fit faster; the sign is model-dependent).
    assert!(
        (last(&coarse) - last(&plain)).abs() > 1e-3,
        "{} vs {}",
        last(&coarse),
        last(&plain)
    );
    let sc = |r: &workloads::RunResult| r.summary.busy_fraction.sc * r.summary.step_time_us;
    assert!(sc(&fine) > sc(&plain));
    assert!(knob(&coarse, "quantization_config_num_buckets")
        .2
        .contains("final loss"));
}

#[test]
fn a_single_hot_id_is_named_and_shuffling_is_not_advised() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.shuffle_ids = true;
    let r = result(&w, false);
    assert!(r.straggler.contains("one id (table t2, id 17757"), "{}", r.straggler);
    assert!(r.straggler.contains("shuffling cannot split one id"));
}

#[test]
fn every_stack_pays_its_own_all_to_all() {
    // The MLPerf model with all 26 tables on the SparseCores.
    let mut w = Workload::preset("dlrm-criteo").unwrap();
    for t in &mut w.tables {
        t.placement = workloads::spec::Placement::Sparsecore;
    }
    let stacked = result(&w, false);
    let mut off = w.clone();
    off.disable_table_stacking = true;
    let unstacked = result(&off, false);
    let a2a = |r: &workloads::RunResult| {
        r.recorder
            .spans
            .iter()
            // One latency span per collective (its bytes are one span per ICI link group).
            .filter(|s| s.category == "ici_latency" && s.name.starts_with("all-to-all"))
            .count()
            // Every simulated step: warm-up, the steps asked for and drain.
            / (r.summary.warmup_steps + w.steps as u64 + r.summary.drain_steps) as usize
    };
    assert_eq!(a2a(&stacked), 2 * stacked.summary.limits.len());
    assert_eq!(a2a(&unstacked), 2 * 26);
    // 26 collectives each way instead of 2: the latency is no longer hidden behind the TensorCore.
    assert!(unstacked.summary.step_time_us > 1.3 * stacked.summary.step_time_us);
    assert!(knob(&unstacked, "disable_table_stacking")
        .2
        // Each pays 3.55 us to launch plus 1 us per hop over the 4x4x4 torus's diameter of 6: 26 x 9.55 us.
        .contains("26 all-to-alls each way (248.3 µs"));
}
