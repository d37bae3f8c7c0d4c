//! Times one run of the engine benchmark's graph (for profiling).
use sim_core::engine::{Engine, QueuePolicy, Task};
use sim_core::time::Clock;
fn main() {
    let n = 1_000_000;
    let mut e = Engine::new();
    e.set_recording(false);
    let units: Vec<_> = (0..16)
        .map(|i| {
            e.add_unit("chip", &format!("u{i}"), Clock::from_mhz(1500), QueuePolicy::Fifo)
                .unwrap()
        })
        .collect();
    let bws: Vec<_> = (0..4)
        .map(|i| e.add_bandwidth("chip", &format!("bw{i}"), 1_000_000_000_000).unwrap())
        .collect();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let t = if i % 8 == 7 {
            e.add_task(Task::transfer(bws[i % 4], 4096 + (i as u64 % 512)))
        } else {
            e.add_task(Task::occupy(units[i % 16], 100 + (i as u64 * 7919) % 400))
        };
        if i >= 16 {
            e.add_dep(ids[i - 16], t).unwrap();
        }
        ids.push(t);
    }
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        let r = e.run().unwrap();
        println!(
            "{} events in {:?} -> {:.1} M/s",
            r.events,
            t0.elapsed(),
            r.events as f64 / t0.elapsed().as_secs_f64() / 1e6
        );
    }
}
