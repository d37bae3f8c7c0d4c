//! The compiler's collective costs (`tools/shard-probe/`, `testdata/shard/collectives.jsonl.gz`) against the
//! slice model: each record's collective instruction, as the optimized module has it, costed by
//! `tpusim hlo --slice` on the record's topology; the split the figures are reported on.
//!
//! The latency-hiding scheduler prices a collective by bandwidth alone (linear in bytes, no fixed or hop
//! latency), so records are compared with the model's bandwidth term, at 1 MiB per device and more.

use serde::Deserialize;

use super::report::report_on_slice;
use super::CollectiveCost;
use crate::chips::Chip;
use crate::hlo::{HloError, HloModule};
use crate::topology::SliceShape;

/// One probe record (the fields the comparison reads).
#[derive(Clone, Debug, Deserialize)]
pub struct ProbeRecord {
    /// `chip:shape`, e.g. `v5p:2x2x2`.
    pub topology: String,
    /// Chip preset name.
    pub chip: String,
    /// Collective kind as the opcode names it.
    pub kind: String,
    /// Mesh axes (z, y, x, c) the collective ran over.
    pub axes: Vec<String>,
    /// Devices per group.
    pub group_size: u64,
    /// The f32 operand's bytes on each device.
    pub bytes_per_device: u64,
    /// The instruction as the optimized module has it (metadata and backend config cut).
    pub instruction: Option<String>,
    /// The compiler's algorithm (emitter/strategy).
    pub algorithm: Option<String>,
    /// The scheduler's cost, microseconds.
    pub scheduler_us: Option<f64>,
}

/// Which part of the split a record is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Seen by the fit.
    Fit,
    /// Held out by size (a size the fit never saw) on a fitted topology.
    HeldOutSize,
    /// On a topology the fit never saw.
    HeldOutTopology,
}

/// Topologies the fit sees: the smallest of each chip family. Every other topology is held out.
pub const FIT_TOPOLOGIES: &[&str] = &["v5p:2x2x1", "v4:2x2x2", "v5e:2x2", "v6e:2x2", "tpu7x:2x2x1"];

impl ProbeRecord {
    /// The record's part of the split: sizes of 16^k bytes (1, 16, 256 MiB) are fitted, the others held out.
    pub fn part(&self) -> Part {
        if !FIT_TOPOLOGIES.contains(&self.topology.as_str()) {
            Part::HeldOutTopology
        } else if self.bytes_per_device.trailing_zeros().is_multiple_of(4) {
            Part::Fit
        } else {
            Part::HeldOutSize
        }
    }

    /// Whether the scheduler priced it (reduce-scatter and async permutes it leaves at one cycle) and the
    /// recorded instruction is of the probed kind (a multi-dimension reduce-scatter is an all-reduce and a
    /// slice in the optimized module: not compared).
    pub fn priced(&self) -> bool {
        let kind_ok = self
            .instruction
            .as_deref()
            .is_some_and(|i| i.contains(&format!(" {}(", self.kind)) || i.contains(&format!(" {}-start(", self.kind)));
        self.scheduler_us.is_some_and(|u| u > 0.01) && kind_ok
    }

    /// A module holding the record's collective on an f32 operand of the probed size.
    pub fn module_text(&self) -> Option<String> {
        let ins = self.instruction.as_deref()?;
        let (_, rhs) = ins.split_once(" = ")?;
        // The opcode's parenthesis, not the layout's `T(8,128)`.
        let at = rhs.find(&format!(" {}", self.kind))?;
        let open = at + rhs[at..].find('(')?;
        let close = open + rhs[open..].find(')')?;
        let head = &rhs[..open];
        let attrs: Vec<&str> = rhs[close + 1..]
            .split(", ")
            .filter(|a| !a.is_empty() && !a.starts_with("to_apply"))
            .collect();
        let rows = self.bytes_per_device / 4096;
        Some(format!(
            "HloModule probe\n\nsum {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
             ENTRY main {{\n  p = f32[{rows},1024]{{1,0}} parameter(0)\n  ROOT c = {head}(p){}{}\n}}\n",
            if attrs.is_empty() { "" } else { ", " },
            attrs.join(", ") + if self.kind.contains("reduce") { ", to_apply=sum" } else { "" }
        ))
    }

    /// The model's cost of the record's collective on its topology.
    pub fn predict(&self, chip: &Chip) -> Result<CollectiveCost, HloError> {
        let text = self
            .module_text()
            .ok_or_else(|| HloError::Unsupported(format!("{}: no instruction", self.topology)))?;
        let module = HloModule::parse(&text)?;
        let shape = self.topology.split_once(':').map_or("", |x| x.1);
        let slice = SliceShape::from_text(&chip.spec, shape).map_err(|e| HloError::Unsupported(e.to_string()))?;
        let r = report_on_slice(&module, chip, &slice, None)?;
        r.collectives
            .into_iter()
            .next()
            .ok_or_else(|| HloError::Unsupported(format!("{}: no collective read", self.topology)))
    }
}

/// Median and 90th percentile of absolute relative errors.
pub fn error_quantiles(errors: &[f64]) -> (f64, f64) {
    let mut e: Vec<f64> = errors.iter().map(|x| x.abs()).collect();
    e.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| {
        if e.is_empty() {
            return f64::NAN;
        }
        let i = ((e.len() - 1) as f64 * p).round() as usize;
        e[i]
    };
    (q(0.5), q(0.9))
}
