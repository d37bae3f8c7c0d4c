//! Functional mode: real f32 tables, real lookups with gains, a real (small) dense model and real
//! SGD updates, applied in the order the simulated schedule makes them visible: the lookup of step i
//! sees the table updates of every step whose SparseCore backward ended before step i's SparseCore
//! forward started. Sequential schedules see every earlier update; pipelined ones miss step i-1's.
//!
//! The task is a synthetic click-through problem with a planted model: each id has a hidden weight,
//! a sample is a click when the sigmoid of its ids' summed hidden weights beats a uniform draw.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim_core::buffer::TiledBuffer;
use sim_core::layout::{ArrayShape, Dim, Layout, PrimitiveType};

use crate::ids::batch_for_step;
use crate::spec::{QuantizationDef, Workload, WorkloadError};

/// Embedding dim of the functional model (small: the point is the schedule, not the model size).
pub const FUNCTIONAL_DIM: usize = 4;
/// Learning rate of embeddings and the dense layer.
pub const LEARNING_RATE: f32 = 0.05;
/// Largest vocabulary held for real (bigger tables are folded onto this many rows).
pub const MAX_ROWS: u64 = 1 << 16;

fn hidden(id: u64, table: usize, seed: u64) -> f32 {
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (table as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ seed;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    ((x % 2001) as f32 / 1000.0 - 1.0) * 0.8
}

/// A batch as the model sees it: per sample, per feature, the (folded) ids.
pub struct Sample {
    /// Per feature: row indices into its table.
    pub rows: Vec<Vec<usize>>,
    /// Click label.
    pub label: f32,
}

/// The samples of a step (one chip's batch, capped for speed), with planted labels.
pub fn samples(w: &Workload, step: u32, max_samples: usize) -> Vec<Sample> {
    let batch = batch_for_step(w, step).unwrap_or_default();
    let mut rng = ChaCha8Rng::seed_from_u64(w.seed ^ 0xC11C_u64 ^ step as u64);
    let n = (w.batch_per_chip() as usize).min(max_samples);
    (0..n)
        .map(|r| {
            let mut logit = 0.0f32;
            let rows: Vec<Vec<usize>> = w
                .features
                .iter()
                .enumerate()
                .map(|(fi, f)| {
                    let Some(ids) = batch.get(&f.name) else {
                        return Vec::new();
                    };
                    let t = w.tables.iter().position(|t| t.name == f.table).unwrap_or(0);
                    let vocab = w.tables[t].vocab.min(MAX_ROWS);
                    ids.values[ids.row_splits[r]..ids.row_splits[r + 1]]
                        .iter()
                        .map(|&id| {
                            logit += hidden(id as u64, fi, w.seed);
                            (id as u64 % vocab) as usize
                        })
                        .collect()
                })
                .collect();
            let p = 1.0 / (1.0 + (-logit).exp());
            Sample {
                rows,
                label: if rng.gen::<f32>() < p { 1.0 } else { 0.0 },
            }
        })
        .collect()
}

/// The model: one table per feature's table, held in HBM-style tiled buffers (rows padded to 8 f32,
/// the SparseCore's 32-byte granule), and a linear layer over the pooled embeddings.
#[derive(Clone, Debug)]
pub struct Model {
    /// Tables as stored: f32[rows, FUNCTIONAL_DIM]{1,0:T(1,8)} (padding cells are real storage).
    pub tables: Vec<TiledBuffer>,
    /// Dense weights [features x FUNCTIONAL_DIM] and bias.
    pub dense: Vec<f32>,
    /// Bias.
    pub bias: f32,
}

impl Model {
    /// Deterministic small initial values.
    pub fn new(w: &Workload) -> Model {
        let tables = w
            .tables
            .iter()
            .enumerate()
            .map(|(t, tab)| {
                let rows = tab.vocab.min(MAX_ROWS) as i64;
                let shape = ArrayShape {
                    element_type: PrimitiveType::F32,
                    dims: vec![Dim::Static(rows), Dim::Static(FUNCTIONAL_DIM as i64)],
                    layout: Some(Layout::new(vec![1, 0]).with_tile(&[1, 8])),
                };
                let mut buf = TiledBuffer::zeroed(shape).expect("a small f32 table");
                for r in 0..rows {
                    for d in 0..FUNCTIONAL_DIM as i64 {
                        let i = r as usize * FUNCTIONAL_DIM + d as usize;
                        let _ = buf.set_f32(&[r, d], ((i * 7 + t * 13) % 17) as f32 / 170.0 - 0.05);
                    }
                }
                buf
            })
            .collect();
        Model {
            tables,
            dense: vec![0.1; w.features.len() * FUNCTIONAL_DIM],
            bias: 0.0,
        }
    }
}

/// Table row updates of one step: (table, row, delta per dim).
pub type Update = Vec<(usize, usize, [f32; FUNCTIONAL_DIM])>;

/// Simulated quantization of a looked-up value: clipped to [low, high], rounded to the nearest of
/// `num_buckets` evenly spaced levels, dequantised.
pub fn quantize(x: f32, q: &QuantizationDef) -> f32 {
    let (lo, hi) = (q.quantization_config_low, q.quantization_config_high);
    let levels = (q.quantization_config_num_buckets.max(2) - 1) as f32;
    let step = (hi - lo) / levels;
    if x.is_nan() {
        return x;
    }
    let clipped = x.clamp(lo, hi);
    lo + ((clipped - lo) / step).round() * step
}

/// Where the first NaN of a step appeared.
fn nan_site(w: &Workload, what: &str, fi: usize, sample: usize, row: usize) -> String {
    let f = &w.features[fi];
    format!(
        "{what} of table {} row {row}, looked up by feature {} sample {sample}",
        f.table, f.name
    )
}

/// Forward and backward of one step on `model` (tables as visible now): returns the mean loss and the
/// table updates (the dense layer is updated in place, as the TensorCore does each step). With
/// `detect_nan`, the first NaN in a looked-up row, a pooled activation or a gradient stops the step
/// and says where it came from.
pub fn step(w: &Workload, model: &mut Model, batch: &[Sample]) -> Result<(f32, Update), String> {
    let f = w.features.len();
    let lr = w.functional_learning_rate.unwrap_or(LEARNING_RATE);
    let detect = w.xla_sc_detect_nan;
    let table_of: Vec<usize> = w
        .features
        .iter()
        .map(|x| w.tables.iter().position(|t| t.name == x.table).unwrap_or(0))
        .collect();
    let mut loss = 0.0f32;
    let mut grad_dense = vec![0.0f32; f * FUNCTIONAL_DIM];
    let mut grad_bias = 0.0f32;
    let mut updates: Update = Vec::new();
    let n = batch.len().max(1) as f32;
    for (si, s) in batch.iter().enumerate() {
        let mut pooled = vec![0.0f32; f * FUNCTIONAL_DIM];
        for (fi, rows) in s.rows.iter().enumerate() {
            for &r in rows {
                for d in 0..FUNCTIONAL_DIM {
                    let mut v = model.tables[table_of[fi]].get_f32(&[r as i64, d as i64]).unwrap_or(0.0);
                    if let Some(q) = &w.quantization {
                        v = quantize(v, q);
                    }
                    if detect && v.is_nan() {
                        return Err(nan_site(w, "embedding row", fi, si, r));
                    }
                    pooled[fi * FUNCTIONAL_DIM + d] += v;
                }
            }
            if detect
                && pooled[fi * FUNCTIONAL_DIM..(fi + 1) * FUNCTIONAL_DIM]
                    .iter()
                    .any(|x| x.is_nan())
            {
                return Err(nan_site(
                    w,
                    "pooled activation",
                    fi,
                    si,
                    rows.first().copied().unwrap_or(0),
                ));
            }
        }
        let logit: f32 = pooled.iter().zip(&model.dense).map(|(a, b)| a * b).sum::<f32>() + model.bias;
        let p = 1.0 / (1.0 + (-logit).exp());
        loss += -(s.label * p.max(1e-7).ln() + (1.0 - s.label) * (1.0 - p).max(1e-7).ln());
        let g = (p - s.label) / n;
        for (k, gd) in grad_dense.iter_mut().enumerate() {
            *gd += g * pooled[k];
        }
        grad_bias += g;
        for (fi, rows) in s.rows.iter().enumerate() {
            for &r in rows {
                let mut delta = [0.0f32; FUNCTIONAL_DIM];
                for (d, x) in delta.iter_mut().enumerate() {
                    *x = -lr * g * model.dense[fi * FUNCTIONAL_DIM + d];
                }
                if detect && delta.iter().any(|x| x.is_nan()) {
                    return Err(nan_site(w, "gradient", fi, si, r));
                }
                updates.push((table_of[fi], r, delta));
            }
        }
    }
    for (wd, gd) in model.dense.iter_mut().zip(&grad_dense) {
        *wd -= lr * gd;
    }
    model.bias -= lr * grad_bias;
    Ok((loss / n, updates))
}

/// Applies a step's table updates.
pub fn apply(model: &mut Model, u: &Update) {
    for (t, r, delta) in u {
        for (d, x) in delta.iter().enumerate() {
            let idx = [*r as i64, d as i64];
            let old = model.tables[*t].get_f32(&idx).unwrap_or(0.0);
            let _ = model.tables[*t].set_f32(&idx, old + x);
        }
    }
}

/// Samples per step used in functional mode.
pub const FUNCTIONAL_SAMPLES: usize = 512;

/// What functional training produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Training {
    /// Loss per step (up to the NaN, when one stopped the run).
    pub losses: Vec<f64>,
    /// With xla_sc_detect_nan: the step and place of the first NaN.
    pub nan: Option<String>,
}

/// Trains on the simulated schedule; returns the loss per step.
pub fn train(w: &Workload, step_times: &[(u64, u64)]) -> Result<Training, WorkloadError> {
    let mut model = Model::new(w);
    let mut pending: Vec<(u64, Update)> = Vec::new();
    let mut out = Training::default();
    for (i, &(fwd_start, _)) in step_times.iter().enumerate() {
        // Updates whose SparseCore backward ended before this lookup started are visible.
        pending.sort_by_key(|(end, _)| *end);
        let (visible, later): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(end, _)| *end <= fwd_start);
        for (_, u) in &visible {
            apply(&mut model, u);
        }
        pending = later;
        let batch = samples(w, i as u32, FUNCTIONAL_SAMPLES);
        match step(w, &mut model, &batch) {
            Ok((loss, u)) => {
                out.losses.push(loss as f64);
                pending.push((step_times[i].1, u));
            }
            Err(site) => {
                out.nan = Some(format!("xla_sc_detect_nan: NaN at step {i} in the {site}"));
                break;
            }
        }
    }
    Ok(out)
}
