//! Timing of lowered kernels: a window pipeline whose body runs at the slowest of its stages (DMA in, MXU or VPU
//! compute, DMA out), after a fixed launch; and the per-op result with phases the program builder can schedule.

use serde::{Deserialize, Serialize};

use super::chip::{ChipModel, TcParams};
pub use super::lower::MxuLayout;
use super::lower::{Kernel, MxuWork, VpuClass, Work};
use super::narrow::Narrow;
use super::spec::Dtype;
use super::stationary::Stationary;

/// What limits an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Bound {
    /// The matrix units.
    Mxu,
    /// The vector unit (elementwise, reductions, layout changes, matmul epilogues).
    Vpu,
    /// HBM traffic.
    Hbm,
    /// Fixed launch cost dominates (tiny ops).
    Launch,
}

/// The hardware unit a phase occupies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// The scalar core issuing the kernel (launch, sync).
    Sequencer,
    /// HBM <-> VMEM DMA.
    Hbm,
    /// The MXUs.
    Mxu,
    /// The VPU.
    Vpu,
}

/// One phase of a kernel, with cycles relative to the op's start. Phases of one kernel may overlap
/// (the DMA-in, compute and DMA-out of a window pipeline run concurrently over the pipeline body).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Kernel name and stage, e.g. `convolution fusion/dma_in`.
    pub name: String,
    /// Unit occupied.
    pub unit: Unit,
    /// Start, cycles after the op starts.
    pub start_cycle: u64,
    /// Length in cycles.
    pub cycles: u64,
    /// Cycles of real work on `unit` within the span (<= `cycles`; the rest is waiting on another stage).
    pub busy_cycles: u64,
    /// HBM bytes moved (DMA phases), else 0.
    pub bytes: u64,
}

/// Cost of one kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelCost {
    /// Kernel name.
    pub name: String,
    /// Total cycles.
    pub cycles: u64,
    /// Pipeline windows (1 = resident in VMEM).
    pub windows: u64,
    /// Peak VMEM of its windows (double-buffered), bytes.
    pub vmem_bytes: u64,
    /// What limits it.
    pub bound: Bound,
    /// Launch, DMA-in, compute, DMA-out.
    pub phases: Vec<Phase>,
}

/// The cost of one op on one chip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpCost {
    /// Cycles of the chip's TensorCore clock (comparable to the compiler's `total_estimated_cycles`).
    pub cycles: u64,
    /// Wall time in nanoseconds at the chip clock.
    pub time_ns: f64,
    /// Nominal FLOPs (2*M*K*N for matmuls, one per element for elementwise and reductions, 0 for copies).
    pub flops: u64,
    /// HBM bytes read and written, on padded (tiled) sizes.
    pub hbm_bytes: u64,
    /// HBM bytes on logical sizes.
    pub hbm_bytes_unpadded: u64,
    /// Peak VMEM the kernels use (windows, double-buffered).
    pub vmem_bytes: u64,
    /// What limits the op (of its longest kernel).
    pub bound: Bound,
    /// The kernels, run one after another.
    pub kernels: Vec<KernelCost>,
}

impl OpCost {
    /// All phases of all kernels with start cycles relative to the op's start.
    pub fn phases(&self) -> Vec<Phase> {
        let mut t = 0;
        let mut out = Vec::new();
        for k in &self.kernels {
            for p in &k.phases {
                let mut p = p.clone();
                p.start_cycle += t;
                out.push(p);
            }
            t += k.cycles;
        }
        out
    }
}

fn vpu_rates(p: &TcParams, class: VpuClass, elem_bytes: u64) -> (f64, f64) {
    let f16 = |f: f64| if elem_bytes <= 2 { f } else { 1.0 };
    match class {
        VpuClass::Unary => (p.unary_resident, p.unary_stream),
        VpuClass::Binary => (
            p.binary_resident * f16(p.binary_16bit_factor),
            p.binary_stream * f16(p.binary_16bit_factor),
        ),
        VpuClass::Reduce => (
            p.reduce_resident * f16(p.reduce_16bit_factor),
            p.reduce_stream * f16(p.reduce_16bit_factor),
        ),
        VpuClass::Transpose => (p.relayout, p.transpose_stream),
        VpuClass::ConvInputCopy => (p.conv_input_copy, p.conv_input_copy),
        VpuClass::ConvInputRelayout => (p.conv_input_relayout, p.conv_input_relayout),
        VpuClass::Relayout => (p.relayout, p.relayout),
        VpuClass::RowRelayout => (p.row_relayout, p.row_relayout),
        VpuClass::Concat => (p.concat_resident, p.concat_stream),
        VpuClass::Matvec => {
            let r = p.matvec_base + p.matvec_per_byte * elem_bytes as f64;
            (r, r)
        }
        VpuClass::Outer => (p.outer, p.outer),
    }
}

fn mxu_dtype_factor(p: &TcParams, dtype: Dtype) -> f64 {
    match dtype {
        Dtype::Float32 | Dtype::Int32 => p.mxu_f32_factor,
        Dtype::Int8 => 1.0 / p.mxu_int8_speedup.max(1e-9),
        d if d.is_fp8() => 1.0 / p.mxu_fp8_speedup.max(1e-9),
        _ => 1.0,
    }
}

/// Scoped VMEM a kernel's windows may use.
fn scoped_vmem_bytes(chip: &ChipModel) -> u64 {
    chip.scoped_vmem_bytes
}

/// Times one kernel.
pub(crate) fn time_kernel(k: &Kernel, chip: &ChipModel) -> KernelCost {
    time_kernel_with(k, chip, Stationary::KMajor, Narrow::default(), Residency::default())
}

/// [`time_kernel`] with the stationary operand of an MXU kernel and its layout, its operands' int8 tiling, and
/// which of its operands and result an earlier or later kernel of the op keeps in VMEM (`placed`: no HBM traffic
/// and no window space for them, beside the operand the compiler prefetches).
pub(crate) fn time_kernel_with(
    k: &Kernel,
    chip: &ChipModel,
    held: Stationary,
    tiling: Narrow,
    placed: Residency,
) -> KernelCost {
    let p = &chip.params;
    let total_bytes = k.in_bytes + k.out_bytes;
    let resident = (total_bytes as f64) <= p.resident_limit_bytes;
    let scoped = scoped_vmem_bytes(chip).max(1);
    // Double-buffered windows: each window holds at most half the scoped budget.
    let mut windows = if resident {
        1
    } else {
        (2 * total_bytes).div_ceil(scoped).max(2)
    };
    let mut vmem_override = None;
    let (launch, body, compute, bound, unit) = match &k.work {
        Work::Vpu {
            class,
            blocks,
            elem_bytes,
        } => {
            let (r_res, r_stream) = vpu_rates(p, *class, *elem_bytes);
            let fixed = if *class == VpuClass::Transpose && *elem_bytes == 2 {
                p.transpose_16bit_cycles
            } else {
                0.0
            };
            let compute = blocks * r_res + fixed;
            let body = if resident { compute } else { blocks * r_stream + fixed };
            // Streaming slower than computing from VMEM means the HBM pipeline is the limit.
            let bound = if !resident && body > 1.1 * compute {
                Bound::Hbm
            } else {
                Bound::Vpu
            };
            (p.launch_cycles, body, compute, bound, Unit::Vpu)
        }
        Work::Mxu(w) => {
            let share = super::stationary::packed_transpose_share(p, w.dtype);
            let transpose = held.transpose_cycles(p).map(|t| t * share);
            let pre = prefetched(w, k.in_bytes, chip);
            let resident = Residency {
                lhs: pre.lhs || placed.lhs,
                rhs: pre.rhs || placed.rhs,
                out: pre.out || placed.out,
            };
            let plan = search(w, chip, resident, transpose, chip.cmem_bytes == 0, tiling, placed.out);
            windows = plan.iterations;
            vmem_override = Some(plan.vmem_bytes);
            (
                p.mxu_launch_cycles,
                plan.body_cycles,
                plan.mxu_cycles,
                plan.bound,
                plan.unit,
            )
        }
    };
    let launch_c = launch.max(0.0).round() as u64;
    let body_c = body.max(0.0).round() as u64;
    let bound = if launch_c > body_c { Bound::Launch } else { bound };
    let hbm_busy = ((total_bytes as f64) / chip.hbm.op_stream_bytes_per_cycle.max(1e-9)).round() as u64;
    let phase = |stage: &str, unit: Unit, busy: u64, bytes: u64| Phase {
        name: format!("{}/{stage}", k.name),
        unit,
        start_cycle: launch_c,
        cycles: body_c,
        busy_cycles: busy.min(body_c),
        bytes,
    };
    // hbm_busy x in_bytes overflows 64 bits for large kernels (found by fuzzing): in 128 bits, and the
    // share is at most hbm_busy since in_bytes <= total_bytes.
    let in_share = ((hbm_busy as u128 * k.in_bytes as u128)
        .checked_div(total_bytes as u128)
        .unwrap_or(0))
    .min(hbm_busy as u128) as u64;
    let phases = vec![
        Phase {
            name: format!("{}/launch", k.name),
            unit: Unit::Sequencer,
            start_cycle: 0,
            cycles: launch_c,
            busy_cycles: launch_c,
            bytes: 0,
        },
        phase("dma_in", Unit::Hbm, in_share, k.in_bytes),
        phase("compute", unit, compute.round() as u64, 0),
        phase("dma_out", Unit::Hbm, hbm_busy - in_share, k.out_bytes),
    ];
    let vmem_bytes = vmem_override.unwrap_or(if windows <= 1 {
        total_bytes
    } else {
        (2 * total_bytes).div_ceil(windows)
    });
    KernelCost {
        name: k.name.to_string(),
        cycles: launch_c + body_c,
        windows,
        vmem_bytes: vmem_bytes.min(scoped),
        bound,
        phases,
    }
}

/// The window plan the search picks for an MXU kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct MxuPlan {
    /// Output rows per window.
    pub tm: u64,
    /// Output columns per window.
    pub tn: u64,
    /// Contracting MXU-width blocks per window.
    pub tkb: u64,
    /// Window iterations (batch x M x N x K windows).
    pub iterations: u64,
    /// VMEM of the double-buffered windows plus the accumulator, bytes.
    pub vmem_bytes: u64,
    /// Pipeline body cycles (everything after launch).
    pub body_cycles: f64,
    /// MXU busy cycles.
    pub mxu_cycles: f64,
    /// What limits the steady state.
    pub bound: Bound,
    /// Unit of the compute phase.
    pub unit: Unit,
}

/// Window counts tried along each dim: the compiler splits a dim into this many near-equal windows.
const SPLITS: &[u64] = &[1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32, 43, 48, 64, 96, 128, 256];

/// Searches window sizes that fit the scoped VMEM (double-buffered operands and result, plus an f32 accumulator
/// when K is split) and returns the one with the fewest estimated cycles, as the compiler's window search does.
pub fn plan_mxu(w: &MxuWork, chip: &ChipModel) -> MxuPlan {
    plan_mxu_resident(w, chip, Residency::default())
}

/// Which of a matmul's operands are already in VMEM (produced there by an earlier kernel of the same
/// program): their windows cost no HBM traffic. The default is a standalone matmul.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Residency {
    /// The left-hand (activation) operand.
    pub lhs: bool,
    /// The right-hand (weight) operand.
    pub rhs: bool,
    /// The result: kept on chip for a consumer in the same program (VMEM), so its windows are never written to HBM.
    pub out: bool,
}

/// The operand of a standalone matmul or convolution the compiler prefetches on chip before the program starts
/// (cross-program prefetch, `ChipModel::prefetch_budget_bytes`): the larger one when it is under the budget, else
/// the smaller one when it does; the kernel then reads it from on-chip memory, and the prefetch itself, overlapped,
/// carries no estimate. `in_bytes` is the kernel's padded input bytes (both operands). Of two operands of equal
/// size the first (the activation) is prefetched: `copy-start(%x.1), cross_program_prefetch_index=0` in every
/// op-sample matmul whose operands have the same padded bytes, on all five chips (O0x040 f32 [2048,2048] twice,
/// O0x059 fp8 [4096,4096], O0x028 bf16 [4096,1024] x [1024,4096], O0x030, O0x021), where a larger weight is
/// the one prefetched (O0x033, bf16 [768,3072] against [384,768]).
pub fn prefetched(w: &MxuWork, in_bytes: u64, chip: &ChipModel) -> Residency {
    let elem = w.dtype.bytes();
    // The weight (right-hand side, or the convolution kernel) in its (8, 128) tiles.
    let w_bytes = w.batch * w.taps_h * w.taps_w * w.k.div_ceil(8) * 8 * w.n.div_ceil(128) * 128 * elem;
    let x_bytes = in_bytes.saturating_sub(w_bytes);
    let budget = chip.prefetch_budget_bytes;
    let (rhs_larger, large, small) = if w_bytes > x_bytes {
        (true, w_bytes, x_bytes)
    } else {
        (false, x_bytes, w_bytes)
    };
    // Strictly less: an operand of exactly the budget is not prefetched (bf16[4096,4096], 32 MiB, on tpu7x in
    // the op sample's O04253 and bf16[8192,2048] in O04252: the activation, or nothing, is prefetched).
    let rhs = if large < budget {
        rhs_larger
    } else if small < budget {
        !rhs_larger
    } else {
        return Residency::default();
    };
    Residency {
        lhs: !rhs,
        rhs,
        out: false,
    }
}

/// [`plan_mxu`] for operands some of which are VMEM-resident.
pub fn plan_mxu_resident(w: &MxuWork, chip: &ChipModel, resident: Residency) -> MxuPlan {
    plan_mxu_layout(w, chip, resident, MxuLayout::default())
}

/// [`plan_mxu_resident`] with the stationary operand's layout: a contracting-minor one is transposed block by
/// block on the transpose unit, in parallel with the MXU, so a window takes the slower of the two. Such an
/// operand takes `mxu_weight_transpose_cycles` per block, or `mxu_act_transpose_cycles` when it is the
/// activation of a product computed transposed (the op model's own ops: [`plan_mxu_transposing`]).
pub fn plan_mxu_layout(w: &MxuWork, chip: &ChipModel, resident: Residency, layout: MxuLayout) -> MxuPlan {
    let rate = if layout.stationary_is_activation {
        chip.params.mxu_act_transpose_cycles
    } else {
        chip.params.mxu_weight_transpose_cycles
    };
    let transpose = layout.stationary_k_minor.then_some(rate);
    plan_mxu_transposing(w, chip, resident, transpose)
}

/// [`plan_mxu_resident`] whose stationary operand's blocks each take `transpose` cycles on the transpose unit
/// (`None`: loaded as stored), in parallel with the MXU.
pub fn plan_mxu_transposing(w: &MxuWork, chip: &ChipModel, resident: Residency, transpose: Option<f64>) -> MxuPlan {
    search(w, chip, resident, transpose, false, Narrow::default(), false)
}

/// [`plan_mxu_transposing`] for a standalone op whose `prefetched` operands ([`prefetched`]) were copied on chip
/// before the program: where that is VMEM (a chip without CMEM) the operand lies there whole, outside the
/// kernel's scoped windows, so only the streamed operands and the result take window space. On v4 it is in
/// CMEM and is read into windows like a streamed one.
///
/// Evidence: O0x040 (f32 [2048,2048] x [2048,2048], x prefetched, 16 MiB each): the compiler's fusion has 4
/// windows (iteration bounds [4,1,1]) on tpu7x and v6e, whose 32 MiB scoped VMEM cannot hold x double-buffered
/// beside any window of y (2 x 16 MiB), and costs the MXU's work plus the launch: 45,748 cycles on tpu7x.
pub fn plan_mxu_prefetched(w: &MxuWork, chip: &ChipModel, prefetched: Residency, transpose: Option<f64>) -> MxuPlan {
    search(
        w,
        chip,
        prefetched,
        transpose,
        chip.cmem_bytes == 0,
        Narrow::default(),
        false,
    )
}

/// The window search; `outside` says resident operands take no window space, `tiling` which int8 operand
/// windows are re-tiled or ragged on the VPU ([`narrow_vpu_cycles`]), `local_result` that the result is an
/// intermediate the op keeps in VMEM, so a 32-bit result pays no drain ([`result_drain_cycles`]).
fn search(
    w: &MxuWork,
    chip: &ChipModel,
    resident: Residency,
    transpose: Option<f64>,
    outside: bool,
    tiling: Narrow,
    local_result: bool,
) -> MxuPlan {
    let p = &chip.params;
    let width = chip.mxu.width;
    let count = chip.mxu.count as f64;
    // The compiler charges f32 operands of a (single-pass, DEFAULT precision) matmul less than their 4 bytes.
    let in_b = if w.dtype.bytes() == 4 {
        4.0 * p.mm_f32_byte_factor
    } else {
        w.dtype.bytes() as f64
    };
    let out_b = (w.out_bits / 8) as f64;
    let m_pad = w.m.div_ceil(8) * 8;
    let n_pad = w.n.div_ceil(128) * 128;
    let k_tile = w.k.div_ceil(128) * 128;
    // Contracting blocks: each kernel position contracts its own (padded) channels, unless narrow channels of one
    // kernel row pack together.
    let kb_tap = k_tile.div_ceil(width);
    let kb_row = (w.taps_w * kb_tap).min((w.taps_w * w.k).div_ceil(width));
    let kb_total = w.taps_h * kb_row;
    let k_per_block = (k_tile as f64 / kb_tap as f64).min(width as f64);
    let conv_f = if w.conv { p.conv_factor } else { 1.0 };
    let dtype_f = mxu_dtype_factor(p, w.dtype) * p.mxu_efficiency * conv_f;
    // A chip with a faster 8-bit MXU also loads 8-bit weight tiles packed, faster; nothing else scales the loads.
    let load_f = super::stationary::packed_transpose_share(p, w.dtype);
    let r_out = result_drain_cycles(p, w.out_bits, local_result);
    let bw = chip.hbm.op_stream_bytes_per_cycle.max(1e-9);
    let scoped = chip.scoped_vmem_bytes as f64;
    let mut best: Option<MxuPlan> = None;
    let mut fallback: Option<MxuPlan> = None;
    let mut seen_m = Vec::new();
    for &dm in SPLITS {
        let tm = m_pad.div_ceil(dm).div_ceil(8) * 8;
        if seen_m.contains(&tm) {
            continue;
        }
        seen_m.push(tm);
        let mut seen_n = Vec::new();
        for &dn in SPLITS {
            let tn = n_pad.div_ceil(dn).div_ceil(128) * 128;
            if seen_n.contains(&tn) {
                continue;
            }
            seen_n.push(tn);
            let mut seen_k = Vec::new();
            for &dk in SPLITS {
                let tkb = kb_total.div_ceil(dk);
                if seen_k.contains(&tkb) {
                    continue;
                }
                seen_k.push(tkb);
                let nk = kb_total.div_ceil(tkb);
                let (nm, nn) = (m_pad.div_ceil(tm), n_pad.div_ceil(tn));
                // A convolution reads input rows once for all taps of its window (no im2col copy in HBM).
                let x_blocks = if w.conv { tkb.min(kb_row) } else { tkb };
                let x1 = tm as f64 * x_blocks as f64 * k_per_block * in_b;
                let w1 = tkb as f64 * k_per_block * tn as f64 * in_b;
                let o1 = tm as f64 * tn as f64 * out_b;
                let acc1 = if nk > 1 { tm as f64 * tn as f64 * 4.0 } else { 0.0 };
                let x_win = if outside && resident.lhs { 0.0 } else { 2.0 * x1 };
                let w_win = if outside && resident.rhs { 0.0 } else { 2.0 * w1 };
                let vmem1 = x_win + w_win + o1 + acc1;
                // Batched products share windows: `tb` batch entries per window, as many as fit.
                let tb = ((scoped / vmem1.max(1.0)).floor() as u64).clamp(1, w.batch);
                let tbf = tb as f64;
                let iterations = w.batch.div_ceil(tb) * nm * nn * nk;
                let (x_bytes, w_bytes, o_bytes) = (x1 * tbf, w1 * tbf, o1 * tbf);
                // Resident operands' windows are not fetched from HBM.
                let x_hbm = if resident.lhs { 0.0 } else { x_bytes };
                let w_hbm = if resident.rhs { 0.0 } else { w_bytes };
                let vmem = vmem1 * tbf;
                let n_passes = tn.div_ceil(width) as f64;
                let mxu_iter = tbf
                    * (tm as f64 * tkb as f64 * n_passes / count * dtype_f
                        + tkb as f64 * n_passes / count * p.mxu_weight_load_cycles * load_f);
                let xlu_iter = transpose.map_or(0.0, |t| tbf * tkb as f64 * n_passes / count * t);
                let mxu_iter = mxu_iter.max(xlu_iter);
                let out_blocks = tbf * tm as f64 * tn as f64 / 1024.0;
                let widen = if w.dtype.bits() == 8 {
                    p.mm_8bit_widen * w1 * tbf / in_b / 1024.0
                } else {
                    0.0
                } + narrow_vpu_cycles(p, tiling, tbf * x1 / in_b, tbf * w1 / in_b);
                let vpu_iter = out_blocks * ((nk - 1) as f64 * p.mm_acc_32bit + r_out) / nk as f64 + widen;
                // Loop order N (outer), M, K (inner), as in the compiler's iteration bounds; a window whose index
                // does not change between consecutive iterations is not fetched again.
                let x_fetches = if nm == 1 && nk == 1 { 1 } else { nn * nm * nk };
                let w_fetches = if nk == 1 { nn } else { nn * nm * nk };
                let o_hbm = if resident.out { 0.0 } else { o_bytes };
                let dma_bytes = w.batch.div_ceil(tb) as f64
                    * (x_fetches as f64 * x_hbm + w_fetches as f64 * w_hbm + (nn * nm) as f64 * o_hbm);
                let dma_iter = dma_bytes / iterations as f64 / bw;
                // The MXU and the epilogue (result drain, accumulate, convert) overlap only partly.
                let compute_iter = mxu_iter.max(vpu_iter) + p.mm_epilogue_serial * mxu_iter.min(vpu_iter);
                let per = compute_iter.max(dma_iter) + p.mxu_iter_cycles;
                let body = iterations as f64 * per + (x_hbm + w_hbm) / bw;
                let (bound, unit) = if dma_iter > compute_iter {
                    (Bound::Hbm, Unit::Mxu)
                } else if mxu_iter >= vpu_iter {
                    (Bound::Mxu, Unit::Mxu)
                } else {
                    (Bound::Vpu, Unit::Vpu)
                };
                let plan = MxuPlan {
                    tm,
                    tn,
                    tkb,
                    iterations,
                    vmem_bytes: vmem as u64,
                    body_cycles: body,
                    mxu_cycles: iterations as f64 * mxu_iter,
                    bound,
                    unit,
                };
                let fits = vmem <= scoped;
                let slot = if fits { &mut best } else { &mut fallback };
                let better = match slot {
                    None => true,
                    Some(b) if fits => plan.body_cycles < b.body_cycles,
                    Some(b) => plan.vmem_bytes < b.vmem_bytes,
                };
                if better {
                    *slot = Some(plan);
                }
            }
        }
    }
    // Every split list starts with 1, so at least one plan was recorded.
    best.or(fallback)
        .expect("window search visits at least one configuration")
}

/// VPU cycles per 1024 result elements of an MXU kernel's result drain: `mm_out_16bit` for a 16-bit result (the
/// narrowing convert and store), `mm_out_32bit` for a 32-bit one, which is its write towards HBM: fitted on
/// results that go there, it is the HBM stream itself on v6e (4.85 cycles per 4 KiB vreg, 845 bytes a cycle
/// against 899) and tpu7x (2.56, 1,600 against 1,865). A 32-bit result kept in VMEM (`local`) drains for nothing.
///
/// Evidence: C25.conv2d_nhwc.001 (f32 [4,56,56,29] x [1,1,29,256], every intermediate `S(1)` on v6e and tpu7x):
/// the compiler's convolution fusion costs 4,160 cycles on both, where the drain alone of its 3,136 f32 result
/// vregs would take 15,200 on v6e and 8,000 on tpu7x.
pub fn result_drain_cycles(p: &TcParams, out_bits: u64, local: bool) -> f64 {
    if out_bits <= 16 {
        p.mm_out_16bit
    } else if local {
        0.0
    } else {
        p.mm_out_32bit
    }
}

/// VPU cycles of one window's int8 tiling work ([`super::narrow`]): `mm_int8_retile` per 1024 elements of each
/// re-tiled operand window, `mm_int8_ragged` per 1024 weight (right-hand) window elements of a ragged K.
pub fn narrow_vpu_cycles(p: &TcParams, tiling: Narrow, lhs_elements: f64, rhs_elements: f64) -> f64 {
    let retiled =
        if tiling.lhs_retiled { lhs_elements } else { 0.0 } + if tiling.rhs_retiled { rhs_elements } else { 0.0 };
    let ragged = if tiling.ragged_k { rhs_elements } else { 0.0 };
    (p.mm_int8_retile * retiled + p.mm_int8_ragged * ragged) / 1024.0
}
