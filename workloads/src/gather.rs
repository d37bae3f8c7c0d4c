//! Embedding gathers on one device: on its SparseCores (`sc_gather`) or as a TensorCore `take`
//! (`tc_gather`). `tpusim op` and the step builder's TensorCore tables share this model.

use sim_tpu::chips::Chip;

/// What limits a gather.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherBound {
    /// The SparseCore tiles' DMA engines.
    ScDma,
    /// The TensorCore's row-DMA issue rate.
    TcIssue,
}

impl GatherBound {
    /// The name `tpusim op` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            GatherBound::ScDma => "SC_DMA",
            GatherBound::TcIssue => "TC_ISSUE",
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
}

/// A gather of `rows` rows of `row_bytes` on one compiler device of `chip`.
pub fn gather_cost(chip: &Chip, site: GatherSite, rows: u64, row_bytes: u64) -> Result<GatherCost, GatherError> {
    let c = &chip.spec;
    let device_tcs = if c.megacore { c.tensorcores_per_chip } else { 1 };
    let hbm_per_device = c.hbm_bytes_per_s * device_tcs as u64 / c.tensorcores_per_chip.max(1) as u64;
    let (ns, bytes, clock_hz, bound) = match site {
        GatherSite::SparseCore => {
            if c.sparsecores_per_chip == 0 {
                return Err(GatherError::NoSparseCores(c.name.clone()));
            }
            let p = crate::program::sc_params(chip);
            let (ns, bytes) =
                sim_sparsecore::model::sc_gather_ns(&p, c.sc_per_device(), rows, row_bytes, hbm_per_device);
            (ns, bytes, p.clock_hz, GatherBound::ScDma)
        }
        GatherSite::TensorCore => {
            let hz = c.tc_clock_mhz * 1_000_000;
            let (ns, bytes) = sim_sparsecore::model::tc_gather_ns(
                hz,
                chip.params.tc_gather_cycles_per_row(),
                rows,
                row_bytes,
                hbm_per_device,
            );
            (ns, bytes, hz, GatherBound::TcIssue)
        }
    };
    Ok(GatherCost {
        cycles: (ns * clock_hz as f64 / 1e9).round() as u64,
        time_ns: ns,
        hbm_bytes: bytes,
        hbm_bytes_unpadded: rows.saturating_mul(row_bytes),
        bound,
    })
}
