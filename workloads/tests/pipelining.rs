//! The checks of the `tpusim run` issue: pipelining gains, linearity in batch, the sequential
//! critical path, and functional training with and without staleness.

use workloads::functional::{samples, step, Model, FUNCTIONAL_SAMPLES};
use workloads::{simulate, Pipelining, RunOptions, Workload};

fn step_us(mut w: Workload, mode: Pipelining) -> f64 {
    w.pipelining = mode;
    simulate(&w, &RunOptions::default()).unwrap().summary.step_time_us
}

#[test]
fn balanced_gains_at_least_1_7x_from_pipelining() {
    let w = Workload::preset("balanced").unwrap();
    let (seq, pip) = (
        step_us(w.clone(), Pipelining::Sequential),
        step_us(w, Pipelining::Pipelined),
    );
    // At most ~2x: pipelining overlaps two stages, it cannot remove work.
    assert!(
        (1.7..=2.05).contains(&(seq / pip)),
        "sequential {seq} us, pipelined {pip} us: {:.2}x",
        seq / pip
    );
}

#[test]
fn tensorcore_bound_gains_less_than_1_15x() {
    let w = Workload::preset("tc-heavy").unwrap();
    let (seq, pip) = (
        step_us(w.clone(), Pipelining::Sequential),
        step_us(w, Pipelining::Pipelined),
    );
    assert!(seq / pip < 1.15, "{:.2}x", seq / pip);
    assert!(seq / pip >= 1.0);
}

#[test]
fn step_time_grows_linearly_with_batch() {
    let mut w = Workload::preset("balanced").unwrap();
    w.pipelining = Pipelining::Sequential;
    let t: Vec<f64> = [8192u64, 16384, 32768]
        .iter()
        .map(|&b| {
            let mut x = w.clone();
            x.global_batch = b;
            simulate(&x, &RunOptions::default()).unwrap().summary.step_time_us
        })
        .collect();
    // Doubling the batch roughly doubles the step (fixed costs make it a little less).
    for k in 0..2 {
        let r = t[k + 1] / t[k];
        assert!((1.6..=2.1).contains(&r), "{t:?}");
    }
    let slope1 = t[1] - t[0];
    let slope2 = (t[2] - t[1]) / 2.0;
    assert!((slope2 / slope1 - 1.0).abs() < 0.25, "{t:?}");
}

#[test]
fn sequential_step_equals_its_stages_critical_path() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.pipelining = Pipelining::Sequential;
    let r = simulate(&w, &RunOptions::default()).unwrap();
    // In sequential mode a step's SC forward starts after the previous step's SC backward: the steady
    // step time is the span from one SC forward start to the next, i.e. the sum of the stages.
    let times = &r.step_times;
    let n = times.len();
    for i in 3..n {
        assert!(
            times[i].0 >= times[i - 1].1,
            "step {i} started before step {} ended",
            i - 1
        );
    }
    let stage_sum = (times[n - 1].1 - times[n - 1].0) as f64 / 1e6;
    let gap = (times[n - 1].0 - times[n - 2].1) as f64 / 1e6;
    assert!(
        ((stage_sum + gap) / r.summary.step_time_us - 1.0).abs() < 0.02,
        "{stage_sum} + {gap} vs {}",
        r.summary.step_time_us
    );
}

#[test]
fn functional_without_staleness_equals_a_plain_training_loop() {
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.steps = 8;
    w.pipelining = Pipelining::Sequential;
    let sim = simulate(
        &w,
        &RunOptions {
            functional: true,
            ..Default::default()
        },
    )
    .unwrap();
    // Reference: update the tables right after each step, then look up the next batch.
    let mut model = Model::new(&w);
    let mut reference = Vec::new();
    for i in 0..w.steps {
        let batch = samples(&w, i, FUNCTIONAL_SAMPLES);
        let (loss, updates) = step(&w, &mut model, &batch).unwrap();
        reference.push(loss as f64);
        workloads::functional::apply(&mut model, &updates);
    }
    assert_eq!(sim.summary.loss, reference);
    // Pipelined: lookups miss the previous step's update, so the curve differs.
    w.pipelining = Pipelining::Pipelined;
    let stale = simulate(
        &w,
        &RunOptions {
            functional: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_ne!(stale.summary.loss, reference);
    assert_eq!(stale.summary.loss[0], reference[0]);
}

#[test]
fn deterministic() {
    let w = Workload::preset("dlrm-small").unwrap();
    let a = serde_json::to_string(&simulate(&w, &RunOptions::default()).unwrap().summary).unwrap();
    let b = serde_json::to_string(&simulate(&w, &RunOptions::default()).unwrap().summary).unwrap();
    assert_eq!(a, b);
}

#[test]
fn tensorcore_ops_show_their_kernel_stages_inside_the_op() {
    let w = workloads::Workload::preset("dlrm-small").unwrap();
    let r = workloads::simulate(&w, &workloads::RunOptions::default()).unwrap();
    let spans = &r.recorder.spans;
    // Model phases, labelled as such: the engine schedules the op, the model splits it.
    let phases: Vec<_> = spans.iter().filter(|s| s.category == "tc_model_phase").collect();
    for unit in [
        "TC MXU (model)",
        "TC VPU (model)",
        "TC DMA (model)",
        "TC sequencer (model)",
    ] {
        assert!(phases.iter().any(|s| s.track.thread == unit), "no {unit} spans");
    }
    // Every stage lies inside an op span of the TC thread with the same step.
    for p in &phases {
        assert!(
            spans.iter().any(|s| s.track.thread == "TC"
                && s.start <= p.start
                && p.end <= s.end
                && p.name.starts_with(s.name.rsplit_once(" step ").unwrap().0)
                && p.name.ends_with("(model phase)")),
            "{} outside its op",
            p.name
        );
    }
}
