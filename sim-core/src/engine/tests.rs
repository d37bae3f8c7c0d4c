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
