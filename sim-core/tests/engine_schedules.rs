//! Engine schedules that can be checked by hand, plus invariants over random graphs.

use proptest::prelude::*;
use sim_core::engine::{Engine, QueuePolicy, Task};
use sim_core::time::{Clock, SimTime};

const S: u64 = 1_000_000_000_000;

#[test]
fn capped_transfer_leaves_the_rest_to_an_uncapped_one() {
    // 100 B/s shared: A (100 B, cap 20 B/s) gets 20, B (300 B) gets 80 and is done at 3.75 s;
    // A has moved 75 B by then and needs 25 B more at its cap: 1.25 s, so it ends at 5 s.
    let mut e = Engine::new();
    let hbm = e.add_bandwidth("chip0", "HBM", 100).unwrap();
    let a = e.add_task(Task::transfer(hbm, 100).cap(20));
    let b = e.add_task(Task::transfer(hbm, 300));
    let r = e.run().unwrap();
    assert_eq!(r.end(b), Some(SimTime(3 * S + 3 * S / 4)));
    assert_eq!(r.end(a), Some(SimTime(5 * S)));
    assert_eq!(r.busy(hbm), Some(SimTime(5 * S)));
}

#[test]
fn uneven_split_uses_the_whole_bandwidth() {
    // 100 B/s over three transfers: integer rates 33, 33, 34 (sum 100); 100 B each.
    let mut e = Engine::new();
    let hbm = e.add_bandwidth("chip0", "HBM", 100).unwrap();
    let ts: Vec<_> = (0..3).map(|_| e.add_task(Task::transfer(hbm, 100))).collect();
    let r = e.run().unwrap();
    // The last-sorted transfer gets 34 B/s: done at ceil(100e12 / 34) ps.
    let first = (100 * S).div_ceil(34);
    assert_eq!(r.end(ts[2]), Some(SimTime(first)));
    // Total work is 300 B at 100 B/s, so the last one ends within a picosecond of 3 s.
    let last = r.makespan.ps();
    assert!((3 * S..=3 * S + 2).contains(&last), "{last}");
}

#[test]
fn zero_length_tasks_take_no_time() {
    let mut e = Engine::new();
    let u = e.add_unit("c", "u", Clock::from_mhz(1000), QueuePolicy::Fifo).unwrap();
    let hbm = e.add_bandwidth("c", "HBM", 100).unwrap();
    let a = e.add_task(Task::occupy(u, 5));
    let z1 = e.add_task(Task::occupy(u, 0));
    let z2 = e.add_task(Task::transfer(hbm, 0));
    let z3 = e.add_task(Task::delay(SimTime::ZERO));
    let w = e.add_task(Task::wait());
    e.add_dep(a, z1).unwrap();
    e.add_dep(z1, z2).unwrap();
    e.add_dep(z2, z3).unwrap();
    e.add_dep(z3, w).unwrap();
    let r = e.run().unwrap();
    for t in [z1, z2, z3, w] {
        assert_eq!((r.start(t), r.end(t)), (Some(SimTime(5_000)), Some(SimTime(5_000))));
    }
    assert_eq!(r.makespan, SimTime(5_000));
}

#[test]
fn priority_unit_with_two_servers() {
    // Two blockers hold both servers; four tasks queue; the two highest priorities run first.
    let mut e = Engine::new();
    let u = e
        .add_unit_with_servers("c", "tiles", Clock::from_mhz(1000), QueuePolicy::Priority, 2)
        .unwrap();
    let b1 = e.add_task(Task::occupy(u, 10));
    let b2 = e.add_task(Task::occupy(u, 10));
    let ts: Vec<_> = [1, 4, 2, 3]
        .iter()
        .map(|&p| e.add_task(Task::occupy(u, 10).priority(p)))
        .collect();
    let r = e.run().unwrap();
    assert_eq!((r.start(b1), r.start(b2)), (Some(SimTime(0)), Some(SimTime(0))));
    // Queue order at 10 ns: priorities 4 and 3 first, then 2 and 1.
    assert_eq!(r.start(ts[1]), Some(SimTime(10_000)));
    assert_eq!(r.start(ts[3]), Some(SimTime(10_000)));
    assert_eq!(r.start(ts[2]), Some(SimTime(20_000)));
    assert_eq!(r.start(ts[0]), Some(SimTime(20_000)));
    assert_eq!(r.busy(u), Some(SimTime(60_000)));
}

#[test]
fn delay_and_wait_join() {
    let mut e = Engine::new();
    let d1 = e.add_task(Task::delay(SimTime(700)));
    let d2 = e.add_task(Task::delay(SimTime(300)));
    let w = e.add_task(Task::wait());
    e.add_dep(d1, w).unwrap();
    e.add_dep(d2, w).unwrap();
    let r = e.run().unwrap();
    assert_eq!(r.end(w), Some(SimTime(700)));
}

/// A random DAG (edges only from lower to higher index) on two units and one bandwidth.
fn random_engine(spec: &[(u8, u16, u16)], record: bool) -> Engine {
    let mut e = Engine::new();
    e.set_recording(record);
    let u0 = e.add_unit("c", "u0", Clock::from_mhz(1750), QueuePolicy::Fifo).unwrap();
    let u1 = e
        .add_unit_with_servers("c", "u1", Clock::from_mhz(940), QueuePolicy::Priority, 2)
        .unwrap();
    let bw = e.add_bandwidth("c", "HBM", 1_000_000_007).unwrap();
    let mut ids = Vec::new();
    for (i, &(kind, amount, dep)) in spec.iter().enumerate() {
        let t = match kind % 5 {
            0 => e.add_task(Task::occupy(u0, amount as u64)),
            1 => e.add_task(Task::occupy(u1, amount as u64).priority(amount as i32 % 7)),
            2 => e.add_task(Task::transfer(bw, amount as u64 * 64)),
            3 => e.add_task(Task::transfer(bw, amount as u64 * 64).cap(300_000_000)),
            _ => e.add_task(Task::wait()),
        };
        if i > 0 {
            e.add_dep(ids[dep as usize % i], t).unwrap();
        }
        ids.push(t);
    }
    e
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn runs_are_deterministic_and_respect_dependencies(spec in prop::collection::vec((0u8..5, 0u16..2000, 0u16..1000), 1..120)) {
        let e = random_engine(&spec, true);
        let r1 = e.run().unwrap();
        let r2 = e.run().unwrap();
        prop_assert_eq!(r1.makespan, r2.makespan);
        prop_assert_eq!(format!("{:?}", r1.recorder), format!("{:?}", r2.recorder));
        // Recording does not change the schedule.
        let r3 = random_engine(&spec, false).run().unwrap();
        prop_assert_eq!(r1.makespan, r3.makespan);
        prop_assert_eq!(r1.events, r3.events);
    }

    #[test]
    fn bandwidth_is_never_oversubscribed(spec in prop::collection::vec((2u8..4, 1u16..2000, 0u16..1000), 1..80)) {
        // Bytes moved can never exceed capacity x busy time (rates sum to at most the capacity).
        let e = random_engine(&spec, false);
        let r = e.run().unwrap();
        let stats = &r.resource_stats[2];
        let moved: u64 = spec.iter().map(|s| s.1 as u64 * 64).sum();
        prop_assert_eq!(stats.bytes, moved);
        let capacity_bytes = stats.busy_ps as u128 * 1_000_000_007 / 1_000_000_000_000 + 1;
        prop_assert!(stats.bytes as u128 <= capacity_bytes, "{} > {}", stats.bytes, capacity_bytes);
    }
}
