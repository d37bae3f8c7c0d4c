//! Wall time of simulating dlrm-criteo (timing mode) and dlrm-small.

use criterion::{criterion_group, criterion_main, Criterion};
use workloads::{simulate, RunOptions, Workload};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("run");
    g.sample_size(10);
    let mut criteo = Workload::preset("dlrm-criteo").unwrap();
    criteo.steps = 1;
    g.bench_function("dlrm-criteo, 1 step", |b| {
        b.iter(|| simulate(&criteo, &RunOptions::default()).unwrap().summary.step_time_us)
    });
    let small = Workload::preset("dlrm-small").unwrap();
    g.bench_function("dlrm-small, 6 steps", |b| {
        b.iter(|| simulate(&small, &RunOptions::default()).unwrap().summary.step_time_us)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
