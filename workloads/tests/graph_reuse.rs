//! A task graph rebuilt in place for another configuration of the same shape (other chip, batch,
//! ids: only durations differ) schedules exactly as a freshly built one: every task's start and end,
//! every span and counter; a graph of another shape is not rebuilt in place.

use workloads::program::{dense, graph, resolve, work};
use workloads::spec::{Pipelining, Workload};
use workloads::{simulate, RunOptions};

fn graph_of(w: &Workload) -> (resolve::Plan, work::RunWork, dense::DenseProgram) {
    let plan = resolve::resolve(w, None).unwrap();
    let work = work::run_work(&plan, None).unwrap();
    let dense = dense::dense_program(&plan).unwrap();
    (plan, work, dense)
}

fn config(preset: &str, pipelining: Pipelining, chip: &str, chips: u32, batch: u64) -> Workload {
    let mut w = Workload::preset(preset).unwrap();
    (w.pipelining, w.chip, w.global_batch) = (pipelining, chip.to_string(), batch);
    if w.chips != chips {
        w.topology = None;
    }
    w.chips = chips;
    w
}

#[test]
fn a_graph_rebuilt_in_place_schedules_as_a_fresh_one() {
    for preset in ["dlrm-small", "skewed", "dlrm-criteo"] {
        for pipelining in [Pipelining::Sequential, Pipelining::Pipelined] {
            // v5p and v4: other clocks and rates, same SparseCore count; another batch, so other
            // ids (dlrm-criteo stacks its tables otherwise there: twice the chips, same ids).
            let a = config(preset, pipelining, "v5p", 8, 8192);
            let b = match preset {
                "dlrm-criteo" => config(preset, pipelining, "v5p", 16, 16384),
                _ => config(preset, pipelining, "v4", 8, 16384),
            };
            let (pa, wa, da) = graph_of(&a);
            let (pb, wb, db) = graph_of(&b);
            assert_eq!(graph::shape_key(&pa, &da), graph::shape_key(&pb, &db), "{preset}");
            let old = graph::build(&pa, &wa, &da).unwrap();
            // A run first, so the engine holds its run-ready form, which the rebuild must update.
            old.engine.run().unwrap();
            let reused = graph::rebuild_in_place(&pb, &wb, &db, old)
                .unwrap()
                .unwrap_or_else(|| panic!("{preset} {pipelining:?}: same shape, rebuilt in place"));
            let fresh = graph::build(&pb, &wb, &db).unwrap();
            assert_eq!(reused.engine.task_count(), fresh.engine.task_count());
            let (r, f) = (reused.engine.run().unwrap(), fresh.engine.run().unwrap());
            for i in 0..fresh.engine.task_count() {
                let (ti, tf) = (reused.engine.task_at(i).unwrap(), fresh.engine.task_at(i).unwrap());
                assert_eq!(ti, tf);
                assert_eq!((r.start(ti), r.end(ti)), (f.start(tf), f.end(tf)), "{preset}: task {i}");
                assert_eq!(reused.engine.task(ti), fresh.engine.task(tf));
            }
            assert_eq!((r.makespan, r.events), (f.makespan, f.events));
            assert_eq!(r.resource_stats, f.resource_stats);
            assert_eq!(r.recorder.spans, f.recorder.spans);
            assert_eq!(r.recorder.counters, f.recorder.counters);
            assert_eq!(reused.preds, fresh.preds);
            assert_eq!(reused.sc_tile_cycles, fresh.sc_tile_cycles);
        }
    }
}

#[test]
fn another_shape_is_built_afresh() {
    let a = config("dlrm-small", Pipelining::Pipelined, "v5p", 4, 4096);
    let mut b = a.clone();
    b.steps += 1;
    let (pa, wa, da) = graph_of(&a);
    let (pb, wb, db) = graph_of(&b);
    let old = graph::build(&pa, &wa, &da).unwrap();
    assert!(graph::rebuild_in_place(&pb, &wb, &db, old).unwrap().is_none());
    // v6e has two SparseCores per chip, v5p four.
    let c = config("dlrm-small", Pipelining::Pipelined, "v6e", 4, 4096);
    let (pc, wc, dc) = graph_of(&c);
    let old = graph::build(&pa, &wa, &da).unwrap();
    assert!(graph::rebuild_in_place(&pc, &wc, &dc, old).unwrap().is_none());
    // `rebuild` falls back to a fresh build.
    let old = graph::build(&pa, &wa, &da).unwrap();
    let g = graph::rebuild(&pc, &wc, &dc, Some(old)).unwrap();
    assert_eq!(
        g.engine.task_count(),
        graph::build(&pc, &wc, &dc).unwrap().engine.task_count()
    );
}

#[test]
fn runs_sharing_a_cache_give_the_results_of_runs_alone() {
    // The cache hands each run the previous run's graph of its shape to rebuild.
    let cache = workloads::cache::RunCache::new();
    let shared = RunOptions {
        cache: Some(cache),
        ..Default::default()
    };
    for (chip, chips, batch) in [("v5p", 4, 4096), ("v4", 4, 8192), ("v5p", 4, 16384), ("tpu7x", 8, 8192)] {
        let w = config("dlrm-small", Pipelining::Pipelined, chip, chips, batch);
        let alone = simulate(&w, &RunOptions::default()).unwrap();
        let with = simulate(&w, &shared).unwrap();
        assert_eq!(
            serde_json::to_string(&with.summary).unwrap(),
            serde_json::to_string(&alone.summary).unwrap()
        );
        assert_eq!(with.recorder.spans, alone.recorder.spans);
        assert_eq!(with.bottleneck, alone.bottleneck);
    }
}
