//! Engine throughput on a large synthetic graph: 16 units, 4 bandwidth resources, 1M tasks in
//! chains with fan-in every 64 tasks; recording off. Throughput is heap events per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sim_core::engine::{Engine, QueuePolicy, Task};
use sim_core::time::Clock;

fn build(n: usize) -> Engine {
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
        if i % 64 == 63 {
            e.add_dep(ids[i - 33], t).unwrap();
        }
        ids.push(t);
    }
    e
}

fn bench(c: &mut Criterion) {
    let n = 1_000_000;
    let engine = build(n);
    let events = engine.run().unwrap().events;
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    g.throughput(Throughput::Elements(events));
    g.bench_function("1M tasks, events", |b| b.iter(|| engine.run().unwrap().makespan));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
