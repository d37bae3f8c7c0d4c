//! `tpusim select`: kernels, precisions and formats for a small op graph, with the conversions inserted.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;
use sim_tpu::select::op_info;
use sim_tpu::tensorcore::ChipModel;

pub use sim_tpu::select::{Choice, Conversion, Graph, GraphOp, Selection};

/// A selection on a chip preset, with why each kernel differs from the request.
#[derive(Clone, Debug)]
pub struct SelectReport {
    /// The chip preset's name.
    pub chip: &'static str,
    /// The graph asked for.
    pub graph: Graph,
    /// The kernels chosen and the conversions inserted.
    pub selection: Selection,
    /// Per kernel, why it differs from the request (`as requested` when it does not).
    pub notes: Vec<String>,
}

/// Parses GRAPH.json text; `origin` (a path, or `graph`) names it in errors.
pub fn parse_graph(text: &str, origin: &str) -> crate::Result<Graph> {
    Ok(serde_json::from_str(text).with_context(|| origin.to_string())?)
}

/// Reads GRAPH.json.
pub fn read_graph(path: &Path) -> crate::Result<Graph> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    parse_graph(&text, &path.display().to_string())
}

/// Chooses kernels for `graph` on the chip preset `chip`.
pub fn select(graph: Graph, chip: &str) -> crate::Result<SelectReport> {
    let name = sim_tpu::chips::preset_name(chip).map_err(anyhow::Error::from)?;
    let model = ChipModel::preset(name).map_err(anyhow::Error::from)?;
    let selection = sim_tpu::select::select(&graph, &model, name).map_err(anyhow::Error::from)?;
    let notes = selection
        .kernels
        .iter()
        .zip(&graph.ops)
        .map(|(k, op)| note(op, k, name))
        .collect();
    Ok(SelectReport {
        chip: name,
        graph,
        selection,
        notes,
    })
}

/// `tpusim select --json`: the selection.
pub fn select_json(r: &SelectReport) -> crate::Result<Value> {
    Ok(serde_json::to_value(&r.selection).map_err(anyhow::Error::from)?)
}

/// Why a kernel differs from the request: no kernel for the requested dtype or format on the chip, or a
/// supported request moved to a neighbour's format because that saves conversions.
fn note(op: &GraphOp, k: &Choice, chip: &str) -> String {
    if k.as_requested {
        return "as requested".into();
    }
    let Some(info) = op_info(&op.op, chip) else {
        return "changed".into();
    };
    let mut why = Vec::new();
    if !info.dtypes.contains(&op.dtype.as_str()) {
        why.push(format!("no {} {} kernel on {chip}", op.dtype, op.op));
    }
    if !info.formats.contains(&op.format) {
        why.push(format!("no {} {} kernel", op.format, op.op));
    }
    if why.is_empty() {
        "moved to save conversions".into()
    } else {
        why.join("; ")
    }
}
