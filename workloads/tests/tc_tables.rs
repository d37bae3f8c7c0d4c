//! The TensorCore tables' kernels follow the workload's megacore flag, not the preset's.

use workloads::program::{dense::dense_program, resolve::resolve};
use workloads::Workload;

fn scatter_cycles(megacore: bool) -> u64 {
    let mut w = Workload::preset("dlrm-criteo").unwrap();
    w.megacore = Some(megacore);
    let plan = resolve(&w, None).unwrap();
    let dense = dense_program(&plan).unwrap();
    dense
        .backward
        .iter()
        .find(|k| k.name == "tensorcore tables scatter-add")
        .unwrap()
        .cycles
}

#[test]
fn scatter_add_follows_the_workloads_megacore_flag() {
    // MLPerf DLRM's TensorCore table: 11 tables concatenated, 5,120 rows of 128 f32 (reference
    // mlperf-dlrm-v4.md). Its dense gradient is 5,120 x 128 x 4 B written and read back: 5,242,880 B
    // at v4's 491 GB/s / 1.045 GHz = 469.856 B per cycle (fitted efficiency 1.0 on v4) is 11,158
    // cycles, plus the fitted 3,600-cycle launch. One replica per TensorCore (megacore off) writes
    // the whole gradient; a megacore kernel splits it between the two TensorCores.
    let tables: u64 = Workload::preset("dlrm-criteo")
        .unwrap()
        .tensorcore_tables()
        .map(|t| t.vocab * t.dim)
        .sum();
    assert_eq!(tables, 5120 * 128, "the preset's TensorCore tables");
    let per_cycle: f64 = 491e9 / 1.045e9;
    let off = (3600.0 + 5120.0 * 128.0 * 8.0 / per_cycle).ceil() as u64;
    let on = (3600.0 + 2560.0 * 128.0 * 8.0 / per_cycle).ceil() as u64;
    assert_eq!(scatter_cycles(false), off);
    assert_eq!(scatter_cycles(true), on);
}
