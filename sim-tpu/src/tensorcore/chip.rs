//! Per-generation figures the TensorCore model needs: clock and MXU geometry (from the chip presets) and the constants
//! fitted to the XLA TPU compiler's own cycle estimates (`calibration.json`, written by
//! `cargo run --release -p sim-tpu --example fit_tensorcore`).

use serde::{Deserialize, Serialize};

use super::OpError;
use crate::chips::Chip;

/// MXU geometry of one compiler "device" (one TensorCore, or a megacore pair on v4/v5p where the compiler
/// treats the pair as one device).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MxuGeometry {
    /// Systolic array width and height (128 or 256).
    pub width: u64,
    /// MXUs the device drives in parallel.
    pub count: u64,
}

/// Fitted constants of the model. Rates are cycles per 1024 padded elements (one f32 vreg's worth), the unit in
/// which the compiler's estimates scale for VPU work; "resident" means the operands fit the scoped-VMEM budget and
/// are prefetched whole, "stream" means the op runs as a window pipeline from HBM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TcParams {
    /// Fixed cycles of a VPU (loop/input/reduce/copy) fusion: launch, sync, pipeline fill.
    pub launch_cycles: f64,
    /// Fixed cycles of an MXU (output/convolution) fusion.
    pub mxu_launch_cycles: f64,
    /// Largest operands+result footprint (padded bytes) that runs resident in VMEM without windowing.
    pub resident_limit_bytes: f64,
    /// Exp/tanh/convert, resident.
    pub unary_resident: f64,
    /// Exp/tanh/convert, streamed.
    pub unary_stream: f64,
    /// Add/mul, resident.
    pub binary_resident: f64,
    /// Add/mul, streamed.
    pub binary_stream: f64,
    /// Multiplier on binary rates for 16-bit operands.
    pub binary_16bit_factor: f64,
    /// Reductions, resident (per input element block).
    pub reduce_resident: f64,
    /// Reductions, streamed.
    pub reduce_stream: f64,
    /// Multiplier on reduction rates for 16-bit operands.
    pub reduce_16bit_factor: f64,
    /// Rank-2 transpose (minor dim changes: transpose unit), streamed from HBM.
    pub transpose_stream: f64,
    /// Extra fixed cycles of a 16-bit transpose (packed rows are unpacked and repacked around the transpose unit).
    pub transpose_16bit_cycles: f64,
    /// Layout-changing copies from VMEM (NCHW<->NHWC, resident rank-2 transposes, convolution output relayout),
    /// per input block.
    pub relayout: f64,
    /// The input copy of a convolution that puts the batch (or, for one image, the rows) in the lanes, per 1024
    /// elements of its (H, W, C, N) output (`lower::conv_copy_lanes`).
    pub conv_input_copy: f64,
    /// Concatenate, resident (per output block).
    pub concat_resident: f64,
    /// Concatenate, streamed.
    pub concat_stream: f64,
    /// Matrix-vector (M = 1, VPU) per 1024 weight elements: fixed part.
    pub matvec_base: f64,
    /// Matrix-vector: additional cycles per byte of weight element.
    pub matvec_per_byte: f64,
    /// Outer product (K = 1, VPU) per 1024 output elements.
    pub outer: f64,
    /// Ratio of the compiler's MXU estimate to ideal passes (>= 1).
    pub mxu_efficiency: f64,
    /// f32 matmul cost relative to bf16 (multi-pass).
    pub mxu_f32_factor: f64,
    /// int8 speed-up over bf16 on the MXU (1 or 2).
    pub mxu_int8_speedup: f64,
    /// fp8 speed-up over bf16 on the MXU (1 or 2).
    pub mxu_fp8_speedup: f64,
    /// Fraction of an f32 matmul operand's bytes the window pipeline's DMA and VMEM are charged (0.5 = as bf16).
    pub mm_f32_byte_factor: f64,
    /// Matmul epilogue per 1024 output elements with a 16-bit result (accumulator drain, convert, store).
    pub mm_out_16bit: f64,
    /// Matmul epilogue per 1024 output elements with a 32-bit result.
    pub mm_out_32bit: f64,
    /// Matmul accumulation per 1024 output elements for each contracting window but the last (f32 read-add-write).
    pub mm_acc_32bit: f64,
    /// Fraction of the matmul epilogue (per-window VPU work) that does not overlap the MXU, 0..1.
    pub mm_epilogue_serial: f64,
    /// Fixed cycles per window iteration of an MXU kernel (DMA issue, semaphore waits).
    pub mxu_iter_cycles: f64,
    /// HBM bytes per cycle a window pipeline streams: the compiler's modelled HBM bandwidth over its clock
    /// (reference/chips.md: 491, 738, 2350, 1638, 3686 GB/s), not fitted.
    pub mm_hbm_bytes_per_cycle: f64,
    /// Cycles to load one weight block into an MXU, per window iteration.
    pub mxu_weight_load_cycles: f64,
    /// Convolution MXU work relative to the equivalent matmul (per-tap windows, halo, relayout).
    pub conv_factor: f64,
    /// Cycles per 1024 elements of an 8-bit (int8, fp8) MXU weight window widened to bf16 on the VPU before it
    /// enters the MXU, part of the kernel's epilogue-side VPU work. Read off the corpus decode matmuls: on v4
    /// int8 and fp8 weights cost 1.8-3.0 cycles per 1024 elements whatever the dtype (C25.matmul.044 fp8
    /// [8,1920]x[1920,24704]: 104,562 cycles for 46,320 blocks; C25.matmul.052 int8 [32,638]x[638,18481]:
    /// 29,518 for 11,515), where v5e-v6e and tpu7x take the same shapes at 0.4-1.4.
    #[serde(default)]
    pub mm_8bit_widen: f64,
    /// Cycles per 1024 elements of an int8 MXU operand window stored `T(32,128)` and re-tiled to `T(8,128)`
    /// inside the fusion ([`super::narrow`]), on the VPU beside the widening.
    #[serde(default)]
    pub mm_int8_retile: f64,
    /// Cycles per 1024 elements of an int8 weight window whose contracting dim is not a multiple of 8, on top
    /// of the widening: the padded rows of its last tile are masked ([`super::narrow`]).
    #[serde(default)]
    pub mm_int8_ragged: f64,
    /// The input copy of a convolution that puts the channels in the lanes, per 1024 elements of its
    /// (H, W, N, C) output (`lower::conv_copy_lanes`).
    #[serde(default = "default_conv_input_relayout")]
    pub conv_input_relayout: f64,
    /// Cycles the transpose unit takes per 128x128 block of a stationary MXU operand stored contracting-dim
    /// minor (`lower::MxuLayout`), in parallel with the MXU: a window takes the slower of the two. Read off the
    /// corpus's v4 decode matmuls whose weight is read from CMEM: a K-minor one costs 27-41 cycles per block
    /// whatever the rows and the element type (C25.matmul.017, bf16 [512,24417]{0,1}, M 8: 28,437 cycles for
    /// 764 blocks; .053, f32 [6400,523]{0,1}: 10,158 for 250; .019, the x bf16 [13464,768]{1,0} of a product
    /// computed transposed, N 8: 17,663 for 636), where a K-major one costs 17-22 (.016, [2816,1663]{1,0}:
    /// 6,392 for 286).
    #[serde(default)]
    pub mxu_weight_transpose_cycles: f64,
    /// [`TcParams::mxu_weight_transpose_cycles`] for the stationary activation `[M, K]{1,0}` of a product computed
    /// transposed (`stationary::Stationary::KMinorActivation`): on v4 23-25 cycles per block where a weight's take
    /// 34-37 (evidence in `tensorcore::stationary`). The hlo model reads the weight's rate for both.
    #[serde(default)]
    pub mxu_act_transpose_cycles: f64,
    /// A copy that keeps the lane dim and moves only sublane rows (`lower::conv_output_copy`), per 1024 elements
    /// of 32-bit data. Read off the convolutions whose result the compiler writes (H, W, N, C) and copies to the
    /// channel-minor entry layout (N, H, W, C): 3.3-3.5 cycles per 1024 f32 elements on tpu7x, 5.6 on v6e, 10.7
    /// on v5e, 7.6 on v5p, 19.5 on v4 (C25.conv2d_nhwc.001, f32[4,56,56,256]: 10,485 / 17,407 / 34,196 /
    /// 23,946 / 61,224 cycles for 3,136 blocks). The bf16 copies of the same blocks cost up to 1.4x more on
    /// v5e-tpu7x (O0x218), but a separate 16-bit factor fitted to 1.0 on every chip, so there is none.
    #[serde(default = "default_row_relayout")]
    pub row_relayout: f64,
    /// Bytes (read plus written) per cycle of a copy between two arrays the compiler placed in VMEM
    /// (`intermediates`): no HBM side, a local move. Not fitted to totals (`FIXED_CONSTANTS`): the bytes over the
    /// cycles of the fit records' VMEM copies, C25.conv2d_nhwc.001's two (3.7 and 25.7 MB) and .011's two (51.4
    /// and 5.3 MB; tpu7x has only the second): 86.0 MB in 400 + 7,424 + 5,600 + 900 cycles on v5e (6,005 per
    /// cycle), 400 + 1,584 + 5,600 + 900 on v6e (10,139), and 34.6 MB in 10,478 + 1,584 + 900 on tpu7x (2,672; its
    /// first copy retiles to T(16,128)). v4 and v5p place no intermediates in VMEM: the default stands.
    #[serde(default = "default_vmem_copy_bytes_per_cycle")]
    pub vmem_copy_bytes_per_cycle: f64,
}

/// The starting point of `vmem_copy_bytes_per_cycle` for a calibration written before it existed (the
/// evidence's middle, 10 KB per cycle).
fn default_vmem_copy_bytes_per_cycle() -> f64 {
    10_000.0
}

/// The starting point of `row_relayout` for a calibration written before it existed (v5e's f32 figure above).
fn default_row_relayout() -> f64 {
    10.0
}

/// The starting point of `conv_input_relayout` for a calibration written before it existed: about the corpus's
/// median, 10 cycles per 1024 elements on v5e (C25.conv2d_nhwc.000: 334,446 cycles for 37,632 blocks).
fn default_conv_input_relayout() -> f64 {
    10.0
}

impl TcParams {
    /// Every constant by name, for the fitter.
    pub fn fields_mut(&mut self) -> Vec<(&'static str, &mut f64)> {
        vec![
            ("launch_cycles", &mut self.launch_cycles),
            ("mxu_launch_cycles", &mut self.mxu_launch_cycles),
            ("resident_limit_bytes", &mut self.resident_limit_bytes),
            ("unary_resident", &mut self.unary_resident),
            ("unary_stream", &mut self.unary_stream),
            ("binary_resident", &mut self.binary_resident),
            ("binary_stream", &mut self.binary_stream),
            ("binary_16bit_factor", &mut self.binary_16bit_factor),
            ("reduce_resident", &mut self.reduce_resident),
            ("reduce_stream", &mut self.reduce_stream),
            ("reduce_16bit_factor", &mut self.reduce_16bit_factor),
            ("transpose_stream", &mut self.transpose_stream),
            ("transpose_16bit_cycles", &mut self.transpose_16bit_cycles),
            ("relayout", &mut self.relayout),
            ("conv_input_copy", &mut self.conv_input_copy),
            ("concat_resident", &mut self.concat_resident),
            ("concat_stream", &mut self.concat_stream),
            ("matvec_base", &mut self.matvec_base),
            ("matvec_per_byte", &mut self.matvec_per_byte),
            ("outer", &mut self.outer),
            ("mxu_efficiency", &mut self.mxu_efficiency),
            ("mxu_f32_factor", &mut self.mxu_f32_factor),
            ("mxu_int8_speedup", &mut self.mxu_int8_speedup),
            ("mxu_fp8_speedup", &mut self.mxu_fp8_speedup),
            ("mm_f32_byte_factor", &mut self.mm_f32_byte_factor),
            ("mm_out_16bit", &mut self.mm_out_16bit),
            ("mm_out_32bit", &mut self.mm_out_32bit),
            ("mm_acc_32bit", &mut self.mm_acc_32bit),
            ("mm_epilogue_serial", &mut self.mm_epilogue_serial),
            ("mxu_iter_cycles", &mut self.mxu_iter_cycles),
            ("mm_hbm_bytes_per_cycle", &mut self.mm_hbm_bytes_per_cycle),
            ("mxu_weight_load_cycles", &mut self.mxu_weight_load_cycles),
            ("conv_factor", &mut self.conv_factor),
            ("mm_8bit_widen", &mut self.mm_8bit_widen),
            ("mm_int8_retile", &mut self.mm_int8_retile),
            ("mm_int8_ragged", &mut self.mm_int8_ragged),
            ("conv_input_relayout", &mut self.conv_input_relayout),
            ("mxu_weight_transpose_cycles", &mut self.mxu_weight_transpose_cycles),
            ("mxu_act_transpose_cycles", &mut self.mxu_act_transpose_cycles),
            ("row_relayout", &mut self.row_relayout),
            ("vmem_copy_bytes_per_cycle", &mut self.vmem_copy_bytes_per_cycle),
        ]
    }
}

/// What the TensorCore model knows about one chip generation: facts from the chip preset
/// ([`crate::chips`]: the compiler's implied clock, MXU geometry) plus the calibrated constants.
#[derive(Clone, Debug, PartialEq)]
pub struct ChipModel {
    /// Preset name (`v4`, `v5e`, `v5p`, `v6e`, `tpu7x`).
    pub name: String,
    /// The TensorCore clock, Hz: the one every TensorCore cycle count of every command is in (kernels,
    /// gathers, the step's TensorCore unit). The compiler's `model_clock_mhz`, moved by what-ifs as
    /// [`ChipModel::for_chip`] says.
    pub clock_hz: f64,
    /// MXU geometry of one compiler device (preset `mxu_dim`; count = `model_peak_flops_per_cycle` / 2 dim^2).
    pub mxu: MxuGeometry,
    /// Scoped VMEM one kernel's windows may use, bytes (calibration).
    pub scoped_vmem_bytes: u64,
    /// Whether M = 1 matmuls run on the MXU (calibration).
    pub matvec_on_mxu: bool,
    /// Whether the compiler places an op's intermediate arrays in the VMEM left beside the scoped window
    /// (calibration; `intermediates`).
    pub vmem_intermediates: bool,
    /// Largest entry parameter the compiler prefetches into on-chip memory before a program starts (its
    /// cross-program prefetch; calibration).
    pub prefetch_budget_bytes: u64,
    /// Whether one compiler device is a megacore pair of TensorCores (spec `megacore`).
    pub megacore: bool,
    /// TensorCores in one compiler device (spec `model_device_tensorcores`): they split its kernels.
    pub device_tensorcores: u32,
    /// One TensorCore's VMEM bytes (spec `vmem_bytes_per_tc`).
    pub vmem_bytes: u64,
    /// Common memory (v4's CMEM) bytes, 0 where the chip has none (spec `cmem_bytes`).
    pub cmem_bytes: u64,
    /// The chip's HBM rates, each for its own use, with the chip's what-ifs applied.
    pub hbm: HbmRates,
    /// Fitted constants (as calibrated on the preset; what-ifs act through `clock_hz`, `mxu` and `hbm`).
    pub params: TcParams,
}

/// The HBM rates of one chip side by side, each with the model that uses it. A what-if on the chip's
/// HBM bandwidth (`hbm_bytes_per_s`, or the compiler's `model_hbm_bytes_per_s`) scales all of them by
/// the same ratio over the preset, so every command sees the same faster or slower memory.
#[derive(Clone, Debug, PartialEq)]
pub struct HbmRates {
    /// The chip's HBM bandwidth, bytes/s (datasheet `hbm_bytes_per_s`): the step simulator's shared HBM
    /// resource that SparseCore and TensorCore transfers draw on, and the SparseCore gather's ceiling.
    pub chip_bytes_per_s: u64,
    /// HBM bandwidth of one compiler device as the compiler's cost model charges it, bytes/s
    /// (`model_hbm_bytes_per_s`, read off the compiler's estimates): the TensorCore's transfer cap in a
    /// step, its memory-bound passes (optimizer update) and the TensorCore gather's ceiling.
    pub device_bytes_per_s: u64,
    /// Bytes per cycle the op model's window pipeline streams (`mm_hbm_bytes_per_cycle`, fitted on the
    /// compiler's single-op estimates of the same chip): `tpusim op`, `select` and `run`'s built-in kernels.
    pub op_stream_bytes_per_cycle: f64,
    /// Bytes per cycle the HLO model's fused kernels stream: `device_bytes_per_s` over the clock
    /// (`tpusim hlo`, `run` with `dense.hlo`).
    pub hlo_stream_bytes_per_cycle: f64,
}

/// The calibrated part of a chip model, as stored in `calibration.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibratedChip {
    /// Preset name.
    pub name: String,
    /// Scoped VMEM the compiler lets one kernel's windows use, in bytes (observed `scoped_vmem_bytes` maxima in
    /// the records: 16 MiB on v4/v5e/v5p, 32 MiB on v6e/tpu7x).
    pub scoped_vmem_bytes: u64,
    /// Whether the compiler runs matrix-vector products (M = 1) on the MXU (tpu7x) rather than as VPU
    /// reduce/loop fusions (v4 to v6e), as read off the compiled records.
    pub matvec_on_mxu: bool,
    /// Largest entry parameter the compiler prefetches into on-chip memory (`copy-start` with
    /// `cross_program_prefetch_index`, overlapped and unestimated) so the kernel reads it from there: the larger
    /// matmul operand when it fits, else the smaller. Read off the corpus op records (testdata/ops/
    /// corpus_records.jsonl.gz): VMEM less the scoped window on v5e (112 MiB), v6e (96), v5p (48) and tpu7x
    /// (32), each between the largest operand prefetched (70.1 MiB on v5e/v6e, 23.9 on tpu7x/v5p) and the
    /// smallest refused (113.8 and 70.1 MiB). v4 prefetches into CMEM (`S(3)`), 64 MiB: between the largest
    /// operand prefetched there (fp8[1920,24704], 47.4 MB, C25.matmul.044) and the smallest refused
    /// (s8[9344,7552], 70.6 MB, whose 37 KB activation is prefetched instead); a weight read from CMEM is
    /// not streamed (f32[11520,512], 23.6 MB, in 8,566 cycles where HBM at 470 B/cycle takes 50,200).
    pub prefetch_budget_bytes: u64,
    /// Whether the compiler places the arrays between an op's kernels in VMEM (`S(1)`) while they fit the
    /// prefetch budget (`super::intermediates`): read off the optimized HLO of C25.conv2d_nhwc.001 and .011,
    /// whose copies and fusion write `S(1)` arrays on v5e, v6e and tpu7x and HBM ones on v5p (v4's go to HBM
    /// too: its spare on-chip memory is CMEM, where the copies cost as much as HBM ones, 14,912-280,952 cycles).
    #[serde(default)]
    pub vmem_intermediates: bool,
    /// Fitted constants.
    pub params: TcParams,
}

/// The calibration file: one [`CalibratedChip`] per preset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// How the constants were produced.
    pub source: String,
    /// One entry per chip.
    pub chips: Vec<CalibratedChip>,
}

const CALIBRATION_JSON: &str = include_str!("calibration.json");

/// The chip names the model has calibrated constants for.
pub const CHIP_NAMES: &[&str] = &["v4", "v5e", "v5p", "v6e", "tpu7x"];

impl Calibration {
    /// The embedded calibration.
    pub fn embedded() -> Calibration {
        // The embedded file is checked by a unit test, so this cannot fail in a released binary.
        serde_json::from_str(CALIBRATION_JSON).expect("embedded tensorcore calibration.json is valid")
    }

    /// Chip models for every calibrated chip, from the chip presets.
    pub fn models(&self) -> Result<Vec<ChipModel>, OpError> {
        self.chips
            .iter()
            .map(|c| {
                let chip = Chip::preset(&c.name).map_err(|_| OpError::UnknownChip { chip: c.name.clone() })?;
                ChipModel::from_parts(&chip, c.clone())
            })
            .collect()
    }
}

impl ChipModel {
    /// The op model's launch of a VPU kernel in whole cycles: what the hlo model charges every loop, reduce and
    /// relayout kernel (its evidence is in `hlo::cost`).
    pub fn loop_launch_cycles(&self) -> u64 {
        self.params.launch_cycles.max(0.0).round() as u64
    }

    /// The preset for `name`; accepts the compiler's topology spelling too (`v5e:2x2`, `TPU v4`).
    pub fn preset(name: &str) -> Result<ChipModel, OpError> {
        let chip =
            Chip::preset(&normalize_chip_name(name)).map_err(|_| OpError::UnknownChip { chip: name.to_string() })?;
        ChipModel::for_chip(&chip)
    }

    /// The one constructor of the TensorCore model from a chip: a preset with any chip-file or
    /// `--set chip.FIELD=VALUE` overrides, used by `op`, `hlo`, `select` and `run` alike. What-ifs
    /// against the preset the chip names:
    /// - clock: `model_clock_mhz` (the clock the compiler counts cycles in), moved in proportion by a
    ///   `tc_clock_mhz` override when `model_clock_mhz` itself is not overridden;
    /// - MXUs: `model_peak_flops_per_cycle`, moved in proportion by `mxus_per_tensorcore` likewise;
    /// - HBM: every rate of [`HbmRates`] scaled by `hbm_bytes_per_s` and `model_hbm_bytes_per_s` over the
    ///   preset's, the per-cycle rates also by the preset's clock over the chip's.
    ///
    /// Constants come from the calibration of the preset the chip names.
    pub fn for_chip(chip: &Chip) -> Result<ChipModel, OpError> {
        let key = normalize_chip_name(&chip.spec.name);
        let cal = Calibration::embedded()
            .chips
            .into_iter()
            .find(|c| c.name == key)
            .ok_or_else(|| OpError::UnknownChip {
                chip: chip.spec.name.clone(),
            })?;
        let preset = Chip::preset(&key).map_err(|_| OpError::UnknownChip {
            chip: chip.spec.name.clone(),
        })?;
        ChipModel::build(chip, &preset, cal)
    }

    fn from_parts(chip: &Chip, cal: CalibratedChip) -> Result<ChipModel, OpError> {
        ChipModel::build(chip, chip, cal)
    }

    fn build(chip: &Chip, preset: &Chip, cal: CalibratedChip) -> Result<ChipModel, OpError> {
        let (s, base) = (&chip.spec, &preset.spec);
        let invalid = |reason: String| OpError::InvalidParam {
            field: "chip".into(),
            reason,
        };
        let positive = [
            ("mxu_dim", s.mxu_dim as u64),
            ("model_clock_mhz", s.model_clock_mhz),
            ("tc_clock_mhz", s.tc_clock_mhz),
            ("hbm_bytes_per_s", s.hbm_bytes_per_s),
            ("model_hbm_bytes_per_s", s.model_hbm_bytes_per_s),
        ];
        if let Some((f, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(invalid(format!("{}: {f} must be > 0", s.name)));
        }
        let ratio = |a: u64, b: u64| if b == 0 { 1.0 } else { a as f64 / b as f64 };
        let clock_mhz = if s.model_clock_mhz == base.model_clock_mhz {
            base.model_clock_mhz as f64 * ratio(s.tc_clock_mhz, base.tc_clock_mhz)
        } else {
            s.model_clock_mhz as f64
        };
        let peak = if s.model_peak_flops_per_cycle == base.model_peak_flops_per_cycle {
            base.model_peak_flops_per_cycle * s.mxus_per_tensorcore as u64 / base.mxus_per_tensorcore.max(1) as u64
        } else {
            s.model_peak_flops_per_cycle
        };
        let dim = s.mxu_dim as u64;
        let count = (peak / (2 * dim * dim)).max(1);
        let clock_hz = clock_mhz.round() * 1e6;
        let hbm_scale =
            ratio(s.hbm_bytes_per_s, base.hbm_bytes_per_s) * ratio(s.model_hbm_bytes_per_s, base.model_hbm_bytes_per_s);
        let device_bytes_per_s = (base.model_hbm_bytes_per_s as f64 * hbm_scale).round() as u64;
        let per_cycle = hbm_scale * base.model_clock_mhz as f64 * 1e6 / clock_hz;
        let hbm = HbmRates {
            chip_bytes_per_s: s.hbm_bytes_per_s,
            device_bytes_per_s,
            op_stream_bytes_per_cycle: cal.params.mm_hbm_bytes_per_cycle * per_cycle,
            hlo_stream_bytes_per_cycle: device_bytes_per_s as f64 / clock_hz,
        };
        Ok(ChipModel {
            name: cal.name,
            clock_hz,
            mxu: MxuGeometry { width: dim, count },
            scoped_vmem_bytes: cal.scoped_vmem_bytes,
            matvec_on_mxu: cal.matvec_on_mxu,
            vmem_intermediates: cal.vmem_intermediates,
            prefetch_budget_bytes: cal.prefetch_budget_bytes,
            megacore: s.megacore,
            device_tensorcores: s.model_device_tensorcores.max(1),
            vmem_bytes: s.vmem_bytes_per_tc,
            cmem_bytes: s.cmem_bytes,
            hbm,
            params: cal.params,
        })
    }

    /// The calibrated part, as stored in `calibration.json`.
    pub fn calibrated(&self) -> CalibratedChip {
        CalibratedChip {
            name: self.name.clone(),
            scoped_vmem_bytes: self.scoped_vmem_bytes,
            matvec_on_mxu: self.matvec_on_mxu,
            prefetch_budget_bytes: self.prefetch_budget_bytes,
            vmem_intermediates: self.vmem_intermediates,
            params: self.params.clone(),
        }
    }

    /// Nanoseconds for `cycles` at this chip's clock.
    pub fn cycles_to_ns(&self, cycles: u64) -> f64 {
        cycles as f64 * 1e9 / self.clock_hz
    }

    /// Peak MXU multiply-accumulates per cycle for bf16.
    pub fn mxu_macs_per_cycle(&self) -> u64 {
        self.mxu.width * self.mxu.width * self.mxu.count
    }
}

/// `v5e:2x2` -> `v5e`, `TPU v4` -> `v4`, `TPU7x`/`7x`/`ironwood` -> `tpu7x`, `trillium` -> `v6e`.
pub fn normalize_chip_name(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    let base = lower.split(':').next().unwrap_or("").trim();
    let base = base.strip_prefix("tpu ").unwrap_or(base).trim();
    match base {
        "7x" | "tpu7x" | "ironwood" | "tpu 7x" => "tpu7x".to_string(),
        "trillium" | "v6" | "v6e" => "v6e".to_string(),
        "v5lite" | "v5 lite" | "v5litepod" => "v5e".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_load_and_names_normalize() {
        for name in CHIP_NAMES {
            let c = ChipModel::preset(name).unwrap();
            assert_eq!(&c.name, name);
            assert!(c.clock_hz > 5e8);
            assert_eq!(
                c.mxu_macs_per_cycle() * 2,
                Chip::preset(name).unwrap().spec.model_peak_flops_per_cycle
            );
        }
        assert_eq!(ChipModel::preset("v5e:2x2").unwrap().name, "v5e");
        assert_eq!(ChipModel::preset("TPU v4").unwrap().name, "v4");
        assert!(matches!(ChipModel::preset("v9"), Err(OpError::UnknownChip { .. })));
    }
}
