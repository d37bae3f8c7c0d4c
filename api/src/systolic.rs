//! `tpusim systolic`: SCALE-Sim-compatible compute cycles, as COMPUTE_REPORT.csv text or `--json`.

use std::path::Path;

use anyhow::Context;
use serde_json::{json, Value};
use sim_tpu::systolic::{compute, parse_config, parse_topology, ComputeReport};

/// The compute report of every layer of a SCALE-Sim topology on an array config (files as SCALE-Sim
/// reads them: `.cfg` and `.csv`).
pub fn compute_report(cfg: &Path, topology: &Path) -> crate::Result<Vec<ComputeReport>> {
    let read = |p: &Path| std::fs::read_to_string(p).with_context(|| p.display().to_string());
    let config = parse_config(&read(cfg)?).with_context(|| cfg.display().to_string())?;
    let layers = parse_topology(&read(topology)?).with_context(|| topology.display().to_string())?;
    let mut out = Vec::with_capacity(layers.len());
    for (i, l) in layers.iter().enumerate() {
        out.push(compute(&config, l, i).map_err(anyhow::Error::from)?);
    }
    Ok(out)
}

/// SCALE-Sim's COMPUTE_REPORT.csv, byte for byte in its format.
pub fn report_csv(rows: &[ComputeReport]) -> String {
    let mut csv =
        String::from("LayerID, Total Cycles, Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %,\n");
    for r in rows {
        csv.push_str(&format!(
            "{}, {}, {}, {:.4}, {:.4}, {:.4},\n",
            r.layer_id,
            r.total_cycles,
            r.stall_cycles,
            r.overall_util_pct,
            r.mapping_efficiency_pct,
            r.compute_util_pct
        ));
    }
    csv
}

/// The `--json` object: `{"layers": [{"layer_id", "total_cycles", "stall_cycles", "overall_util_pct",
/// "mapping_efficiency_pct", "compute_util_pct"}], "total_cycles"}`.
pub fn report_json(rows: &[ComputeReport]) -> Value {
    json!({
        "layers": rows,
        "total_cycles": rows.iter().map(|r| r.total_cycles).fold(0u64, u64::saturating_add),
    })
}
