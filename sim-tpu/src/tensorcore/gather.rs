//! Embedding rows gathered (`jnp.take`) or scatter-added into a dense gradient table
//! (`zeros.at[ids].add(rows)`) by one compiler device's TensorCores: `tpusim op`'s `tc_gather` and a
//! step's TensorCore tables share this model.
//!
//! Read off the compiler's own estimates (`tools/tc-gather-probe/probe.py`, records in
//! `testdata/tensorcore/gather.jsonl`):
//! - a take is one fusion walking the ids plus small index fusions (clamp, wrap): a fixed cost, then
//!   per row the longer of a row-DMA issue time and the row's bytes in and out at the device's HBM
//!   rate. It does not depend on the table's size.
//! - a scatter-add into a table-sized result writes the whole table (zeroed or copied) and adds the
//!   rows in place: its cost follows the table's bytes, not the ids; the compiler accumulates 16-bit
//!   tables in f32, so the table counts 4 bytes per element.
//!
//! The per-chip constants (`gather.json`) are fitted by `tools/tc-gather-probe/fit.py` on the fit split
//! of the records only (tables of 5,120 and 1,000,000 rows, and 2,048-wide rows).

use serde::Deserialize;

use super::chip::ChipModel;
use super::OpError;

/// Which way the rows go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherOp {
    /// Rows read from the table (`jnp.take`).
    Take,
    /// Row gradients added into a dense, table-sized gradient (`zeros.at[ids].add(rows)`).
    ScatterAdd,
}

/// What limits a TensorCore gather.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherLimit {
    /// The row DMAs' issue rate.
    Issue,
    /// HBM bandwidth (rows, or the table a scatter-add writes).
    Hbm,
}

/// The cost of one gather on one compiler device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcGatherCost {
    /// Cycles of the TensorCore clock ([`ChipModel::clock_hz`]), fixed cost included.
    pub cycles: u64,
    /// HBM bytes moved (rows read and written; a scatter-add's table written and read).
    pub hbm_bytes: u64,
    /// What limits it.
    pub limit: GatherLimit,
}

/// Fitted constants of one chip.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatherParams {
    /// Chip preset name.
    pub name: String,
    /// Where the values come from (`compiler: fitted on N records`, or `assumed: ...` with why).
    pub source: String,
    /// Fixed cycles: the gather fusion's and its index fusions' launch.
    pub launch_cycles: f64,
    /// Cycles between row DMAs (the issue floor per row).
    pub row_cycles: f64,
    /// Fraction of the device's HBM rate a take's row traffic reaches (0..=1).
    pub take_hbm_efficiency: f64,
    /// Fraction of the device's HBM rate a scatter-add's table pass reaches (0..=1).
    pub scatter_hbm_efficiency: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GatherFile {
    #[allow(dead_code)]
    source: String,
    chips: Vec<GatherParams>,
}

const GATHER_JSON: &str = include_str!("gather.json");

/// The fitted constants of `chip` (by its calibrated preset name).
pub fn gather_params(model: &ChipModel) -> Result<GatherParams, OpError> {
    let file: GatherFile = serde_json::from_str(GATHER_JSON).map_err(|e| OpError::InvalidParam {
        field: "tensorcore/gather.json".into(),
        reason: e.to_string(),
    })?;
    file.chips
        .into_iter()
        .find(|c| c.name == model.name)
        .ok_or_else(|| OpError::UnknownChip {
            chip: model.name.clone(),
        })
}

/// `rows` rows of `row_bytes` on one compiler device of `model`; a scatter-add adds them into a
/// dense gradient of `table_elements` elements.
pub fn tc_gather(
    model: &ChipModel,
    op: GatherOp,
    rows: u64,
    row_bytes: u64,
    table_elements: u64,
) -> Result<TcGatherCost, OpError> {
    let g = gather_params(model)?;
    let per_cycle = model.hbm.hlo_stream_bytes_per_cycle.max(1e-9);
    let (body, bytes, limit) = match op {
        GatherOp::Take => {
            let bytes = rows.saturating_mul(row_bytes).saturating_mul(2);
            let issue = rows as f64 * g.row_cycles;
            let hbm = bytes as f64 / (g.take_hbm_efficiency * per_cycle);
            let limit = if issue >= hbm {
                GatherLimit::Issue
            } else {
                GatherLimit::Hbm
            };
            (issue.max(hbm), bytes, limit)
        }
        GatherOp::ScatterAdd => {
            // The table written once and read back for the adds, in f32.
            let bytes = table_elements.saturating_mul(4).saturating_mul(2);
            (
                bytes as f64 / (g.scatter_hbm_efficiency * per_cycle),
                bytes,
                GatherLimit::Hbm,
            )
        }
    };
    Ok(TcGatherCost {
        cycles: (g.launch_cycles + body).ceil() as u64,
        hbm_bytes: bytes,
        limit,
    })
}
