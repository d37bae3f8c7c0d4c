//! Throughput of parsing shapes, sizing them and mapping indices.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sim_core::layout::{parse_shape, Shape};

const SHAPES: &[&str] = &[
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
    "f32[3,5]{1,0:T(2,2)L(7)}",
    "s4[9216,6144]{1,0:T(64,128)(8,1)E(4)}",
    "(s32[32]{0:T(128)}, s32[512]{0:T(512)}, f32[512]{0:T(512)}, s32[]{:T(128)}, f32[100000,128]{1,0:T(8,128)})",
];

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("layout");
    g.throughput(Throughput::Elements(SHAPES.len() as u64));
    g.bench_function("parse+size", |b| {
        b.iter(|| {
            let mut total = 0u64;
            for s in SHAPES {
                total += parse_shape(s).unwrap().padded_bytes().unwrap();
            }
            total
        })
    });
    let Shape::Array(a) = parse_shape("bf16[64,1280,16384]{2,1,0:T(8,128)(2,1)}").unwrap() else {
        unreachable!()
    };
    let geom = a.geometry().unwrap();
    const N: u64 = 4096;
    g.throughput(Throughput::Elements(N));
    g.bench_function("linear_index", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for i in 0..N {
                acc ^= geom.linear_index_unchecked(&[i % 64, (i * 7) % 1280, (i * 131) % 16384]);
            }
            acc
        })
    });
    g.bench_function("logical_index", |b| {
        b.iter(|| {
            let mut acc = 0usize;
            for i in 0..N {
                acc += geom.logical_index(i * 997).map_or(0, |v| v.len());
            }
            acc
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
