//! The training-step program: per step a task graph on the engine (host preprocessing, PCIe, SparseCore
//! forward, ICI all-to-all, TensorCore forward and backward, all-to-all of gradients, SparseCore
//! backward), with the pipelining mode deciding the edges between steps. One representative chip is
//! simulated: all chips run the same program on their share of the batch; ICI time comes from the
//! all-to-all bytes and the chip's links.

use std::collections::BTreeMap;

use serde_json::json;
use sim_core::engine::{Engine, QueuePolicy, ResourceId, Task, TaskId};
use sim_core::recorder::{ArgValue, Recorder, Span};
use sim_core::summary::{BusyFraction, RunSummary, StackVerdict};
use sim_core::time::{Clock, SimTime};
use sim_sparsecore::limits::hbm::{backward_stack_bytes, forward_stack_bytes};
use sim_sparsecore::limits::{compile_check, CompileCase, ProgramKind, ScCompileParams};
use sim_sparsecore::model::{
    padded_row_bytes, ScParams, ScWork, ASSUMED_CYCLES_PER_ID, CALIBRATED_TILE_DMA_BYTES_PER_CYCLE,
};
use sim_tpu::chips::{Chip, ChipSpec};
use sim_tpu::tensorcore::{cost, ChipModel, OpSpec};

use crate::ids::{batch_for_step, preprocess_spec};
use crate::spec::{Interaction, Pipelining, Workload, WorkloadError};

/// Sequencer cycles to start one SparseCore pass (one minibatch of one stack); assumed.
pub const ASSUMED_PASS_LAUNCH_CYCLES: u64 = 2_000;
/// Fixed latency of one all-to-all collective over ICI (synchronisation and the first hops before
/// data streams), ps; assumed. Every stack exchanges its own activations and gradients, so stacking
/// tables into fewer stacks pays it fewer times.
pub const ASSUMED_ICI_COLLECTIVE_LATENCY_PS: u64 = 2_000_000;
/// Host time to check one id against its table's vocabulary, ps per thread (a compare and branch in
/// the preprocessing loop plus the table lookup of the bound); assumed.
pub const ASSUMED_ID_BOUND_CHECK_PS_PER_ID: u64 = 1_500;
/// Bytes per second one host thread fills with initial values (a random-number initializer); assumed.
pub const ASSUMED_HOST_INIT_BYTES_PER_S_PER_THREAD: u64 = 1_000_000_000;
/// Cycles a barrier between serialised table groups costs (drain the tiles' DMA pipelines, sync the
/// SparseCores); assumed.
pub const ASSUMED_SERIAL_BARRIER_CYCLES: u64 = 10_000;

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Also train a small model on the schedule (real tables and updates).
    pub functional: bool,
    /// Record spans (for traces, reports, the Gantt chart).
    pub record: bool,
    /// Chip preset field overrides (a chip file's JSON).
    pub chip_overrides: Option<serde_json::Value>,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunResult {
    /// The JSON summary.
    pub summary: RunSummary,
    /// Spans, flows and counters.
    pub recorder: Recorder,
    /// One sentence naming the bottleneck and what to change.
    pub bottleneck: String,
    /// Chip constants used: field, value, source.
    pub chip_constants: Vec<(String, String, String)>,
    /// Padding per buffer: name, padded bytes, unpadded bytes.
    pub padding_per_buffer: Vec<(String, u64, u64)>,
    /// Per step: (SC forward start, SC backward end) in ps.
    pub step_times: Vec<(u64, u64)>,
    /// The SparseCore guide's knobs: name, setting, effect in this run.
    pub knobs: Vec<(String, String, String)>,
    /// Advice the run gives (stacking outside 5-100 tables, ids out of range, out of memory).
    pub warnings: Vec<String>,
    /// Peak HBM per chip by kind: what, bytes.
    pub memory_breakdown: Vec<(String, u64)>,
    /// Start-up time: table initialisation (host + PCIe, or on device), ps.
    pub startup_ps: u64,
    /// Which SparseCore partition is the straggler, and why.
    pub straggler: String,
    /// Functional mode with xla_sc_detect_nan: where the first NaN appeared.
    pub nan: Option<String>,
}

/// One dense op and its cost, per chip.
struct DenseOp {
    name: String,
    cycles: u64,
    hbm_bytes: u64,
    hbm_unpadded: u64,
    vmem_bytes: u64,
    /// The model's kernel stages (sequencer, DMA, MXU, VPU), cycles scaled like `cycles`.
    phases: Vec<sim_tpu::tensorcore::Phase>,
}

fn dense_ops(w: &Workload, model: &ChipModel, tc_share: u64) -> Result<(Vec<DenseOp>, Vec<DenseOp>), WorkloadError> {
    let b = w.batch_per_chip();
    let dims: u64 = w.tables.iter().map(|t| t.dim).max().unwrap_or(1);
    let f = w.features.len() as u64 + 1;
    let op = |name: String, v: serde_json::Value| -> Result<DenseOp, WorkloadError> {
        let spec = OpSpec::from_value(&v).map_err(|e| WorkloadError::Run(format!("{name}: {e}")))?;
        let c = cost(&spec, model).map_err(|e| WorkloadError::Run(format!("{name}: {e}")))?;
        // The chip's TensorCores share the batch (megacore pairs are one compiler device already).
        Ok(DenseOp {
            name,
            cycles: c.cycles.div_ceil(tc_share),
            hbm_bytes: c.hbm_bytes / tc_share,
            hbm_unpadded: c.hbm_bytes_unpadded / tc_share,
            vmem_bytes: c.vmem_bytes,
            phases: c
                .phases()
                .into_iter()
                .map(|mut p| {
                    p.start_cycle /= tc_share;
                    p.cycles = p.cycles.div_ceil(tc_share);
                    p.busy_cycles = p.busy_cycles.div_ceil(tc_share);
                    p.bytes /= tc_share;
                    p
                })
                .collect(),
        })
    };
    let mlp = |prefix: &str,
               din: u64,
               widths: &[u64],
               fwd: &mut Vec<DenseOp>,
               bwd: &mut Vec<DenseOp>|
     -> Result<u64, WorkloadError> {
        let mut d = din;
        for (i, &out) in widths.iter().enumerate() {
            fwd.push(op(
                format!("{prefix}{i} fwd"),
                json!({"op": "mlp_layer", "params": {"B": b, "Din": d, "Dout": out, "dtype": "bfloat16"}}),
            )?);
            bwd.push(op(
                format!("{prefix}{i} dX"),
                json!({"op": "matmul", "params": {"M": b, "K": out, "N": d, "dtype": "bfloat16"}}),
            )?);
            bwd.push(op(
                format!("{prefix}{i} dW"),
                json!({"op": "matmul", "params": {"M": d, "K": b, "N": out, "dtype": "bfloat16"}}),
            )?);
            d = out;
        }
        Ok(d)
    };
    let (mut fwd, mut bwd) = (Vec::new(), Vec::new());
    let bottom_out = mlp(
        "bottom",
        w.dense.dense_features.max(1),
        &w.dense.bottom,
        &mut fwd,
        &mut bwd,
    )?;
    let top_in = match w.dense.interaction {
        Interaction::Dot => {
            fwd.push(op(
                "interaction fwd".into(),
                json!({"op": "batched_matmul", "params": {"B": b, "M": f, "K": dims, "N": f, "dtype": "bfloat16"}}),
            )?);
            bwd.push(op(
                "interaction bwd".into(),
                json!({"op": "batched_matmul", "params": {"B": b, "M": f, "K": f, "N": dims, "dtype": "bfloat16"}}),
            )?);
            f * (f - 1) / 2 + bottom_out
        }
        Interaction::Dcnv2(layers) => {
            let width = f * dims;
            for l in 0..layers {
                fwd.push(op(
                    format!("cross{l} fwd"),
                    json!({"op": "mlp_layer", "params": {"B": b, "Din": width, "Dout": width, "dtype": "bfloat16"}}),
                )?);
                bwd.push(op(
                    format!("cross{l} dX"),
                    json!({"op": "matmul", "params": {"M": b, "K": width, "N": width, "dtype": "bfloat16"}}),
                )?);
                bwd.push(op(
                    format!("cross{l} dW"),
                    json!({"op": "matmul", "params": {"M": width, "K": b, "N": width, "dtype": "bfloat16"}}),
                )?);
            }
            width
        }
    };
    mlp("top", top_in, &w.dense.top, &mut fwd, &mut bwd)?;
    bwd.reverse();
    Ok((fwd, bwd))
}

/// Per step and SparseCore: forward/backward work of every stack, minibatches and dropped ids.
struct StepWork {
    /// [stack] -> per SC work.
    per_stack: Vec<Vec<ScWork>>,
    /// [stack] -> SparseCore passes.
    minibatches: Vec<u32>,
    dropped: u64,
    ids: u64,
}

/// Runtime verdicts from worst to best.
fn severity(runtime: &str) -> u8 {
    match runtime {
        "would_abort" => 3,
        "drops_ids" => 2,
        "minibatching" => 1,
        _ => 0,
    }
}

/// The SparseCore model parameters of a chip preset (calibrated and assumed constants included).
pub fn sc_params(chip: &ChipSpec) -> ScParams {
    ScParams {
        sparsecores: chip.sparsecores_per_chip,
        tiles: chip.sc_tiles_per_sc,
        lanes_f32: chip.sc_simd_lanes_f32,
        lanes_bf16: chip.sc_simd_lanes_bf16,
        clock_hz: chip.sc_clock_mhz * 1_000_000,
        dma_granule_bytes: chip.sc_dma_granule_bytes,
        tile_dma_bytes_per_cycle: CALIBRATED_TILE_DMA_BYTES_PER_CYCLE,
        cycles_per_id: ASSUMED_CYCLES_PER_ID,
        hbm_share: chip.sc_hbm_share,
    }
}

/// Simulates the workload's steps and summarises them.
pub fn simulate(w: &Workload, opts: &RunOptions) -> Result<RunResult, WorkloadError> {
    w.validate()?;
    let mut chip_full = Chip::preset(&w.chip).map_err(|e| WorkloadError::Spec(e.to_string()))?;
    if let Some(o) = &opts.chip_overrides {
        chip_full = chip_full
            .with_overrides(o)
            .map_err(|e| WorkloadError::Spec(e.to_string()))?;
    }
    let chip = chip_full.spec.clone();
    if chip.sparsecores_per_chip == 0 {
        return Err(WorkloadError::Spec(format!(
            "{} has no SparseCores: embedding lookups need v4, v5p, v6e or tpu7x",
            chip.name
        )));
    }
    let model = ChipModel::for_chip(&chip_full).map_err(|e| WorkloadError::Spec(e.to_string()))?;
    let sc = sc_params(&chip);
    let sc_per_device = chip.sc_per_device();
    // The chip's SparseCores all work for it: a device may be half a chip (tpu7x).
    let devices_per_chip = (chip.sparsecores_per_chip / sc_per_device.max(1)).max(1);
    let mut pspec = preprocess_spec(w, sc_per_device);
    pspec.global_device_count = w.chips * devices_per_chip;
    if let Some(path) = &w.limits.file {
        let limits = if path.is_dir() {
            sim_sparsecore::limits::files::limits_from_fdo(
                &sim_sparsecore::limits::files::load_fdo_dir(path).map_err(|e| WorkloadError::Spec(e.to_string()))?,
                sc_per_device as u64,
            )
        } else {
            sim_sparsecore::limits::LimitsFile::read(path)
                .map_err(|e| WorkloadError::Spec(e.to_string()))?
                .stacks
        };
        pspec = sim_sparsecore::limits::estimate::apply_limits(&pspec, &limits);
    }
    if !(pspec.num_scs()).is_power_of_two() {
        return Err(WorkloadError::Spec("chips x SparseCores must be a power of two".into()));
    }
    let tc_share = (chip.tensorcores_per_chip / chip.model_device_tensorcores.max(1)).max(1) as u64;
    let (fwd_ops, bwd_ops) = dense_ops(w, &model, tc_share)?;

    crate::ids::apply_table_limits(&mut pspec, w);
    let stack_defs: Vec<sim_sparsecore::preprocess::Stack> = sim_sparsecore::preprocess::build_stacks(&pspec)
        .into_iter()
        .filter(|s| !s.features.is_empty())
        .collect();

    // Preprocess every step's ids (the real algorithm) for the work per SparseCore.
    // Per stack: (runtime, observed max ids, observed max unique, message, padded ids per chip).
    let mut verdicts: BTreeMap<String, (String, u64, u64, String, u64)> = BTreeMap::new();
    let mut steps_work = Vec::new();
    let samples_per_sc = w.batch_per_chip() / chip.sparsecores_per_chip.max(1) as u64;
    let mut straggler = (0u32, 0.0f64, 0u32);
    // At the worst step: the busiest partition's excess ids and the hottest id (table, id, samples).
    let mut straggler_cause: (f64, Option<(String, i32, u64)>) = (0.0, None);
    let mut out_of_range = Vec::new();
    let mut out_of_range_count = 0u64;
    let mut table_ids_max: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for step in 0..w.steps {
        let batch = batch_for_step(w, step)?;
        let mut sw = crate::stepwork::step_work(w, &pspec, &batch)?;
        // Stacks in build order (the order of `stack_defs`).
        sw.stacks
            .sort_by_key(|(n, _)| stack_defs.iter().position(|d| &d.name == n).unwrap_or(usize::MAX));
        let cw = crate::stepwork::chip_work(&sw, w.chips, chip.sparsecores_per_chip, samples_per_sc);
        if cw.straggler.1 > straggler.1 {
            straggler = (cw.straggler.0, cw.straggler.1, cw.chip);
            // The hottest id explains a straggler; it costs a pass over the batch, so only then.
            let hottest = if cw.straggler.1 > 1.25 {
                crate::stepwork::hottest_id(w, &batch)
            } else {
                None
            };
            straggler_cause = (cw.excess_ids, hottest);
        }
        for (t, &(i, u)) in &sw.table_ids_per_sc {
            let e = table_ids_max.entry(t.clone()).or_default();
            *e = (e.0.max(i), e.1.max(u));
        }
        out_of_range_count += sw.out_of_range_count;
        for o in sw.out_of_range.drain(..) {
            if out_of_range.len() < 8 {
                out_of_range.push((step, o));
            }
        }
        for (name, st) in &sw.stacks {
            let v = verdicts.entry(name.clone()).or_default();
            v.1 = v.1.max(st.observed_max_ids);
            v.2 = v.2.max(st.observed_max_unique);
            v.4 = v.4.max(st.padded_ids_per_chip);
            if v.0.is_empty() || severity(&st.runtime) > severity(&v.0) {
                v.0 = st.runtime.clone();
                v.3 = st.message.clone();
            }
        }
        steps_work.push(StepWork {
            per_stack: cw.per_stack,
            minibatches: sw.stacks.iter().map(|(_, s)| s.minibatches.max(1)).collect(),
            dropped: sw.stacks.iter().map(|(_, s)| s.dropped).sum(),
            ids: sw.ids,
        });
    }
    let stacks: Vec<(String, u64, u64, sim_sparsecore::model::Optimizer)> = stack_defs
        .iter()
        .map(|s| {
            let t = w
                .tables
                .iter()
                .find(|t| t.name == s.tables[0].name)
                .expect("stack of known tables");
            (s.name.clone(), s.stack_embedding_dim, t.dtype.bytes(), t.optimizer)
        })
        .collect();
    // Serialised stacks: each group of N is its own SparseCore pass with a barrier.
    let serial = w.xla_sc_num_serialized_tables_to_optimize_hbm as usize;
    let groups = if serial == 0 { 1 } else { stacks.len().div_ceil(serial) } as u64;

    // Resources of the representative chip.
    let mut e = Engine::new();
    // Spans are needed for the summary (busy and overlap fractions) even without a trace.
    let _ = opts.record;
    e.set_recording(true);
    let err = |x: sim_core::engine::EngineError| WorkloadError::Run(x.to_string());
    let host = e
        .add_unit("host", "preprocess", Clock::from_mhz(1000), QueuePolicy::Fifo)
        .map_err(err)?;
    let pcie = e
        .add_bandwidth("host", "PCIe", chip.host_link_bytes_per_s)
        .map_err(err)?;
    let tc = e
        .add_unit(
            "chip 0",
            "TC",
            Clock {
                hz: model.clock_hz as u64,
            },
            QueuePolicy::Fifo,
        )
        .map_err(err)?;
    let scs: Vec<ResourceId> = (0..chip.sparsecores_per_chip)
        .map(|s| {
            e.add_unit(
                "chip 0",
                &format!("SC {s}"),
                Clock { hz: sc.clock_hz },
                QueuePolicy::Fifo,
            )
        })
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let hbm = e.add_bandwidth("chip 0", "HBM", chip.hbm_bytes_per_s).map_err(err)?;
    let ici = e
        .add_bandwidth(
            "chip 0",
            "ICI",
            (chip.ici_links as u64 * chip.ici_bytes_per_s_per_link).max(1),
        )
        .map_err(err)?;
    let sc_dma_cap = ((sc.tile_dma_bytes_per_cycle * sc.tiles as f64 * sc.clock_hz as f64) as u64)
        .min((chip.hbm_bytes_per_s as f64 * sc.hbm_share) as u64)
        .max(1);
    let tc_hbm_cap = (chip.model_hbm_bytes_per_s * tc_share).max(1);
    let b = w.batch_per_chip();
    let emb_width: u64 = w
        .features
        .iter()
        .map(|f| w.tables.iter().find(|t| t.name == f.table).map_or(0, |t| t.dim))
        .sum();
    let a2a_bytes = if w.chips > 1 {
        b * emb_width * 4 * (w.chips as u64 - 1) / w.chips as u64
    } else {
        0
    };

    // Each stack's share of the all-to-all bytes (its features' widths).
    let stack_width: Vec<u64> = stack_defs
        .iter()
        .map(|sd| {
            w.features
                .iter()
                .filter(|f| sd.tables.iter().any(|t| t.name == f.table))
                .map(|f| w.tables.iter().find(|t| t.name == f.table).map_or(0, |t| t.dim))
                .sum()
        })
        .collect();
    // One all-to-all per stack, one after another on the links, each paying the collective latency.
    let all_to_all = |e: &mut Engine, after: TaskId, what: &str, i: usize| -> Result<TaskId, WorkloadError> {
        let mut prev = after;
        if w.chips <= 1 {
            let x = e.add_task(
                Task::transfer(ici, 0)
                    .name(format!("all-to-all {what} step {i}"))
                    .category("ici")
                    .arg("step", i as i64),
            );
            e.add_dep(prev, x).map_err(err)?;
            return Ok(x);
        }
        for (k, sd) in stack_defs.iter().enumerate() {
            let lat = e.add_task(Task::delay(SimTime(ASSUMED_ICI_COLLECTIVE_LATENCY_PS)));
            let bytes = a2a_bytes * stack_width[k] / emb_width.max(1);
            let x = e.add_task(
                Task::transfer(ici, bytes)
                    .name(format!("all-to-all {what} {} step {i}", sd.name))
                    .category("ici")
                    .arg("step", i as i64),
            );
            e.add_dep(prev, lat).map_err(err)?;
            e.add_dep(lat, x).map_err(err)?;
            prev = x;
        }
        Ok(prev)
    };
    let mut sc_fwd_done: Vec<TaskId> = Vec::new();
    let mut sc_bwd_done: Vec<TaskId> = Vec::new();
    let mut sc_fwd_start: Vec<TaskId> = Vec::new();
    let mut tc_bwd_done: Vec<TaskId> = Vec::new();
    let (mut hbm_bytes_step, mut hbm_pad_step) = (0u64, 0u64);
    let mut dropped_total = 0;
    let mut minibatches_max = 1;
    let (mut id_check_ps_step, mut nan_cycles_step, mut quant_cycles_step) = (0u64, 0u64, 0u64);
    for (i, sw) in steps_work.iter().enumerate() {
        let step = i as i64;
        minibatches_max = minibatches_max.max(sw.minibatches.iter().copied().max().unwrap_or(1));
        dropped_total += sw.dropped;
        let mut host_ns = (sw.ids as f64 / (w.host.threads as f64 * w.host.ids_per_s_per_thread) * 1e9) as u64;
        if w.xla_sparse_core_enable_id_bound_check {
            let check = sw.ids * ASSUMED_ID_BOUND_CHECK_PS_PER_ID / 1000 / w.host.threads as u64;
            host_ns += check;
            if i == 0 {
                id_check_ps_step = check * 1000;
            }
        }
        let h = e.add_task(
            Task::occupy(host, host_ns.max(1))
                .name(format!("preprocess step {i}"))
                .category("host")
                .arg("step", step)
                .arg("ids", sw.ids as i64),
        );
        if i >= w.host.prefetch.max(1) as usize {
            e.add_dep(sc_fwd_start[i - w.host.prefetch.max(1) as usize], h)
                .map_err(err)?;
        } else if i > 0 {
            // The host works on one batch at a time.
        }
        let p = e.add_task(
            Task::transfer(pcie, sw.ids * 12)
                .name(format!("host->device step {i}"))
                .category("pcie")
                .arg("step", step),
        );
        e.add_dep(h, p).map_err(err)?;
        // SparseCore forward: every SparseCore, all stacks and minibatches.
        let f_start = e.add_task(Task::wait().name(format!("SC fwd start {i}")));
        e.add_dep(p, f_start).map_err(err)?;
        let gate = match w.pipelining {
            Pipelining::Sequential => i.checked_sub(1),
            Pipelining::Pipelined => i.checked_sub(2),
        };
        if let Some(g) = gate {
            e.add_dep(sc_bwd_done[g], f_start).map_err(err)?;
        }
        let f_done = e.add_task(Task::wait().name(format!("SC fwd done {i}")));
        let b_start = e.add_task(Task::wait().name(format!("SC bwd start {i}")));
        let b_done = e.add_task(Task::wait().name(format!("SC bwd done {i}")));
        for (s, &unit) in scs.iter().enumerate() {
            let (mut fc, mut fb, mut fp, mut bc, mut bb, mut bp) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
            for (k, st) in stacks.iter().enumerate() {
                let work = sw.per_stack.get(k).and_then(|v| v.get(s)).copied().unwrap_or_default();
                let f = sc.forward(work, st.1, st.2);
                let bk = sc.backward(work, st.1, st.2, st.3);
                let passes = sw.minibatches.get(k).copied().unwrap_or(1) as u64;
                // Vector passes over the gathered rows: NaN checks (forward and backward) and
                // quantise + dequantise (forward).
                let lanes = if st.2 == 2 { sc.lanes_bf16 } else { sc.lanes_f32 }.max(1) as u64;
                let row_pass = work.ids * st.1.div_ceil(lanes) / sc.tiles.max(1) as u64;
                let nan = if w.xla_sc_detect_nan { row_pass } else { 0 };
                let quant = if w.quantization.is_some() { 2 * row_pass } else { 0 };
                if i == 0 && s == 0 {
                    nan_cycles_step += 2 * nan;
                    quant_cycles_step += quant;
                }
                fc += f.compute_cycles + ASSUMED_PASS_LAUNCH_CYCLES * passes + nan + quant;
                fb += f.hbm_bytes;
                fp += f.hbm_padding_bytes;
                bc += bk.compute_cycles + ASSUMED_PASS_LAUNCH_CYCLES * passes + nan;
                bb += bk.hbm_bytes;
                bp += bk.hbm_padding_bytes;
            }
            fc += ASSUMED_SERIAL_BARRIER_CYCLES * (groups - 1);
            bc += ASSUMED_SERIAL_BARRIER_CYCLES * (groups - 1);
            if i == 0 {
                hbm_bytes_step += fb + bb;
                hbm_pad_step += fp + bp;
            }
            let name = |d: &str| format!("SC{s} {d} step {i}");
            let fx = e.add_task(
                Task::occupy(unit, fc)
                    .name(name("fwd"))
                    .category("sc_fwd")
                    .arg("step", step)
                    .arg("hbm_bytes", fb as i64)
                    .arg("padding_bytes", fp as i64),
            );
            let fm = e.add_task(
                Task::transfer(hbm, fb)
                    .cap(sc_dma_cap)
                    .name(name("gather"))
                    .category("sc_fwd")
                    .arg("step", step),
            );
            let bx = e.add_task(
                Task::occupy(unit, bc)
                    .name(name("bwd"))
                    .category("sc_bwd")
                    .arg("step", step)
                    .arg("hbm_bytes", bb as i64)
                    .arg("padding_bytes", bp as i64),
            );
            let bm = e.add_task(
                Task::transfer(hbm, bb)
                    .cap(sc_dma_cap)
                    .name(name("update"))
                    .category("sc_bwd")
                    .arg("step", step),
            );
            for t in [fx, fm] {
                e.add_dep(f_start, t).map_err(err)?;
                e.add_dep(t, f_done).map_err(err)?;
            }
            for t in [bx, bm] {
                e.add_dep(b_start, t).map_err(err)?;
                e.add_dep(t, b_done).map_err(err)?;
            }
        }
        let a2a_f = all_to_all(&mut e, f_done, "activations", i)?;
        // TensorCore forward and backward, op after op.
        let mut prev = a2a_f;
        if let Some(&t) = tc_bwd_done.last() {
            let join = e.add_task(Task::wait());
            e.add_dep(t, join).map_err(err)?;
            e.add_dep(a2a_f, join).map_err(err)?;
            prev = join;
        }
        for (ops, cat) in [(&fwd_ops, "tc_fwd"), (&bwd_ops, "tc_bwd")] {
            for o in ops.iter() {
                let c = e.add_task(
                    Task::occupy(tc, o.cycles.max(1))
                        .name(format!("{} step {i}", o.name))
                        .category(cat)
                        .arg("step", step)
                        .arg("hbm_bytes", o.hbm_bytes as i64),
                );
                let m = e.add_task(
                    Task::transfer(hbm, o.hbm_bytes)
                        .cap(tc_hbm_cap)
                        .name(format!("{} HBM step {i}", o.name))
                        .category(cat)
                        .arg("step", step),
                );
                let j = e.add_task(Task::wait());
                for t in [c, m] {
                    e.add_dep(prev, t).map_err(err)?;
                    e.add_dep(t, j).map_err(err)?;
                }
                prev = j;
                if i == 0 {
                    hbm_bytes_step += o.hbm_bytes;
                    hbm_pad_step += o.hbm_bytes - o.hbm_unpadded.min(o.hbm_bytes);
                }
            }
        }
        tc_bwd_done.push(prev);
        let a2a_b = all_to_all(&mut e, prev, "gradients", i)?;
        e.add_dep(a2a_b, b_start).map_err(err)?;
        e.add_dep(f_done, b_start).map_err(err)?;
        sc_fwd_start.push(f_start);
        sc_fwd_done.push(f_done);
        sc_bwd_done.push(b_done);
    }
    let res = e.run().map_err(err)?;
    let step_times: Vec<(u64, u64)> = (0..w.steps as usize)
        .map(|i| {
            (
                res.start(sc_fwd_start[i]).unwrap_or_default().0,
                res.end(sc_bwd_done[i]).unwrap_or_default().0,
            )
        })
        .collect();
    let mut recorder = res.recorder;
    add_tc_phase_spans(&mut recorder, &fwd_ops, &bwd_ops, model.clock_hz as u64);
    add_staleness_flows(&mut recorder, w);

    // Steady state: after warm-up steps.
    let n = w.steps as usize;
    let warm = if n > 2 { 2 } else { n - 1 };
    let (t0, t1) = if warm == 0 {
        (0, step_times[n - 1].1)
    } else {
        (step_times[warm - 1].1, step_times[n - 1].1)
    };
    let step_ps = (t1 - t0) / (n - warm).max(1) as u64;
    let window = (t0, t1.max(t0 + 1));
    let busy =
        |pred: &dyn Fn(&Span) -> bool| union_in(&recorder.spans, pred, window) as f64 / (window.1 - window.0) as f64;
    let sc_tracks: Vec<String> = (0..chip.sparsecores_per_chip).map(|s| format!("SC {s}")).collect();
    let sc_each: Vec<f64> = sc_tracks
        .iter()
        .map(|t| busy(&|s: &Span| &s.track.thread == t && s.category.starts_with("sc")))
        .collect();
    let sc_busy = sc_each.iter().sum::<f64>() / sc_tracks.len() as f64;
    // The SparseCore stage ends with its slowest SparseCore: that one is the SparseCore's bottleneck.
    let sc_peak = (0..sc_each.len()).fold(0, |b, i| if sc_each[i] > sc_each[b] { i } else { b });
    let tc_busy = busy(&|s: &Span| s.track.thread == "TC");
    let both = intersect_in(
        &recorder.spans,
        &|s: &Span| s.track.thread == "TC",
        &|s: &Span| s.track.thread.starts_with("SC "),
        window,
    );
    let busy_fraction = BusyFraction {
        tc: tc_busy,
        sc: sc_busy,
        hbm: utilisation(&recorder.spans, "HBM", chip.hbm_bytes_per_s, window),
        ici: utilisation(
            &recorder.spans,
            "ICI",
            (chip.ici_links as u64 * chip.ici_bytes_per_s_per_link).max(1),
            window,
        ),
        host: busy(&|s: &Span| s.track.process == "host"),
    };

    // Memory per chip.
    let mut peak = BTreeMap::new();
    let mut capacity = BTreeMap::new();
    let mut padding_per_buffer = Vec::new();
    let mut hbm_tables = 0u64;
    let mut fits_compile = true;
    let params = ScCompileParams {
        num_sc_per_device: sc_per_device as u64,
        tilespmem_bytes: chip.sc_tilespmem_bytes_available,
        spmem_fixed_overhead_bytes: chip.sc_spmem_fixed_overhead_bytes,
    };
    let mut limits = Vec::new();
    let mut tilespmem_peak = 0u64;
    let mut sc_stack_bytes: Vec<(u64, u64)> = Vec::new();
    let mut warnings = Vec::new();
    let mut chip_buffer_fill = 0.0f64;
    for (sd, (name, dim, elem, opt)) in stack_defs.iter().zip(&stacks) {
        for tis in &sd.tables {
            let t = w
                .tables
                .iter()
                .find(|t| t.name == tis.name)
                .expect("stack of known tables");
            let row = padded_row_bytes(*dim, *elem, chip.sc_dma_granule_bytes);
            let rows_per_chip = tis.padded_vocab / w.chips as u64;
            let bytes = rows_per_chip * row * (1 + opt.slots());
            hbm_tables += bytes;
            padding_per_buffer.push((
                format!("table {} in stack {name} (+{} slots)", t.name, opt.slots()),
                bytes,
                t.vocab / w.chips as u64 * t.dim * elem * (1 + opt.slots()),
            ));
        }
        let max_ids = sd.max_ids_per_partition as u64;
        let max_unique = sd.max_unique_ids_per_partition as u64;
        // Each device holds its shard of the stack.
        let shard_vocab = sd.stack_vocab_size.div_ceil(pspec.global_device_count as u64);
        let case = |kind| CompileCase {
            kind,
            vocab: shard_vocab,
            dim: *dim,
            batch: b / devices_per_chip as u64,
            max_ids,
            max_unique,
        };
        let vf = compile_check(&case(ProgramKind::Fwd), &params);
        let vb = compile_check(&case(ProgramKind::GradSgd), &params);
        tilespmem_peak = tilespmem_peak
            .max(vf.tilespmem_bytes_needed)
            .max(vb.tilespmem_bytes_needed);
        fits_compile &= vf.compiles && vb.compiles;
        sc_stack_bytes.push((
            forward_stack_bytes(*dim, max_unique, 1),
            backward_stack_bytes(*dim, max_unique, 1),
        ));
        let (mut runtime, obs_ids, obs_unique, mut message, padded_ids) =
            verdicts.get(name).cloned().unwrap_or_default();
        // The static CSR buffer of the stack on a chip: max_ids_per_chip_per_sample x its samples
        // (stacked features are concatenated along the samples).
        let rows = b * sd.features.len() as u64;
        let chip_buffer = w.limits.max_ids_per_chip_per_sample as u64 * rows;
        chip_buffer_fill = chip_buffer_fill.max(padded_ids as f64 / chip_buffer.max(1) as f64);
        if padded_ids > chip_buffer {
            runtime = "would_abort".into();
            message = format!(
                "stack {name}: Got {padded_ids} ids after padding but the max_ids_per_chip is set to be {chip_buffer} which is smaller (max_ids_per_chip_per_sample {} x {rows} samples); raise max_ids_per_chip_per_sample to at least {}",
                w.limits.max_ids_per_chip_per_sample,
                padded_ids.div_ceil(rows.max(1))
            );
        }
        let compiles = vf.compiles && vb.compiles;
        limits.push(StackVerdict {
            stack: name.clone(),
            compiles,
            runtime: if !compiles {
                "does_not_compile".into()
            } else {
                runtime.clone()
            },
            message: if !vf.compiles {
                vf.message.clone()
            } else if !vb.compiles {
                vb.message.clone()
            } else if !message.is_empty() && runtime != "ok" {
                message
            } else {
                vf.message.clone()
            },
            max_ids_per_partition: max_ids,
            max_unique_ids_per_partition: max_unique,
            observed_max_ids: obs_ids,
            observed_max_unique_ids: obs_unique,
        });
    }
    // The guide's sweet spot for stacking.
    let off: Vec<String> = stack_defs
        .iter()
        .filter(|s| !(5..=100).contains(&s.tables.len()))
        .map(|s| {
            format!(
                "{} ({} table{})",
                s.name,
                s.tables.len(),
                if s.tables.len() == 1 { "" } else { "s" }
            )
        })
        .collect();
    if !off.is_empty() && w.tables.len() >= 5 {
        warnings.push(format!(
            "{} of {} stacks hold fewer than 5 or more than 100 tables, outside the 5-100 the SparseCore guide recommends{}: {}",
            off.len(),
            stack_defs.len(),
            if w.disable_table_stacking { " (disable_table_stacking = true)" } else { "" },
            off.join(", ")
        ));
    }
    // SparseCore HBM stack: all stacks live at once, or one serial group at a time; the forward and
    // backward programs do not overlap, so the larger of the two is the peak.
    let group_peak = |c: &[(u64, u64)]| {
        c.iter()
            .map(|x| x.0)
            .sum::<u64>()
            .max(c.iter().map(|x| x.1).sum::<u64>())
    };
    let sc_stack_peak = if serial == 0 {
        group_peak(&sc_stack_bytes)
    } else {
        sc_stack_bytes.chunks(serial).map(group_peak).max().unwrap_or(0)
    };
    let table_bytes = hbm_tables;
    hbm_tables += sc_stack_peak;
    let dense_params: u64 = fwd_ops.iter().map(|o| o.hbm_unpadded).sum::<u64>();
    let activations = b * (emb_width + w.dense.bottom.iter().sum::<u64>() + w.dense.top.iter().sum::<u64>()) * 4 * 2;
    // Heap: dense weights with their optimizer state, and the prefetched inputs of every batch in
    // flight (COO entries of 12 bytes, dense features, labels).
    let input_bytes = steps_work.iter().map(|s| s.ids).max().unwrap_or(0) * 12 + b * (w.dense.dense_features + 1) * 4;
    let prefetched = input_bytes * w.host.prefetch.max(1) as u64;
    let heap = dense_params * 3 + prefetched;
    peak.insert("hbm".to_string(), hbm_tables + heap + activations);
    let memory_breakdown = vec![
        ("embedding tables and optimizer slots".to_string(), table_bytes),
        (
            format!(
                "SparseCore HBM stack ({})",
                if serial == 0 {
                    "all stacks live".to_string()
                } else {
                    format!("{serial} stack(s) at a time")
                }
            ),
            sc_stack_peak,
        ),
        ("heap: dense weights and optimizer state".to_string(), dense_params * 3),
        (
            format!("heap: prefetched inputs ({} batches)", w.host.prefetch.max(1)),
            prefetched,
        ),
        ("activations".to_string(), activations),
    ];
    capacity.insert("hbm".to_string(), chip.hbm_bytes);
    peak.insert(
        "vmem".to_string(),
        fwd_ops.iter().chain(&bwd_ops).map(|o| o.vmem_bytes).max().unwrap_or(0),
    );
    capacity.insert("vmem".to_string(), chip.vmem_bytes_per_tc);
    peak.insert("tilespmem".to_string(), tilespmem_peak);
    capacity.insert(
        "tilespmem".to_string(),
        chip.sc_tilespmem_bytes_available - sim_sparsecore::limits::compile::TILESPMEM_ROW_RESERVE_BYTES,
    );
    if peak["hbm"] > chip.hbm_bytes {
        warnings.push(format!(
            "out of HBM: {} B needed of {} B ({}); shard over more chips, serialise tables (xla_sc_num_serialized_tables_to_optimize_hbm), lower maximum_parallel_iterations or the limits",
            peak["hbm"],
            chip.hbm_bytes,
            memory_breakdown
                .iter()
                .map(|(k, v)| format!("{k} {v} B"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Ids outside their vocabulary: an error with the check on, silent garbage without it.
    let id_check_failed = w.xla_sparse_core_enable_id_bound_check && out_of_range_count > 0;
    if out_of_range_count > 0 {
        let first = out_of_range
            .iter()
            .map(|(step, o)| {
                format!(
                    "step {step} feature {} sample {}: id {} in table {} of {} rows",
                    o.feature, o.sample, o.id, o.table, o.vocab
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        warnings.push(if w.xla_sparse_core_enable_id_bound_check {
            format!("id bound check failed: {out_of_range_count} ids outside their table's vocabulary ({first})")
        } else {
            format!(
                "{out_of_range_count} ids outside their table's vocabulary went unchecked ({first}); set xla_sparse_core_enable_id_bound_check = true to stop on them"
            )
        });
    }
    let fits = fits_compile
        && peak.iter().all(|(k, v)| *v <= capacity[k])
        && !limits.iter().any(|l| l.runtime == "would_abort")
        && !id_check_failed;

    // Start-up: tables (with slots) initialised on the host and copied over PCIe (the two overlap in
    // chunks), or written on the device at HBM bandwidth.
    let on_device = w.enable_fast_table_initialization || !w.initialize_tables_on_host;
    let startup_ps = if on_device {
        table_bytes.saturating_mul(1_000_000) / (chip.hbm_bytes_per_s / 1_000_000).max(1)
    } else {
        let fill = table_bytes.saturating_mul(1_000_000)
            / (ASSUMED_HOST_INIT_BYTES_PER_S_PER_THREAD * w.host.threads as u64 / 1_000_000).max(1);
        let copy = table_bytes.saturating_mul(1_000_000) / (chip.host_link_bytes_per_s / 1_000_000).max(1);
        fill.max(copy)
    };

    let step_s = step_ps as f64 / 1e12;
    let summary = RunSummary {
        step_time_us: step_ps as f64 / 1e6,
        samples_per_s: if step_s > 0.0 {
            w.global_batch as f64 / step_s
        } else {
            0.0
        },
        busy_fraction,
        overlap_fraction: both as f64 / (window.1 - window.0) as f64,
        hbm_bytes_per_step: hbm_bytes_step,
        hbm_padding_bytes_per_step: hbm_pad_step,
        peak_memory_bytes: peak,
        capacity_bytes: capacity,
        fits,
        limits,
        minibatches_per_step: minibatches_max as u64,
        dropped_ids_per_step: dropped_total / w.steps as u64,
        loss: Vec::new(),
    };
    let bottleneck = bottleneck_sentence(&summary, w, (sc_peak, sc_each.get(sc_peak).copied().unwrap_or(0.0)));
    let chip_constants = chip_full
        .to_json()
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v["value"].to_string(),
                        v["source"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let sc_ps = |cycles: u64| cycles * 1_000_000 / (sc.clock_hz / 1_000_000).max(1);
    let parts_per_chip = chip.sparsecores_per_chip.max(1);
    // One id every chip sends the same partition cannot be spread by shuffling.
    let single_id = match &straggler_cause.1 {
        Some((table, id, n)) if (*n * w.chips as u64) as f64 >= 0.5 * straggler_cause.0 => Some(format!(
            "one id (table {table}, id {id}, in {n} of the chip's samples) makes most of it; shuffling cannot split one id: minibatch along samples (limits.minibatching_dimension = \"sample\"), lower its valency or give it its own table"
        )),
        _ => None,
    };
    let straggler_text = if straggler.1 > 1.25 {
        format!(
            "SC {} of chip {} (partition {}) is the straggler: {:.2}x the mean partition's ids; {}",
            straggler.0 % parts_per_chip,
            straggler.2,
            straggler.0,
            straggler.1,
            match (&single_id, w.shuffle_ids) {
                (Some(s), _) => s.clone(),
                (None, false) => "hot ids share its partition; shuffle_ids = true spreads them".into(),
                (None, true) => "ids are already shuffled: several hot ids still share it; raise the number of chips or split the hottest features".into(),
            }
        )
    } else {
        format!(
            "no straggler: the busiest partition (SC {} of chip {}) takes {:.2}x the mean partition's ids",
            straggler.0 % parts_per_chip,
            straggler.2,
            straggler.1.max(1.0)
        )
    };
    let mut result = RunResult {
        summary,
        recorder,
        bottleneck,
        chip_constants,
        padding_per_buffer,
        step_times,
        knobs: Vec::new(),
        warnings,
        memory_breakdown,
        startup_ps,
        straggler: straggler_text,
        nan: None,
    };
    if opts.functional {
        let t = crate::functional::train(w, &result.step_times)?;
        result.summary.loss = t.losses;
        if let Some(n) = t.nan {
            result.summary.fits = false;
            result.nan = Some(n);
        }
    }
    result.knobs = crate::knobs::knob_report(
        w,
        &result,
        &crate::knobs::KnobCosts {
            stacks: stack_defs.iter().map(|s| (s.name.clone(), s.tables.len())).collect(),
            serial_groups: groups,
            sc_stack_peak,
            stack_hbm: stack_defs
                .iter()
                .zip(&sc_stack_bytes)
                .map(|(sd, &(f, b))| (sd.name.clone(), f, b))
                .collect(),
            prefetched_bytes: prefetched,
            id_check_ps: id_check_ps_step,
            nan_check_ps: sc_ps(nan_cycles_step),
            quantization_ps: sc_ps(quant_cycles_step),
            table_ids_per_sc: table_ids_max,
            out_of_range: out_of_range_count,
            chip_buffer_fill,
        },
    );
    Ok(result)
}

/// Trace detail: each TensorCore op's kernel stages on their own threads ("TC MXU", "TC VPU",
/// "TC DMA", "TC sequencer") inside the op's span, from the TensorCore model. Figures are read from
/// the "TC" thread only; these spans are for people looking at the trace.
fn add_tc_phase_spans(rec: &mut Recorder, fwd: &[DenseOp], bwd: &[DenseOp], clock_hz: u64) {
    use sim_tpu::tensorcore::Unit;
    let ops: BTreeMap<&str, &DenseOp> = fwd.iter().chain(bwd).map(|o| (o.name.as_str(), o)).collect();
    let ps = |cycles: u64| cycles.saturating_mul(1_000_000) / (clock_hz / 1_000_000).max(1);
    let mut extra = Vec::new();
    for s in rec.spans.iter().filter(|s| s.track.thread == "TC") {
        let Some(op) = s.name.rsplit_once(" step ").and_then(|(n, _)| ops.get(n)) else {
            continue;
        };
        for p in &op.phases {
            let start = (s.start.0 + ps(p.start_cycle)).min(s.end.0);
            let end = (start + ps(p.cycles)).min(s.end.0);
            if end <= start {
                continue;
            }
            let unit = match p.unit {
                Unit::Mxu => "TC MXU",
                Unit::Vpu => "TC VPU",
                Unit::Hbm => "TC DMA",
                Unit::Sequencer => "TC sequencer",
            };
            let mut args = vec![
                ("cycles".to_string(), ArgValue::Int(p.cycles as i64)),
                ("busy_cycles".to_string(), ArgValue::Int(p.busy_cycles as i64)),
            ];
            if p.bytes > 0 {
                args.push(("bytes".to_string(), ArgValue::Int(p.bytes as i64)));
            }
            args.extend(s.args.iter().filter(|(k, _)| k == "step").cloned());
            extra.push(Span {
                track: sim_core::recorder::Track {
                    process: s.track.process.clone(),
                    thread: unit.to_string(),
                },
                name: format!("{} {}", op.name, p.name),
                category: "tc_phase".into(),
                start: sim_core::time::SimTime(start),
                end: sim_core::time::SimTime(end),
                args,
            });
        }
    }
    for sp in extra {
        rec.span(sp);
    }
}

fn arg_step(s: &Span) -> Option<i64> {
    s.args
        .iter()
        .find(|(k, _)| k == "step")
        .and_then(|(_, v)| if let ArgValue::Int(i) = v { Some(*i) } else { None })
}

/// Flow arrows: in pipelined mode, SC backward of step i feeds SC forward of step i+2.
fn add_staleness_flows(rec: &mut Recorder, w: &Workload) {
    if w.pipelining != Pipelining::Pipelined {
        return;
    }
    let find = |rec: &Recorder, cat: &str, step: i64| {
        rec.spans
            .iter()
            .position(|s| s.track.thread == "SC 0" && s.category == cat && arg_step(s) == Some(step))
    };
    for i in 0..w.steps as i64 - 2 {
        if let (Some(a), Some(b)) = (find(rec, "sc_bwd", i), find(rec, "sc_fwd", i + 2)) {
            rec.flow(
                sim_core::recorder::SpanId(a),
                sim_core::recorder::SpanId(b),
                "stale gradients (step i -> i+2)",
            );
        }
    }
}

/// Bytes a bandwidth track moved inside the window (pro rata for spans cut by it) over what it could move.
fn utilisation(spans: &[Span], thread: &str, bytes_per_s: u64, window: (u64, u64)) -> f64 {
    let moved: f64 = spans
        .iter()
        .filter(|s| s.track.thread == thread && s.end.0 > s.start.0)
        .map(|s| {
            let bytes = s
                .args
                .iter()
                .find(|(k, _)| k == "bytes")
                .and_then(|(_, v)| if let ArgValue::Int(b) = v { Some(*b) } else { None })
                .unwrap_or(0);
            let inside = s.end.0.min(window.1).saturating_sub(s.start.0.max(window.0));
            bytes as f64 * inside as f64 / (s.end.0 - s.start.0) as f64
        })
        .sum();
    // + 0.0: an empty float sum is -0.0.
    moved / (bytes_per_s as f64 * (window.1 - window.0) as f64 / 1e12) + 0.0
}

fn intervals(spans: &[Span], pred: &dyn Fn(&Span) -> bool, window: (u64, u64)) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| pred(s))
        .map(|s| (s.start.0.max(window.0), s.end.0.min(window.1)))
        .filter(|(a, b)| b > a)
        .collect();
    v.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (a, b) in v {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

fn union_in(spans: &[Span], pred: &dyn Fn(&Span) -> bool, window: (u64, u64)) -> u64 {
    intervals(spans, pred, window).iter().map(|(a, b)| b - a).sum()
}

fn intersect_in(spans: &[Span], p: &dyn Fn(&Span) -> bool, q: &dyn Fn(&Span) -> bool, window: (u64, u64)) -> u64 {
    let (a, b) = (intervals(spans, p, window), intervals(spans, q, window));
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// Names the busiest unit kind; the SparseCores count by their busiest one (`sc_peak`: index, busy),
/// since every SparseCore waits for it.
fn bottleneck_sentence(s: &RunSummary, w: &Workload, sc_peak: (usize, f64)) -> String {
    let b = &s.busy_fraction;
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let straggling = sc_peak.1 > b.sc * 1.15;
    let kinds = [
        ("SparseCore", sc_peak.1.max(b.sc)),
        ("TensorCore", b.tc),
        ("host input pipeline", b.host),
        ("ICI", b.ici),
        ("HBM", b.hbm),
    ];
    let (name, _) = kinds
        .iter()
        .copied()
        .fold(("", -1.0), |acc, k| if k.1 > acc.1 { k } else { acc });
    let advice = match name {
        "SparseCore" if straggling => "its busiest SparseCore is a straggler: spread hot ids (shuffle_ids = true) or give the hottest features their own tables",
        "SparseCore" => match w.pipelining {
            Pipelining::Sequential => "enable pipelining to overlap it with the TensorCore, raise max_unique_ids_per_partition only if ids are dropped, or shard over more chips",
            Pipelining::Pipelined => "shard the tables over more chips, use bf16 tables, or cut the valency of the heaviest features",
        },
        "TensorCore" => "use a larger batch per chip for MXU efficiency, more chips, or narrower dense layers",
        "host input pipeline" => "add host preprocessing threads or prefetch depth",
        "ICI" => "keep more of the embedding lookups local, or use a chip with more ICI bandwidth",
        _ => "reduce padding (align dims to 8 f32) or use bf16 tables",
    };
    format!(
        "{name}-bound: SC busy {}{}, TC {}, host {}, ICI {}, HBM {}; {advice}.",
        pct(b.sc),
        if straggling {
            format!(" (SC {} {})", sc_peak.0, pct(sc_peak.1))
        } else {
            String::new()
        },
        pct(b.tc),
        pct(b.host),
        pct(b.ici),
        pct(b.hbm)
    )
}
