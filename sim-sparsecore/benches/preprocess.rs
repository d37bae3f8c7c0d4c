//! Preprocessing throughput (ids per second) on the workload of
//! `tools/golden-preprocess/bench_side_by_side.py`, where jax-tpu-embedding runs the same input:
//! 65,536 samples x 32 Zipf(1.2) ids, vocabulary 10^6, 4 SparseCores on one device, limits that
//! never bind. "stats" is `tpusim preprocess --stats` / `limits estimate` work; "csr" also fills the
//! CSR buffers as jax-tpu-embedding returns them.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};
use sim_sparsecore::preprocess::{preprocess, preprocess_stats_npz, BatchIds, FeatureIds, Options, PreprocessSpec};

const ROWS: usize = 65_536;
const VALENCY: usize = 32;
const VOCAB: u64 = 1_000_000;

fn spec() -> PreprocessSpec {
    let limit = 1 << 20;
    PreprocessSpec::from_json(&format!(
        r#"{{"num_sc_per_device": 4, "local_device_count": 1, "global_device_count": 1, "allow_id_dropping": false,
            "tables": [{{"name": "t", "vocabulary_size": {VOCAB}, "embedding_dim": 8, "combiner": "sum",
                        "max_ids_per_partition": {limit}, "max_unique_ids_per_partition": {limit},
                        "suggested_coo_buffer_size_per_device": {}}}],
            "features": [{{"name": "f", "table": "t", "input_shape": [{ROWS}, {VALENCY}]}}]}}"#,
        ROWS * VALENCY + 4096
    ))
    .expect("a valid spec")
}

fn batch() -> BatchIds {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let zipf = Zipf::new(u64::MAX, 1.2).expect("a valid exponent");
    let values: Vec<i32> = (0..ROWS * VALENCY)
        .map(|_| ((zipf.sample(&mut rng) as u64 - 1) % VOCAB) as i32)
        .collect();
    let f = FeatureIds {
        values,
        row_splits: (0..=ROWS).map(|r| r * VALENCY).collect(),
        weights: None,
    };
    [("f".to_string(), f)].into_iter().collect()
}

/// The ids as `np.savez` writes them: one stored member `f.npy`, int32 [ROWS, VALENCY].
fn write_npz(path: &std::path::Path, values: &[i32]) {
    use std::io::Write;
    let mut h = format!("{{'descr': '<i4', 'fortran_order': False, 'shape': ({ROWS}, {VALENCY}), }}").into_bytes();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).expect("a temporary file"));
    let stored = zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
    z.start_file("f.npy", stored).expect("a member");
    z.write_all(b"\x93NUMPY\x01\x00").expect("written");
    z.write_all(&(h.len() as u16).to_le_bytes()).expect("written");
    z.write_all(&h).expect("written");
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    z.write_all(&bytes).expect("written");
    z.finish().expect("a zip");
}

fn bench(c: &mut Criterion) {
    let (spec, batch) = (spec(), batch());
    let mut g = c.benchmark_group("preprocess");
    g.sample_size(10);
    g.throughput(Throughput::Elements((ROWS * VALENCY) as u64));
    g.bench_function("2M Zipf ids, 4 SparseCores, stats", |b| {
        b.iter(|| preprocess(&spec, &batch, Options { stats_only: true }).expect("no limit binds"))
    });
    // `tpusim preprocess --stats`'s path: streamed from a stored (np.savez) NPZ file, read included.
    let path = std::env::temp_dir().join(format!("tpusim-bench-preprocess-{}.npz", std::process::id()));
    write_npz(&path, &batch["f"].values);
    g.bench_function("2M Zipf ids, 4 SparseCores, stats from npz", |b| {
        b.iter(|| {
            preprocess_stats_npz(&spec, &path)
                .expect("a streamable file")
                .expect("no limit binds")
        })
    });
    std::fs::remove_file(&path).ok();
    g.bench_function("2M Zipf ids, 4 SparseCores, csr", |b| {
        b.iter(|| preprocess(&spec, &batch, Options { stats_only: false }).expect("no limit binds"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
