//! Timing of lowered kernels: a window pipeline whose body runs at the slowest of its stages (DMA in, MXU or VPU
//! compute, DMA out), after a fixed launch; and the per-op result with phases the program builder can schedule.

use serde::{Deserialize, Serialize};

use super::chip::{ChipModel, TcParams};
use super::lower::{Kernel, VpuClass, Work};
use super::spec::Dtype;

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
        VpuClass::Transpose => (p.transpose_resident, p.transpose_stream),
        VpuClass::Relayout => (p.relayout, p.relayout),
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
    let p = &chip.params;
    let total_bytes = k.in_bytes + k.out_bytes;
    let resident = (total_bytes as f64) <= p.resident_limit_bytes;
    let scoped = scoped_vmem_bytes(chip).max(1);
    // Double-buffered windows: each window holds at most half the scoped budget.
    let windows = if resident {
        1
    } else {
        (2 * total_bytes).div_ceil(scoped).max(2)
    };
    let (launch, body, compute, bound, unit) = match &k.work {
        Work::Vpu {
            class,
            blocks,
            elem_bytes,
        } => {
            let (r_res, r_stream) = vpu_rates(p, *class, *elem_bytes);
            let compute = blocks * r_res;
            let body = if resident { compute } else { blocks * r_stream };
            // Streaming slower than computing from VMEM means the HBM pipeline is the limit.
            let bound = if !resident && body > 1.1 * compute {
                Bound::Hbm
            } else {
                Bound::Vpu
            };
            (p.launch_cycles, body, compute, bound, Unit::Vpu)
        }
        Work::Mxu {
            pass_cycles,
            weight_blocks,
            dtype,
            out_blocks,
            out_bits,
            conv,
        } => {
            let conv_f = if *conv { p.conv_factor } else { 1.0 };
            let t_mxu = pass_cycles * mxu_dtype_factor(p, *dtype) * p.mxu_efficiency * conv_f
                + weight_blocks * p.mxu_weight_load_cycles;
            let r_out = if *out_bits <= 16 {
                p.mm_out_16bit
            } else {
                p.mm_out_32bit
            };
            let t_vpu = out_blocks * r_out;
            let t_hbm = total_bytes as f64 / p.mm_hbm_bytes_per_cycle.max(1e-9);
            let (body, bound, unit) = if t_mxu >= t_vpu && t_mxu >= t_hbm {
                (t_mxu, Bound::Mxu, Unit::Mxu)
            } else if t_vpu >= t_hbm {
                (t_vpu, Bound::Vpu, Unit::Vpu)
            } else {
                (t_hbm, Bound::Hbm, Unit::Mxu)
            };
            (p.mxu_launch_cycles, body, t_mxu, bound, unit)
        }
    };
    let launch_c = launch.max(0.0).round() as u64;
    let body_c = body.max(0.0).round() as u64;
    let bound = if launch_c > body_c { Bound::Launch } else { bound };
    let hbm_busy = ((total_bytes as f64) / p.mm_hbm_bytes_per_cycle.max(1e-9)).round() as u64;
    let phase = |stage: &str, unit: Unit, busy: u64, bytes: u64| Phase {
        name: format!("{}/{stage}", k.name),
        unit,
        start_cycle: launch_c,
        cycles: body_c,
        busy_cycles: busy.min(body_c),
        bytes,
    };
    let in_share = (hbm_busy * k.in_bytes).checked_div(total_bytes).unwrap_or(0);
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
    KernelCost {
        name: k.name.to_string(),
        cycles: launch_c + body_c,
        windows,
        bound,
        phases,
    }
}
