//! The step as data: `dlrm-criteo`'s program on its own chip (v4, 64 chips, a 4x4x4 torus), its
//! stages, their units, what each waits on across steps, and cost inputs, each expected value
//! derived by hand from `workloads/presets/dlrm-criteo.toml` (comments give the arithmetic).

use std::collections::BTreeSet;

use sim_core::tag::{Stage, Unit};
use workloads::program::{program, stages::StepProgram};
use workloads::{Pipelining, RunOptions, Workload};

/// Warm-up steps before the asked ones: `prefetch` (2) + 2 (ARCHITECTURE.md, steady-state window).
const WARM: usize = 4;

fn criteo(mode: Pipelining) -> StepProgram {
    let mut w = Workload::preset("dlrm-criteo").unwrap();
    w.pipelining = mode;
    program(&w, &RunOptions::default()).unwrap()
}

fn set(v: &[(Stage, usize)]) -> BTreeSet<(Stage, usize)> {
    v.iter().copied().collect()
}

/// v4 has 4 SparseCores per chip (sim-tpu/chips/v4.json); a 4x4x4 torus has 3 dimensions x 2 directions.
fn links() -> BTreeSet<Unit> {
    (0..6).map(Unit::IciLink).collect()
}

#[test]
fn criteo_step_has_its_stages_on_their_units() {
    let p = criteo(Pipelining::Sequential);
    let i = WARM + 1;
    // No HLO program (`dense.hlo`) and no kernel-launch stage of its own (a launch is part of its kernel).
    let want: BTreeSet<Stage> = [
        Stage::Host,
        Stage::Pcie,
        Stage::ScForward,
        Stage::AllToAll,
        Stage::CollectiveLatency,
        Stage::TcForward,
        Stage::TcBackward,
        Stage::AllReduce,
        Stage::TcUpdate,
        Stage::ScBackward,
    ]
    .into();
    assert_eq!(p.stages_of(i), want);
    let units = |s: Stage| p.get(s, i).unwrap().units.clone();
    assert_eq!(units(Stage::Host), [Unit::Host].into());
    assert_eq!(units(Stage::Pcie), [Unit::HostLink].into());
    let sc: BTreeSet<Unit> = (0..4).map(Unit::SparseCore).chain([Unit::Hbm]).collect();
    assert_eq!(units(Stage::ScForward), sc);
    assert_eq!(units(Stage::ScBackward), sc);
    let tc: BTreeSet<Unit> = [Unit::TensorCore, Unit::Hbm].into();
    for s in [Stage::TcForward, Stage::TcBackward, Stage::TcUpdate] {
        assert_eq!(units(s), tc, "{s:?}");
    }
    assert_eq!(units(Stage::AllToAll), links());
    assert_eq!(units(Stage::AllReduce), links());
    assert_eq!(units(Stage::CollectiveLatency), [Unit::IciLatency].into());
    // One all-reduce: one transfer per link group.
    assert_eq!(p.get(Stage::AllReduce, i).unwrap().tasks, 6);
}

#[test]
fn criteo_stages_wait_on_the_gates_of_their_pipelining() {
    for (mode, lag) in [(Pipelining::Sequential, 1), (Pipelining::Pipelined, 2)] {
        let p = criteo(mode);
        let i = WARM + 1;
        let waits = |s: Stage| p.get(s, i).unwrap().waits_on.clone();
        // The host works at most `prefetch` = 2 steps ahead: it waits for step i-2's SparseCore
        // forward to be allowed to start, which waited on step i-2's ids and the gate's SparseCore backward.
        assert_eq!(
            waits(Stage::Host),
            set(&[(Stage::Pcie, i - 2), (Stage::ScBackward, i - 2 - lag)]),
            "{mode:?}"
        );
        assert_eq!(waits(Stage::Pcie), set(&[(Stage::Host, i)]));
        // Lookups wait for the ids and for the tables' update `lag` steps back (stale by two when pipelined).
        assert_eq!(
            waits(Stage::ScForward),
            set(&[(Stage::Pcie, i), (Stage::ScBackward, i - lag)]),
            "{mode:?}"
        );
        // Activations after the lookups, gradients after the TensorCore backward.
        assert_eq!(
            waits(Stage::AllToAll),
            set(&[(Stage::ScForward, i), (Stage::TcBackward, i)])
        );
        // The TensorCore forward waits for its activations and the previous step's dense update.
        assert_eq!(
            waits(Stage::TcForward),
            set(&[(Stage::AllToAll, i), (Stage::TcUpdate, i - 1)])
        );
        assert_eq!(waits(Stage::TcBackward), set(&[(Stage::TcForward, i)]));
        // v4 without megacore runs a replica per TensorCore: their reduce-scatter ends the backward
        // pass (it is charged to it), the all-reduce follows, then the all-gather and the update.
        assert_eq!(waits(Stage::AllReduce), set(&[(Stage::TcBackward, i)]));
        assert_eq!(waits(Stage::TcUpdate), set(&[(Stage::AllReduce, i)]));
        assert_eq!(
            waits(Stage::ScBackward),
            set(&[(Stage::ScForward, i), (Stage::AllToAll, i)])
        );
    }
}

#[test]
fn criteo_cost_inputs_follow_from_the_workload_file() {
    let p = criteo(Pipelining::Sequential);
    let i = WARM + 1;
    // 55,296 samples over 64 chips = 864 per chip; 15 of the 26 one-hot features read SparseCore
    // tables (11 have `placement = "tensorcore"`): 12,960 ids a chip, 12 bytes each (row, column, gain).
    let ids = 864 * 15;
    let pcie = p.get(Stage::Pcie, i).unwrap();
    assert_eq!(pcie.bytes[&Unit::HostLink], ids * 12);
    // 32 host threads at the default 18 M ids/s each (the starter's `ids_per_s_per_thread`), on a
    // 1 GHz host unit: 12,960 / 576e6 s = 22,500 ns = 22,500 cycles.
    assert_eq!(p.get(Stage::Host, i).unwrap().cycles[&Unit::Host], 22_500);
    // Dense parameters: bottom 13-512-256-128 (7,168 + 131,328 + 32,896), top 857-1024-1024-512-256-1
    // (878,592 + 1,049,600 + 524,800 + 131,328 + 257), the 11 TensorCore tables' 5,120 rows x 128:
    // 171,392 + 2,584,577 + 655,360 = 3,411,329, all-reduced in bf16: 6,822,658 bytes.
    let b = 3_411_329u64 * 2;
    // On a 4-ring per dimension (wraparound), the data split in 3 chunks each taking the 3 dimensions
    // in turn: a dimension sees B/3 x (1 + 1/4 + 1/16) = 7B/16; reduce-scatter plus all-gather send
    // 2 x 3/4 of it, half each way: 21B/64 per link group.
    let ar = p.get(Stage::AllReduce, i).unwrap();
    for l in links() {
        let got = ar.bytes[&l] as f64;
        let want = b as f64 * 21.0 / 64.0;
        assert!((got / want - 1.0).abs() < 1e-3, "{l:?}: {got} bytes, {want} by hand");
    }
}
