//! Embedding gathers on one device: on its SparseCores (`sc_gather`) or as a TensorCore `take`
//! (`tc_gather`, the model in `sim_tpu::tensorcore::gather`). `tpusim op` costs one device's gather
//! here; a step's TensorCore tables call the TensorCore model directly, per TensorCore.

use sim_tpu::chips::Chip;
use sim_tpu::tensorcore::gather::{tc_gather, GatherLimit, GatherOp};
use sim_tpu::tensorcore::ChipModel;

/// What limits a gather.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherBound {
    /// The SparseCore tiles' DMA engines.
    ScDma,
    /// The TensorCore's row-DMA issue rate.
    TcIssue,
    /// The TensorCore's HBM bandwidth.
    Hbm,
}

impl GatherBound {
    /// The name `tpusim op` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            GatherBound::ScDma => "SC_DMA",
            GatherBound::TcIssue => "TC_ISSUE",
            GatherBound::Hbm => "HBM",
        }
    }
}

/// Where a gather runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherSite {
    /// The device's SparseCores.
    SparseCore,
    /// The TensorCore (`jnp.take`).
    TensorCore,
}

/// The cost of one gather.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GatherCost {
    /// Cycles of the unit that runs it.
    pub cycles: u64,
    /// Time, ns.
    pub time_ns: f64,
    /// HBM bytes moved (granule-padded rows; read and write for a TensorCore take).
    pub hbm_bytes: u64,
    /// Bytes of the rows themselves.
    pub hbm_bytes_unpadded: u64,
    /// What limits it.
    pub bound: GatherBound,
}

/// Errors of a gather.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GatherError {
    /// The chip has no SparseCores.
    #[error("{0} has no SparseCores")]
    NoSparseCores(String),
    /// The TensorCore model has no gather constants for the chip.
    #[error("{0}")]
    Model(String),
}

/// A gather of `rows` rows of `row_bytes` on one compiler device of `chip` (`model` is its
/// TensorCore model, [`ChipModel::for_chip`] of the same chip).
pub fn gather_cost(
    chip: &Chip,
    model: &ChipModel,
    site: GatherSite,
    rows: u64,
    row_bytes: u64,
) -> Result<GatherCost, GatherError> {
    let c = &chip.spec;
    let (ns, bytes, cycles, bound) = match site {
        GatherSite::SparseCore => {
            if c.sparsecores_per_chip == 0 {
                return Err(GatherError::NoSparseCores(c.name.clone()));
            }
            let device_tcs = if c.megacore { c.tensorcores_per_chip } else { 1 };
            let hbm_per_device = model.hbm.chip_bytes_per_s * device_tcs as u64 / c.tensorcores_per_chip.max(1) as u64;
            let p = crate::program::sc_params(chip);
            let (ns, bytes) =
                sim_sparsecore::model::sc_gather_ns(&p, c.sc_per_device(), rows, row_bytes, hbm_per_device);
            let cycles = (ns * p.clock_hz as f64 / 1e9).round() as u64;
            (ns, bytes, cycles, GatherBound::ScDma)
        }
        GatherSite::TensorCore => {
            let g =
                tc_gather(model, GatherOp::Take, rows, row_bytes, 0).map_err(|e| GatherError::Model(e.to_string()))?;
            let bound = match g.limit {
                GatherLimit::Issue => GatherBound::TcIssue,
                GatherLimit::Hbm => GatherBound::Hbm,
            };
            let ns = g.cycles as f64 * 1e9 / model.clock_hz;
            (ns, g.hbm_bytes, g.cycles, bound)
        }
    };
    Ok(GatherCost {
        cycles,
        time_ns: ns,
        hbm_bytes: bytes,
        hbm_bytes_unpadded: rows.saturating_mul(row_bytes),
        bound,
    })
}
