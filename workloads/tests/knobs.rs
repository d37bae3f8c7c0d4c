//! The SparseCore guide's knobs move time and memory the way the guide says.

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
