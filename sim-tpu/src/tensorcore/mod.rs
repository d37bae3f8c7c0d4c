//! The TensorCore model: ops lowered to windowed loops (DMA in, MXU/VPU work on padded tiles, DMA out), calibrated
//! against the XLA TPU compiler cost model.
//!
//! Entry point: [`cost`]. An [`OpSpec`] is exactly the `{"op": ..., "params": {...}}` of the compiler calibration
//! records; a [`ChipModel`] holds a generation's MXU geometry, clock, scoped VMEM and fitted constants.
//!
//! How an op is costed:
//! 1. [`lower`]: the op becomes the kernels the compiler emits (one fusion for most ops; a convolution with narrow
//!    channels adds relayout copies; M = 1 matmuls are VPU reduce/loop fusions except on tpu7x). Every operand is
//!    sized in its TPU layout ([`padding`]: dim order with least padding, first-tile padding), so HBM bytes and
//!    VPU work are counted on padded tiles.
//! 2. [`cost`]: a VPU kernel runs resident in VMEM when its operands fit (the compiler prefetches them whole) or
//!    as a window pipeline from HBM, at per-generation cycles per 1024 padded elements for its class. An MXU
//!    kernel searches window sizes (rows, columns, contracting blocks) that fit the scoped VMEM double-buffered,
//!    as the compiler's window search does, and takes the cheapest: per window the slowest of DMA-in (windows
//!    reused between consecutive iterations are not fetched again), MXU passes (rows x K blocks x N blocks /
//!    MXUs, int8/fp8 at their speed-ups) plus the epilogue on the VPU, and DMA-out; plus a launch cost.
//! 3. [`calibration`]: the constants in `calibration.json` are fitted to the compiler's `total_estimated_cycles`
//!    (`cargo run --release -p sim-tpu --example tensorcore_fit`); `--example tensorcore_calibration` prints the
//!    error tables and the test `tests/tensorcore_calibration.rs` asserts the targets.
//!
//! ```
//! use sim_tpu::tensorcore::{cost, ChipModel, OpSpec};
//! let op = OpSpec::from_json(r#"{"op":"matmul","params":{"M":4096,"K":4096,"N":4096,"dtype":"bfloat16"}}"#).unwrap();
//! let c = cost(&op, &ChipModel::preset("v5e").unwrap()).unwrap();
//! assert!(c.cycles > 1_000_000 && c.flops == 2 * 4096u64.pow(3));
//! ```

pub mod calibration;
pub mod chip;
pub mod conv;
pub mod cost;
pub mod gather;
pub mod intermediates;
pub mod lower;
pub mod narrow;
pub mod padding;
pub mod spec;
pub mod split;
pub mod stationary;

pub use chip::{CalibratedChip, Calibration, ChipModel, HbmRates, MxuGeometry, TcParams, CHIP_NAMES};
pub use cost::{Bound, KernelCost, OpCost, Phase, Unit};
pub use spec::{Dtype, OpSpec, OP_NAMES};

/// Errors from parsing, validating or costing an op.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum OpError {
    /// The text is not a JSON object.
    #[error("op spec is not valid JSON: {reason}")]
    Parse {
        /// Parser message.
        reason: String,
    },
    /// `op` names no known op.
    #[error("field `op`: unknown op `{op}` (known: {})", OP_NAMES.join(", "))]
    UnknownOp {
        /// The name given.
        op: String,
    },
    /// A field is missing, has the wrong type, or an invalid value.
    #[error("field `{field}`: {reason}")]
    InvalidParam {
        /// Path of the field, e.g. `params.shape[1]`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// No preset for this chip.
    #[error("unknown chip `{chip}` (known: {})", CHIP_NAMES.join(", "))]
    UnknownChip {
        /// The name given.
        chip: String,
    },
}

/// Lowers a validated op for `chip` (convolutions in [`conv`], the rest in [`lower`]); also returns its FLOPs.
fn lower_op(op: &spec::Checked, chip: &ChipModel) -> (Vec<lower::Kernel>, u64) {
    match *op {
        spec::Checked::Conv {
            input,
            kernel,
            stride,
            padding,
            dtype,
        } => conv::lower_conv(input, kernel, stride, padding, dtype),
        _ => lower::lower(op, chip),
    }
}

/// The kernels `op` lowers to on `chip`, with their padded-tile work, before timing.
pub fn kernels(op: &OpSpec, chip: &ChipModel) -> Result<Vec<lower::Kernel>, OpError> {
    Ok(lower_op(&op.check()?, chip).0)
}

/// Costs `op` on `chip`: cycles, time, FLOPs, HBM bytes (padded and logical), VMEM, bound and phases.
pub fn cost(op: &OpSpec, chip: &ChipModel) -> Result<OpCost, OpError> {
    let checked = op.check()?;
    let (kernels, flops) = lower_op(&checked, chip);
    let held = stationary::stationary(&checked);
    let tiling = narrow::narrow(&checked);
    // A convolution's kernels are a chain (each reads the previous one's result); other ops' kernels each read
    // entry parameters. A column-blocked convolution's copies move its blocks on the VPU wherever they lie
    // (C25.conv2d_nhwc.005 and .008: 3,100-5,900 cycles between `S(1)` arrays on v5e and v6e), so its chain is
    // left as it is.
    let placements = match checked {
        spec::Checked::Conv {
            input, kernel, dtype, ..
        } if !conv::column_blocked(input, kernel, dtype) => intermediates::place(&kernels, chip),
        _ => vec![intermediates::Placement::default(); kernels.len()],
    };
    let mut hbm_bytes = 0;
    let mut hbm_bytes_unpadded = 0;
    let mut vmem_bytes = 0;
    let mut costs = Vec::with_capacity(kernels.len());
    for (k, &at) in kernels.iter().zip(&placements) {
        let kc = if intermediates::is_vmem_copy(k, at) {
            intermediates::vmem_copy_cost(k, chip)
        } else {
            hbm_bytes += k.in_bytes + k.out_bytes;
            cost::time_kernel_with(k, chip, held, tiling, at.residency())
        };
        hbm_bytes_unpadded += k.unpadded_bytes;
        vmem_bytes = vmem_bytes.max(kc.vmem_bytes);
        costs.push(kc);
    }
    let cycles: u64 = costs.iter().map(|k| k.cycles).sum();
    let bound = costs
        .iter()
        .max_by_key(|k| k.cycles)
        .map(|k| k.bound)
        .unwrap_or(Bound::Launch);
    Ok(OpCost {
        cycles,
        time_ns: chip.cycles_to_ns(cycles),
        flops,
        hbm_bytes,
        hbm_bytes_unpadded,
        vmem_bytes,
        bound,
        kernels: costs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(s: &str) -> OpSpec {
        OpSpec::from_json(s).unwrap()
    }

    #[test]
    fn padded_bytes_follow_layouts() {
        let chip = ChipModel::preset("v4").unwrap();
        // f32[3,5] pads to one 4x128 tile: 2 KiB per array, 3 arrays for add.
        let c = cost(&op(r#"{"op":"add","params":{"shape":[3,5],"dtype":"float32"}}"#), &chip).unwrap();
        assert_eq!(c.hbm_bytes, 3 * 4 * 128 * 4);
        assert_eq!(c.hbm_bytes_unpadded, 3 * 15 * 4);
        assert_eq!(c.flops, 15);
    }

    #[test]
    fn bigger_matmuls_cost_more_and_are_mxu_bound() {
        for name in CHIP_NAMES {
            let chip = ChipModel::preset(name).unwrap();
            let small = cost(
                &op(r#"{"op":"matmul","params":{"M":1024,"K":1024,"N":1024,"dtype":"bfloat16"}}"#),
                &chip,
            )
            .unwrap();
            let big = cost(
                &op(r#"{"op":"matmul","params":{"M":8192,"K":8192,"N":8192,"dtype":"bfloat16"}}"#),
                &chip,
            )
            .unwrap();
            assert!(
                big.cycles > 100 * small.cycles / 2,
                "{name}: {} vs {}",
                big.cycles,
                small.cycles
            );
            assert_eq!(big.bound, Bound::Mxu, "{name}");
            let phases = big.phases();
            assert_eq!(phases.first().map(|p| p.unit), Some(Unit::Sequencer));
            let end = phases.iter().map(|p| p.start_cycle + p.cycles).max().unwrap();
            assert_eq!(end, big.cycles);
        }
    }
}
