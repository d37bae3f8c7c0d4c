//! `tpusim op --json`: the cost of one op on a chip, from a spec in the compiler calibration schema
//! (`{"op": ..., "params": {...}}`).

use anyhow::Context;
use serde::Serialize;
use sim_tpu::chips::Chip;
use sim_tpu::tensorcore::{self, ChipModel, OpSpec};

/// The per-op result every op family reports, in the `--json` schema.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpSummary {
    /// Cycles of the unit's clock.
    pub cycles: u64,
    /// Wall time, nanoseconds.
    pub time_ns: f64,
    /// Nominal FLOPs.
    pub flops: u64,
    /// HBM bytes on padded (tiled) sizes.
    pub hbm_bytes: u64,
    /// HBM bytes on logical sizes.
    pub hbm_bytes_unpadded: u64,
    /// Peak VMEM (or local memory) of the op's windows.
    pub vmem_bytes: u64,
    /// What limits the op: MXU, VPU, HBM, LAUNCH (or another unit name for other op families).
    pub bound: String,
    /// The 80% band from held-out residuals (`total_cycles_low`, `total_cycles_high`) and the share of cycles
    /// outside the calibrated domain (0 or 1 for one op).
    #[serde(flatten)]
    pub band: sim_tpu::band::TotalBand,
    /// The op's calibrated-domain verdict (its class is its op name).
    pub domain: Option<sim_tpu::band::KernelDomain>,
    /// Kernels and their cycles, for the text output.
    #[serde(skip)]
    pub kernels: Vec<(String, u64, String)>,
}

/// An op family costed outside the op model (e.g. gathers: `sc_gather`, `tc_gather`).
/// Register one in [`EXTERNAL_OPS`]; `cost` gets the whole spec object, the chip (preset with its
/// overrides) and its TensorCore model.
pub struct ExternalOps {
    /// Op names this family handles.
    pub names: &'static [&'static str],
    /// Costs one spec; errors name the offending field.
    pub cost: fn(spec: &serde_json::Value, chip: &Chip, model: &ChipModel) -> anyhow::Result<OpSummary>,
}

/// Op families dispatched before the TensorCore model.
pub const EXTERNAL_OPS: &[ExternalOps] = &[ExternalOps {
    names: &["sc_gather", "tc_gather"],
    cost: gather_cost,
}];

/// Gathers of `rows` rows of `row_bytes` on one device (the model lives in `workloads::gather`).
fn gather_cost(spec: &serde_json::Value, chip: &Chip, model: &ChipModel) -> anyhow::Result<OpSummary> {
    use workloads::gather::{gather_cost, GatherSite};
    let op = spec["op"].as_str().unwrap_or("");
    let params = spec
        .get("params")
        .ok_or_else(|| anyhow::anyhow!("field `params`: missing"))?;
    let field = |k: &str| -> anyhow::Result<u64> {
        let v = params
            .get(k)
            .ok_or_else(|| anyhow::anyhow!("field `params.{k}`: missing"))?;
        v.as_u64()
            .filter(|&x| x > 0)
            .ok_or_else(|| anyhow::anyhow!("field `params.{k}`: must be a positive integer, got {v}"))
    };
    let (rows, row_bytes) = (field("rows")?, field("row_bytes")?);
    // The op arrays' bound: at most 2^40 rows, and bytes that a model count holds.
    const MAX_ROWS: u64 = 1 << 40;
    const MAX_BYTES: u64 = 1 << 50;
    if rows > MAX_ROWS || rows.checked_mul(row_bytes).is_none_or(|b| b > MAX_BYTES) {
        anyhow::bail!(
            "field `params`: rows = {rows} x row_bytes = {row_bytes} is too large: at most {MAX_ROWS} rows and {MAX_BYTES} bytes in all"
        );
    }
    let site = if op == "sc_gather" {
        GatherSite::SparseCore
    } else {
        GatherSite::TensorCore
    };
    let g = gather_cost(chip, model, site, rows, row_bytes)?;
    Ok(OpSummary {
        cycles: g.cycles,
        time_ns: g.time_ns,
        flops: 0,
        hbm_bytes: g.hbm_bytes,
        hbm_bytes_unpadded: g.hbm_bytes_unpadded,
        vmem_bytes: 0,
        bound: g.bound.as_str().into(),
        band: Default::default(),
        domain: None,
        kernels: Vec::new(),
    })
}

fn tensorcore_summary(spec: &serde_json::Value, chip: &ChipModel) -> anyhow::Result<OpSummary> {
    let op = OpSpec::from_value(spec)?;
    let c = tensorcore::cost(&op, chip)?;
    let bound = serde_json::to_value(c.bound)?.as_str().unwrap_or("").to_string();
    Ok(OpSummary {
        cycles: c.cycles,
        time_ns: c.time_ns,
        flops: c.flops,
        hbm_bytes: c.hbm_bytes,
        hbm_bytes_unpadded: c.hbm_bytes_unpadded,
        vmem_bytes: c.vmem_bytes,
        bound,
        band: Default::default(),
        domain: None,
        kernels: c
            .kernels
            .iter()
            .map(|k| {
                (
                    k.name.clone(),
                    k.cycles,
                    serde_json::to_value(k.bound)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default(),
                )
            })
            .collect(),
    })
}

/// Costs one spec text on `chip` (a preset with any overrides) whose TensorCore model is `model`
/// ([`ChipModel::for_chip`] of it): external families first, then the op model (the `tpusim op
/// --json` object).
pub fn cost_spec(text: &str, chip: &Chip, model: &ChipModel) -> crate::Result<OpSummary> {
    Ok(cost_spec_inner(text, chip, model)?)
}

/// The chip `tpusim op` costs on: the preset `chip_name` (topology spellings such as `v5p:2x2`
/// accepted) with a chip file's overrides, and its TensorCore model.
pub fn op_chip(chip_name: &str, chip_file: Option<&serde_json::Value>) -> crate::Result<(Chip, ChipModel)> {
    let name = tensorcore::chip::normalize_chip_name(chip_name);
    let chip = Chip::load(Some(&name), chip_file).context("option --chip")?;
    let model = ChipModel::for_chip(&chip).context("option --chip")?;
    Ok((chip, model))
}

/// Costs one spec on a chip preset (`v5e`, `v5p:2x2`, ...).
pub fn cost_on_preset(text: &str, chip_name: &str) -> crate::Result<OpSummary> {
    let (chip, model) = op_chip(chip_name, None)?;
    cost_spec(text, &chip, &model)
}

fn cost_spec_inner(text: &str, chip: &Chip, model: &ChipModel) -> anyhow::Result<OpSummary> {
    let value: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("op spec is not valid JSON: {text}"))?;
    let op_name = value.get("op").and_then(|v| v.as_str()).unwrap_or("");
    let mut s = match EXTERNAL_OPS.iter().find(|e| e.names.contains(&op_name)) {
        Some(ext) => (ext.cost)(&value, chip, model)?,
        None => tensorcore_summary(&value, model)?,
    };
    // Counts that overflowed (saturated) or came out empty are refused, never printed as a cost.
    if s.cycles == 0 || s.cycles == u64::MAX || !(s.time_ns.is_finite() && s.time_ns > 0.0) {
        anyhow::bail!(
            "op `{op_name}`: its sizes give {} cycles, which the model cannot cost (sizes whose products overflow, or an empty op); use smaller `params`",
            s.cycles
        );
    }
    // Op families outside the TensorCore model have no held-out records: outside the domain, widest band.
    let (band, domain) = sim_tpu::band::op_band(op_name, s.hbm_bytes, s.flops, s.cycles);
    s.band = band;
    s.domain = Some(domain);
    Ok(s)
}
