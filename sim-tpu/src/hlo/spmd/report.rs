//! `tpusim hlo --slice`: the per-device report without the collectives' kernels, plus the slice, each
//! collective and the step.

use super::super::partition::{self, PartitionInfo};
use super::super::{cost_module, report_from_cost, HloError, HloModule, HloReport};
use super::mesh::Mesh;
use super::{cost_on_slice, CollectiveCost, SliceInfo, StepCost};
use crate::chips::Chip;
use crate::tensorcore::ChipModel;
use crate::topology::SliceShape;

/// A module on a slice: the per-device report (kernels, memory, band; collectives taken out of the kernels
/// and of the unmodelled opcodes) and the slice's collectives and step.
#[derive(Clone, Debug)]
pub struct SliceReport {
    /// Per-device report.
    pub device: HloReport,
    /// The slice.
    pub slice: SliceInfo,
    /// Each collective.
    pub collectives: Vec<CollectiveCost>,
    /// The step.
    pub step: StepCost,
    /// When the module was annotated: what the partitioner inserted and warned of.
    pub partition: Option<PartitionInfo>,
}

impl serde::Serialize for SliceReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let serde_json::Value::Object(mut m) = serde_json::to_value(&self.device).map_err(S::Error::custom)? else {
            return Err(S::Error::custom("a report is a JSON object"));
        };
        let v = |x: &dyn crate::hlo::report::erased::ToValue| x.to_value().map_err(S::Error::custom);
        m.insert("slice".into(), v(&self.slice)?);
        m.insert("collectives".into(), v(&self.collectives)?);
        m.insert("step".into(), v(&self.step)?);
        if let Some(p) = &self.partition {
            m.insert("partition".into(), v(p)?);
        }
        m.serialize(s)
    }
}

/// Costs `module` per device on `chip` and its collectives on `slice`.
pub fn report_on_slice(
    module: &HloModule,
    chip: &Chip,
    slice: &SliceShape,
    mesh: Option<&Mesh>,
) -> Result<SliceReport, HloError> {
    let model = ChipModel::for_chip(chip).map_err(|e| HloError::Unsupported(e.to_string()))?;
    let mut cost = cost_module(module, &model)?;
    let mut sc = cost_on_slice(module, &cost, chip, slice, model.clock_hz)?;
    if let Some(m) = mesh {
        if m.devices() != sc.slice.devices {
            return Err(HloError::Unsupported(format!(
                "--mesh {m} names {} devices, the slice {} has {}",
                m.devices(),
                sc.slice.shape,
                sc.slice.devices
            )));
        }
        for c in &mut sc.collectives {
            c.mesh_axes = Some(m.axes_spanned(&c.group_ids));
        }
    }
    // The collectives' kernels leave the per-device kernels (and the unmodelled counts): the slice costs them.
    let mut removed = 0u64;
    for &k in sc.collective_kernels.iter().rev() {
        removed = removed.saturating_add(cost.kernels.remove(k).cycles);
    }
    for (op, n) in &sc.collective_opcodes {
        if let Some(u) = cost.unmodelled.get_mut(op) {
            *u = u.saturating_sub(*n);
        }
    }
    cost.unmodelled.retain(|_, n| *n > 0);
    cost.total_cycles = cost.total_cycles.saturating_sub(removed);
    cost.time_us = cost.total_cycles as f64 * 1e6 / model.clock_hz;
    // Kernels start where the step's schedule puts them.
    let mut kept = 0;
    for (i, &s) in sc.kernel_starts.iter().enumerate() {
        if !sc.collective_kernels.contains(&i) {
            if let Some(k) = cost.kernels.get_mut(kept) {
                k.start_cycle = s;
            }
            kept += 1;
        }
    }
    let mut device = report_from_cost(cost, chip);
    device.warnings.extend(sc.warnings);
    Ok(SliceReport {
        device,
        slice: sc.slice,
        collectives: sc.collectives,
        step: sc.step,
        partition: None,
    })
}

/// [`report_on_slice`] of the module, partitioned first when it carries `sharding={...}` annotations
/// ([`partition::is_annotated`]); `text` is its source, for line numbers.
pub fn report_on_slice_partitioned(
    module: &HloModule,
    text: &str,
    chip: &Chip,
    slice: &SliceShape,
    mesh: Option<&Mesh>,
) -> Result<SliceReport, HloError> {
    if !partition::is_annotated(module) {
        return report_on_slice(module, chip, slice, mesh);
    }
    let devices = slice.chips().saturating_mul(u64::from(super::devices_per_chip(chip)));
    let w = partition::windowed::WindowedEinsum::of(
        chip.spec.peak_bf16_flops,
        chip.spec.ici_links,
        chip.spec.ici_bytes_per_s_per_link,
    );
    let p = partition::partition_with(module, devices, mesh.map(|m| m.axes.as_slice()), text, Some(w))?;
    let mut r = report_on_slice(&p.module, chip, slice, mesh)?;
    r.device.warnings.extend(p.info.warnings.iter().cloned());
    r.partition = Some(p.info);
    Ok(r)
}

impl SliceReport {
    /// The step as a Chrome trace: kernels on a TensorCore thread, collectives on an ICI thread, at their
    /// scheduled cycles.
    pub fn chrome_trace(&self, clock_hz: f64) -> serde_json::Value {
        let us = |c: u64| c as f64 * 1e6 / clock_hz;
        let mut events = Vec::new();
        for (tid, name) in [(1, "TensorCore"), (2, "ICI")] {
            events.push(
                serde_json::json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid,
                "args": {"name": name}}),
            );
        }
        for k in &self.device.cost.kernels {
            events.push(serde_json::json!({"ph": "X", "name": k.name, "pid": 1, "tid": 1,
                "ts": us(k.start_cycle), "dur": us(k.cycles)}));
        }
        for c in &self.collectives {
            events.push(serde_json::json!({"ph": "X", "name": c.name, "pid": 1, "tid": 2,
                "ts": us(c.start_cycle), "dur": us(c.cycles),
                "args": {"kind": c.kind.name(), "bytes": c.bytes, "algorithm": c.algorithm}}));
        }
        serde_json::json!({ "traceEvents": events })
    }
}
