use super::*;

fn ghz() -> Clock {
    Clock::from_mhz(1000)
}

#[test]
fn two_transfers_share_bandwidth_fairly() {
    // 100 B/s shared: 100 B and 300 B start together; each gets 50 B/s until the first ends at 2 s,
    // then the second has 200 B left at 100 B/s: ends at 4 s.
    let mut e = Engine::new();
    let bw = e.add_bandwidth("chip", "HBM", 100).unwrap();
    let a = e.add_task(Task::transfer(bw, 100).name("a"));
    let b = e.add_task(Task::transfer(bw, 300).name("b"));
    let r = e.run().unwrap();
    assert_eq!(r.end(a), Some(SimTime(2 * 1_000_000_000_000)));
    assert_eq!(r.end(b), Some(SimTime(4 * 1_000_000_000_000)));
    assert_eq!(r.resource_stats[0].bytes, 400);
    assert_eq!(r.resource_stats[0].busy_ps, 4_000_000_000_000);
}

#[test]
fn caps_leave_bandwidth_to_others() {
    // 100 B/s, a capped at 20 B/s: b gets 80 B/s. a: 40 B -> 2 s. b: 160 B -> 2 s.
    let mut e = Engine::new();
    let bw = e.add_bandwidth("chip", "HBM", 100).unwrap();
    let a = e.add_task(Task::transfer(bw, 40).cap(20));
    let b = e.add_task(Task::transfer(bw, 160));
    let r = e.run().unwrap();
    assert_eq!(r.end(a), Some(SimTime(2_000_000_000_000)));
    assert_eq!(r.end(b), Some(SimTime(2_000_000_000_000)));
}

#[test]
fn a_later_transfer_slows_an_earlier_one() {
    // a: 200 B alone at 100 B/s for 1 s (100 B left), then b (50 B) joins: both 50 B/s;
    // b ends at 2 s, a has 50 B left at 100 B/s: ends at 2.5 s.
    let mut e = Engine::new();
    let bw = e.add_bandwidth("chip", "HBM", 100).unwrap();
    let a = e.add_task(Task::transfer(bw, 200));
    let d = e.add_task(Task::delay(SimTime(1_000_000_000_000)));
    let b = e.add_task(Task::transfer(bw, 50));
    e.add_dep(d, b).unwrap();
    let r = e.run().unwrap();
    assert_eq!(r.end(b), Some(SimTime(2_000_000_000_000)));
    assert_eq!(r.end(a), Some(SimTime(2_500_000_000_000)));
}

#[test]
fn dependencies_and_fifo_units() {
    let mut e = Engine::new();
    let mxu = e.add_unit("chip", "MXU", ghz(), QueuePolicy::Fifo).unwrap();
    let a = e.add_task(Task::occupy(mxu, 10));
    let b = e.add_task(Task::occupy(mxu, 5));
    let c = e.add_task(Task::occupy(mxu, 7));
    e.add_dep(a, c).unwrap();
    let r = e.run().unwrap();
    // a [0,10), b queued behind a [10,15), c ready at 10 but behind b: [15,22).
    assert_eq!((r.start(a), r.end(a)), (Some(SimTime(0)), Some(SimTime(10_000))));
    assert_eq!((r.start(b), r.end(b)), (Some(SimTime(10_000)), Some(SimTime(15_000))));
    assert_eq!((r.start(c), r.end(c)), (Some(SimTime(15_000)), Some(SimTime(22_000))));
    assert_eq!(r.resource_stats[0].busy_ps, 22_000);
}

#[test]
fn priority_queue_serves_highest_first() {
    let mut e = Engine::new();
    let u = e.add_unit("chip", "tile", ghz(), QueuePolicy::Priority).unwrap();
    let first = e.add_task(Task::occupy(u, 1));
    let low = e.add_task(Task::occupy(u, 1).priority(1));
    let high = e.add_task(Task::occupy(u, 1).priority(5));
    let r = e.run().unwrap();
    assert_eq!(r.end(first), Some(SimTime(1_000)));
    assert_eq!(r.end(high), Some(SimTime(2_000)));
    assert_eq!(r.end(low), Some(SimTime(3_000)));
}

#[test]
fn multi_server_units_run_in_parallel() {
    let mut e = Engine::new();
    let u = e
        .add_unit_with_servers("chip", "tiles", ghz(), QueuePolicy::Fifo, 2)
        .unwrap();
    let ts: Vec<_> = (0..3).map(|_| e.add_task(Task::occupy(u, 4))).collect();
    let r = e.run().unwrap();
    assert_eq!(r.end(ts[0]), Some(SimTime(4_000)));
    assert_eq!(r.end(ts[1]), Some(SimTime(4_000)));
    assert_eq!(r.end(ts[2]), Some(SimTime(8_000)));
}

#[test]
fn waits_join_and_cycles_are_errors() {
    let mut e = Engine::new();
    let u = e.add_unit("chip", "u", ghz(), QueuePolicy::Fifo).unwrap();
    let a = e.add_task(Task::occupy(u, 3));
    let d = e.add_task(Task::delay(SimTime(5_000)));
    let w = e.add_task(Task::wait());
    e.add_dep(a, w).unwrap();
    e.add_dep(d, w).unwrap();
    let r = e.run().unwrap();
    assert_eq!(r.end(w), Some(SimTime(5_000)));

    let mut e = Engine::new();
    let x = e.add_task(Task::wait().name("x"));
    let y = e.add_task(Task::wait().name("y"));
    e.add_dep(x, y).unwrap();
    e.add_dep(y, x).unwrap();
    assert!(matches!(e.run(), Err(EngineError::Cycle { stuck: 2, .. })));
}

#[test]
fn wrong_resource_kind_is_an_error() {
    let mut e = Engine::new();
    let bw = e.add_bandwidth("c", "HBM", 10).unwrap();
    e.add_task(Task::occupy(bw, 3).name("bad"));
    assert!(matches!(e.run(), Err(EngineError::BadResource { .. })));
}

#[test]
fn identical_inputs_give_identical_results() {
    let build = || {
        let mut e = Engine::new();
        let bw = e.add_bandwidth("c", "HBM", 1_000_000_007).unwrap();
        let u = e.add_unit("c", "u", Clock::from_mhz(1750), QueuePolicy::Fifo).unwrap();
        let mut prev = None;
        for i in 0..200u64 {
            let t = if i % 3 == 0 {
                e.add_task(Task::occupy(u, i * 7 + 1))
            } else {
                e.add_task(Task::transfer(bw, i * 1013 + 1))
            };
            if let Some(p) = prev {
                if i % 4 == 0 {
                    e.add_dep(p, t).unwrap();
                }
            }
            prev = Some(t);
        }
        let r = e.run().unwrap();
        (r.makespan, format!("{:?}", r.recorder.spans), r.events)
    };
    assert_eq!(build(), build());
}

#[test]
fn runs_reuse_the_graph_until_it_changes() {
    let mut e = Engine::new();
    let u = e.add_unit("chip", "u", ghz(), QueuePolicy::Fifo).unwrap();
    let a = e.add_task(Task::occupy(u, 1000));
    let first = e.run().unwrap();
    assert_eq!(first.makespan, SimTime(1_000_000));
    // Same graph: the same schedule from the cached template.
    assert_eq!(e.run().unwrap().makespan, first.makespan);
    // A new task and dependency must be seen by the next run.
    let b = e.add_task(Task::occupy(u, 500));
    assert_eq!(e.run().unwrap().makespan, SimTime(1_500_000));
    let c = e.add_task(Task::delay(SimTime(10)));
    e.add_dep(c, a).unwrap();
    // a now waits for c, so b takes the unit first.
    let r = e.run().unwrap();
    assert_eq!(r.end(b), Some(SimTime(500_000)));
    assert_eq!(r.start(a), Some(SimTime(500_000)));
}

#[test]
fn replaced_tasks_and_resources_run_as_a_fresh_graph() {
    // Two builds of one structure with other durations, caps and rates.
    let build = |scale: u64| {
        let mut e = Engine::new();
        let u = e
            .add_unit("chip", "u", Clock::from_mhz(1000 * scale), QueuePolicy::Fifo)
            .unwrap();
        let bw = e.add_bandwidth("chip", "bw", 1_000_000_000 * scale).unwrap();
        let a = e.add_task(Task::occupy(u, 100 * scale).name(format!("a{scale}")));
        let b = e.add_task(Task::transfer(bw, 5000 * scale).cap(400_000_000 * scale));
        let c = e.add_task(Task::transfer(bw, 3000));
        let d = e.add_task(Task::delay(SimTime(7 * scale)));
        e.add_dep(a, b).unwrap();
        e.add_dep(a, c).unwrap();
        e.add_dep(b, d).unwrap();
        e
    };
    let mut old = build(1);
    old.run().unwrap();
    let fresh = build(3);
    old.replace_resources(fresh.resources()).unwrap();
    for i in 0..fresh.task_count() {
        let id = fresh.task_at(i).unwrap();
        old.replace_task(id, fresh.task(id).unwrap().clone()).unwrap();
    }
    let (r, f) = (old.run().unwrap(), fresh.run().unwrap());
    assert_eq!((r.makespan, r.events), (f.makespan, f.events));
    assert_eq!(r.recorder.spans, f.recorder.spans);
    assert_eq!(r.recorder.counters, f.recorder.counters);
    // Other resources are refused.
    let mut other = Engine::new();
    other.add_unit("chip", "u", ghz(), QueuePolicy::Fifo).unwrap();
    assert_eq!(
        old.replace_resources(other.resources()),
        Err(EngineError::ResourcesDiffer)
    );
}

/// Tasks `tasks` run after `from` and join in a wait task, returned.
fn fork_join(e: &mut Engine, from: TaskId, tasks: [TaskId; 2]) -> TaskId {
    let join = e.add_task(Task::wait());
    for t in tasks {
        e.add_dep(from, t).unwrap();
        e.add_dep(t, join).unwrap();
    }
    join
}

/// A training-step-like pipeline: host, then a capped transfer, then a SparseCore-like pass and
/// its traffic sharing HBM with the TensorCore's kernels; steps overlap (host two steps ahead,
/// lookups gated by the backward pass two steps back). `work(step)` scales each step's amounts.
/// Returns the engine and each step's first task.
fn pipeline(steps: usize, work: impl Fn(usize) -> u64) -> (Engine, Vec<TaskId>) {
    let mut e = Engine::new();
    let host = e.add_unit("host", "host", ghz(), QueuePolicy::Fifo).unwrap();
    let pcie = e.add_bandwidth("host", "PCIe", 3_000_000_000).unwrap();
    let sc = e
        .add_unit("chip", "SC", Clock::from_mhz(1500), QueuePolicy::Fifo)
        .unwrap();
    let tc = e
        .add_unit("chip", "TC", Clock::from_mhz(940), QueuePolicy::Fifo)
        .unwrap();
    let hbm = e.add_bandwidth("chip", "HBM", 7_000_000_007).unwrap();
    let (mut firsts, mut fwd_start, mut bwd_done, mut update) = (vec![], vec![], vec![], vec![]);
    for i in 0..steps {
        let k = work(i);
        let h = e.add_task(Task::occupy(host, 900 * k).name(format!("host {i}")));
        firsts.push(h);
        if i >= 2 {
            e.add_dep(fwd_start[i - 2], h).unwrap();
        }
        let p = e.add_task(Task::transfer(pcie, 2000 * k).cap(2_000_000_000));
        e.add_dep(h, p).unwrap();
        let fs = e.add_task(Task::wait());
        e.add_dep(p, fs).unwrap();
        if i >= 2 {
            e.add_dep(bwd_done[i - 2], fs).unwrap();
        }
        let fx = e.add_task(Task::occupy(sc, 700 * k).name(format!("sc fwd {i}")));
        let fm = e.add_task(
            Task::transfer(hbm, 5000 * k)
                .cap(4_000_000_000)
                .name(format!("gather {i}")),
        );
        let fd = fork_join(&mut e, fs, [fx, fm]);
        let lat = e.add_task(Task::delay(SimTime(150_000)));
        e.add_dep(fd, lat).unwrap();
        let mut prev = lat;
        if let Some(&u) = update.last() {
            let j = e.add_task(Task::wait());
            e.add_dep(lat, j).unwrap();
            e.add_dep(u, j).unwrap();
            prev = j;
        }
        for n in 0..3u64 {
            let c = e.add_task(Task::occupy(tc, 400 + 100 * n).name(format!("kernel {n} step {i}")));
            let m = e.add_task(Task::transfer(hbm, 3000 + 500 * n).name(format!("kernel {n} HBM {i}")));
            prev = fork_join(&mut e, prev, [c, m]);
        }
        update.push(prev);
        let bx = e.add_task(Task::occupy(sc, 800 * k).name(format!("sc bwd {i}")));
        let bm = e.add_task(
            Task::transfer(hbm, 6000 * k)
                .cap(4_000_000_000)
                .name(format!("update {i}")),
        );
        let bd = fork_join(&mut e, prev, [bx, bm]);
        fwd_start.push(fs);
        bwd_done.push(bd);
    }
    (e, firsts)
}

/// Everything a run gives, but what it skipped.
fn everything(e: &Engine, r: &RunResult) -> String {
    let times: Vec<_> = (0..e.task_count())
        .map(|i| e.task_at(i).unwrap())
        .map(|t| (r.start(t), r.end(t)))
        .collect();
    format!(
        "{times:?} {:?} {:?} {} {:?} {:?}",
        r.makespan, r.resource_stats, r.events, r.recorder.spans, r.recorder.counters
    )
}

#[test]
fn a_repeating_run_skips_periods_and_gives_the_full_result() {
    // Every step alike, and steps alternating between two sizes (the graph's period is 2 steps).
    for (period, work) in [(1, 1u64), (2, 3)] {
        let (e, firsts) = pipeline(200, |i| if i % 2 == 1 { work } else { 1 });
        let full = e.run().unwrap();
        let fast = e.run_repeating(firsts[1], firsts[1 + period]).unwrap();
        assert_eq!(everything(&e, &fast), everything(&e, &full), "period {period}");
        assert_eq!(full.fast_forward, None);
        let ff = fast.fast_forward.expect("the schedule repeats");
        // Most of the 200 steps were filled in, not simulated.
        assert!(ff.periods * ff.strides * period as u64 >= 150, "{ff:?}");
    }
}

#[test]
fn a_run_that_does_not_repeat_is_simulated_in_full() {
    // Growing steps: the graph has no copies.
    let (e, firsts) = pipeline(30, |i| 1 + i as u64);
    let fast = e.run_repeating(firsts[1], firsts[2]).unwrap();
    assert_eq!(fast.fast_forward, None);
    assert_eq!(everything(&e, &fast), everything(&e, &e.run().unwrap()));
    // Repeating steps watched with the wrong stride (1 step of a 3-step pattern) are not skipped.
    let (e, firsts) = pipeline(30, |i| 1 + (i % 3) as u64);
    let fast = e.run_repeating(firsts[1], firsts[2]).unwrap();
    assert_eq!(fast.fast_forward, None);
    assert_eq!(everything(&e, &fast), everything(&e, &e.run().unwrap()));
}

#[test]
fn a_graph_that_repeats_after_a_warm_up_is_skipped_after_it() {
    // Five long steps first: in this pipeline later steps' hosts then finish out of order (step 9
    // before step 8), so some copies of the anchor are passed over without a capture.
    let (e, firsts) = pipeline(200, |i| if i < 5 { 4 } else { 1 });
    let full = e.run().unwrap();
    let order = |a: usize, b: usize| full.end(firsts[a]) < full.end(firsts[b]);
    assert!(order(9, 8));
    // Watched from step 1: captures wait for the copies (tasks from step 5 on).
    let fast = e.run_repeating(firsts[1], firsts[2]).unwrap();
    assert_eq!(everything(&e, &fast), everything(&e, &full));
    let ff = fast.fast_forward.expect("the schedule repeats after the warm-up");
    assert!(ff.periods * ff.strides >= 150, "{ff:?}");
}
