//! Published measurements of collectives (`testdata/shard/published.json`) against the slice model: each
//! point's all-gather as a module, costed by `tpusim hlo --slice` on the point's slice, bandwidth and latency.
//!
//! The compiler's scheduler prices bandwidth only, so below 1 MiB per device these measurements are the check.

use serde::Deserialize;

use super::report::report_on_slice;
use crate::chips::Chip;
use crate::hlo::{HloError, HloModule};
use crate::topology::SliceShape;

/// What a published point is used for.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A constant was set on it: reproducing it is no agreement.
    CalibratedOn,
    /// Compared, not fitted.
    HeldOut,
    /// Measures a mechanism the model does not represent (stated in `note`); reported only.
    NotComparable,
}

/// One published measurement.
#[derive(Clone, Debug, Deserialize)]
pub struct Point {
    /// Short name.
    pub id: String,
    /// Where it is published.
    pub url: String,
    /// The figure, table or sentence it is read from.
    pub figure: String,
    /// Chip preset.
    pub chip: String,
    /// Slice shape.
    pub slice: String,
    /// Collective kind (`all-gather`, `collective-permute`).
    pub kind: String,
    /// Per-device operand shape, e.g. `bf16[64,256]`.
    pub operand: String,
    /// Per-device result shape.
    pub result: String,
    /// Replica groups as the module writes them (empty for a permute).
    pub replica_groups: String,
    /// A permute's `source_target_pairs` as the module writes them.
    #[serde(default)]
    pub source_target_pairs: Option<String>,
    /// Measured time of the collective, microseconds.
    pub measured_us: f64,
    /// What the point is used for.
    pub role: Role,
    /// Conditions of the measurement.
    pub note: String,
}

/// The file: its points and what was looked for and not found.
#[derive(Clone, Debug, Deserialize)]
pub struct Published {
    /// What the file holds.
    pub about: String,
    /// What was searched for and not found.
    pub not_found: String,
    /// The measurements.
    pub points: Vec<Point>,
}

/// The model's time for a point: bandwidth and latency (hops and launch), microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Predicted {
    /// Bytes over bandwidth on the busiest link.
    pub bandwidth_us: f64,
    /// Hops and launch.
    pub latency_us: f64,
}

impl Predicted {
    /// The whole collective.
    pub fn total_us(&self) -> f64 {
        self.bandwidth_us + self.latency_us
    }
}

impl Point {
    /// A module holding the point's collective on its per-device operand.
    pub fn module_text(&self) -> String {
        let layout = |shape: &str| {
            let rank = shape.matches(',').count() + 1;
            let dims: Vec<String> = (0..rank).rev().map(|d| d.to_string()).collect();
            format!("{shape}{{{}}}", dims.join(","))
        };
        let who = match &self.source_target_pairs {
            Some(pairs) => format!("source_target_pairs={pairs}"),
            None => format!(
                "replica_groups={}, dimensions={{0}}, use_global_device_ids=true",
                self.replica_groups
            ),
        };
        format!(
            "HloModule published\n\nENTRY main {{\n  p = {} parameter(0)\n  ROOT c = {} {}(p), channel_id=1, {who}\n}}\n",
            layout(&self.operand),
            layout(&self.result),
            self.kind,
        )
    }

    /// The model's time for the point on its slice.
    pub fn predict(&self, chip: &Chip) -> Result<Predicted, HloError> {
        let module = HloModule::parse(&self.module_text())?;
        let slice = SliceShape::from_text(&chip.spec, &self.slice).map_err(|e| HloError::Unsupported(e.to_string()))?;
        let report = report_on_slice(&module, chip, &slice, None)?;
        let c = report
            .collectives
            .first()
            .ok_or_else(|| HloError::Unsupported(format!("{}: no collective read", self.id)))?;
        let us = |cycles: u64| cycles as f64 / chip.spec.model_clock_mhz as f64;
        Ok(Predicted {
            bandwidth_us: us(c.bandwidth_cycles),
            latency_us: us(c.latency_cycles),
        })
    }
}

/// Below this many bytes per device a point is in the latency regime, where the bound is 1.5x of the
/// measurement (above it the compiler's scheduler is the reference for the bandwidth term).
pub const SMALL_MESSAGE_BYTES: u64 = 1 << 20;

impl Point {
    /// Bytes each device sends or receives: the larger of its operand and result (an all-gather's result).
    pub fn bytes_per_device(&self) -> Result<u64, HloError> {
        let bytes = |shape: &str| -> Result<u64, HloError> {
            let parsed = sim_core::layout::parse_shape(shape)
                .map_err(|e| HloError::Unsupported(format!("{}: shape `{shape}`: {e}", self.id)))?;
            Ok(match parsed {
                sim_core::layout::Shape::Array(a) => a.unpadded_bytes().unwrap_or(0),
                _ => 0,
            })
        };
        Ok(bytes(&self.operand)?.max(bytes(&self.result)?))
    }

    /// Measured over predicted time.
    pub fn ratio(&self, chip: &Chip) -> Result<f64, HloError> {
        Ok(self.measured_us / self.predict(chip)?.total_us())
    }
}

/// Reads `published.json`.
pub fn parse(text: &str) -> Result<Published, serde_json::Error> {
    serde_json::from_str(text)
}
