use super::*;
use crate::time::{Clock, SimTime};

const S: u64 = 1_000_000_000_000;

#[test]
fn two_transfers_share_bandwidth() {
    let mut e = Engine::new();
    let hbm = e.add_bandwidth("chip0", "HBM", 100);
    let a = e.add_task(Task::transfer(hbm, 100).name("a"));
    let b = e.add_task(Task::transfer(hbm, 300).name("b"));
    let r = e.run().unwrap();
    assert_eq!(r.end(a), Some(SimTime(2 * S)));
    assert_eq!(r.end(b), Some(SimTime(4 * S)));
    assert_eq!(r.bandwidth_busy(hbm), SimTime(4 * S));
    assert_eq!(r.bandwidths[hbm].bytes, 400);
}

#[test]
fn occupy_chain_on_unit() {
    let mut e = Engine::new();
    let u = e.add_unit("c", "MXU", Clock::from_mhz(1000), QueuePolicy::Fifo);
    let a = e.add_task(Task::occupy(u, 10));
    let b = e.add_task(Task::occupy(u, 5));
    e.add_dep(a, b);
    let r = e.run().unwrap();
    assert_eq!(r.start(b), Some(SimTime(10_000)));
    assert_eq!(r.end(b), Some(SimTime(15_000)));
    assert_eq!(r.unit_busy(u), SimTime(15_000));
    assert_eq!(r.events, 4);
}

#[test]
fn cycle_is_an_error() {
    let mut e = Engine::new();
    let a = e.add_task(Task::wait().name("a"));
    let b = e.add_task(Task::wait().name("b"));
    e.add_dep(a, b);
    e.add_dep(b, a);
    match e.run() {
        Err(EngineError::Cycle { cycle }) => assert_eq!(cycle.len(), 3),
        other => panic!("{other:?}"),
    }
}
