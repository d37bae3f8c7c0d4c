//! Engine throughput on large synthetic graphs, recording off; throughput is heap events per
//! second (task finishes, zero-time completions, bandwidth checks).
//! - "1M tasks": 16 units, 4 bandwidth resources, 16 interleaved chains with fan-in every 64
//!   tasks (the chains drift apart in the task array, so it is also a memory-locality stress).
//! - "1M-task pipeline": a windowed TensorCore loop as the program builder emits it, in program
//!   order: per iteration DMA-in through HBM, MXU, VPU, DMA-out through HBM; double buffering
//!   (a load waits for the MXU pass two iterations back); a barrier every 64 iterations.

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

fn build_pipeline(iterations: usize) -> Engine {
    let mut e = Engine::new();
    e.set_recording(false);
    let hbm = e.add_bandwidth("chip", "HBM", 819_000_000_000).unwrap();
    let mxu = e
        .add_unit("chip", "MXU", Clock::from_mhz(1500), QueuePolicy::Fifo)
        .unwrap();
    let vpu = e
        .add_unit("chip", "VPU", Clock::from_mhz(1500), QueuePolicy::Fifo)
        .unwrap();
    let mut mxus = Vec::with_capacity(iterations);
    let mut barrier = None;
    for k in 0..iterations {
        let load = e.add_task(Task::transfer(hbm, 65_536 + (k as u64 % 7) * 4096).cap(400_000_000_000));
        let mm = e.add_task(Task::occupy(mxu, 512 + (k as u64 * 7919) % 256));
        let vp = e.add_task(Task::occupy(vpu, 128 + (k as u64 * 104_729) % 128));
        let store = e.add_task(Task::transfer(hbm, 32_768));
        e.add_dep(load, mm).unwrap();
        e.add_dep(mm, vp).unwrap();
        e.add_dep(vp, store).unwrap();
        if k >= 2 {
            e.add_dep(mxus[k - 2], load).unwrap();
        }
        if let Some(b) = barrier {
            e.add_dep(b, load).unwrap();
        }
        mxus.push(mm);
        if k % 64 == 63 {
            let b = e.add_task(Task::wait());
            e.add_dep(store, b).unwrap();
            barrier = Some(b);
        }
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
    let pipeline = build_pipeline(n / 4);
    let events = pipeline.run().unwrap().events;
    g.throughput(Throughput::Elements(events));
    g.bench_function("1M-task pipeline, events", |b| {
        b.iter(|| pipeline.run().unwrap().makespan)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
