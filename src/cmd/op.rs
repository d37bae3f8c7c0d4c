//! `tpusim op`: the cost of one op on a chip, from a spec in the compiler calibration schema
//! (`{"op": ..., "params": {...}}`), given as an argument or one per line on stdin.

use std::io::{BufRead, Write};

use anyhow::{bail, Context};
use serde::Serialize;
use sim_tpu::tensorcore::{self, ChipModel, OpSpec};

/// Arguments of `tpusim op`.
#[derive(clap::Args)]
pub struct Args {
    /// Chip preset: v4, v5e, v5p, v6e, tpu7x (topology spellings such as `v5e:2x2` are accepted).
    #[arg(long)]
    pub chip: String,
    /// JSON file overriding chip preset fields (as `tpusim chips --chip-file`); the clock and MXU geometry
    /// the model uses come from the chip spec.
    #[arg(long)]
    pub chip_file: Option<std::path::PathBuf>,
    /// Print one JSON object per op: {"cycles","time_ns","flops","hbm_bytes","hbm_bytes_unpadded","vmem_bytes","bound"}.
    #[arg(long)]
    pub json: bool,
    /// Read one spec per line from stdin (blank lines are skipped).
    #[arg(long)]
    pub stdin: bool,
    /// The op, e.g. '{"op":"matmul","params":{"M":1024,"K":1024,"N":1024,"dtype":"bfloat16"}}'.
    pub spec: Option<String>,
}

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
    /// Kernels and their cycles, for the text output.
    #[serde(skip)]
    pub kernels: Vec<(String, u64, String)>,
}

/// An op family costed outside the TensorCore model (e.g. SparseCore ops such as `sc_gather`, `tc_gather`).
/// Register one in [`EXTERNAL_OPS`]; `cost` gets the whole spec object and the chip name as given.
pub struct ExternalOps {
    /// Op names this family handles.
    pub names: &'static [&'static str],
    /// Costs one spec; errors name the offending field.
    pub cost: fn(spec: &serde_json::Value, chip: &str) -> anyhow::Result<OpSummary>,
}

/// Op families dispatched before the TensorCore model.
pub const EXTERNAL_OPS: &[ExternalOps] = &[ExternalOps {
    names: &["sc_gather", "tc_gather"],
    cost: gather_cost,
}];

/// Gathers of `rows` rows of `row_bytes` on one device (the model lives in `workloads::gather`).
fn gather_cost(spec: &serde_json::Value, chip_name: &str) -> anyhow::Result<OpSummary> {
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
    let chip = sim_tpu::chips::Chip::preset(chip_name)?;
    let site = if op == "sc_gather" {
        GatherSite::SparseCore
    } else {
        GatherSite::TensorCore
    };
    let g = gather_cost(&chip, site, rows, row_bytes)?;
    Ok(OpSummary {
        cycles: g.cycles,
        time_ns: g.time_ns,
        flops: 0,
        hbm_bytes: g.hbm_bytes,
        hbm_bytes_unpadded: g.hbm_bytes_unpadded,
        vmem_bytes: 0,
        bound: g.bound.as_str().into(),
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

/// Costs one spec text: external families first, then the TensorCore model of `chip`.
pub fn cost_spec(text: &str, chip_name: &str, chip: &ChipModel) -> anyhow::Result<OpSummary> {
    let value: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("op spec is not valid JSON: {text}"))?;
    let op_name = value.get("op").and_then(|v| v.as_str()).unwrap_or("");
    if let Some(ext) = EXTERNAL_OPS.iter().find(|e| e.names.contains(&op_name)) {
        return (ext.cost)(&value, chip_name);
    }
    tensorcore_summary(&value, chip)
}

fn print_text(out: &mut impl Write, spec: &str, s: &OpSummary) -> std::io::Result<()> {
    writeln!(out, "{spec}")?;
    writeln!(
        out,
        "  cycles {}  time {:.3} us  flops {}  hbm {} B (unpadded {} B)  vmem {} B  bound {}",
        s.cycles,
        s.time_ns / 1e3,
        s.flops,
        s.hbm_bytes,
        s.hbm_bytes_unpadded,
        s.vmem_bytes,
        s.bound
    )?;
    for (name, cycles, bound) in &s.kernels {
        writeln!(out, "    {name:<20} {cycles:>12} cycles  {bound}")?;
    }
    Ok(())
}

/// Runs `tpusim op`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    // Load the chip up front so a bad --chip is reported even with empty stdin.
    let model = match &args.chip_file {
        None => ChipModel::preset(&args.chip).context("option --chip")?,
        Some(path) => {
            let name = tensorcore::chip::normalize_chip_name(&args.chip);
            let chip = super::chips::load_chip(Some(&name), Some(path)).context("option --chip-file")?;
            ChipModel::for_chip(&chip).context("option --chip")?
        }
    };
    let mut specs: Vec<(String, String)> = Vec::new();
    if let Some(s) = &args.spec {
        specs.push(("argument".to_string(), s.clone()));
    }
    if args.stdin {
        for (i, line) in std::io::stdin().lock().lines().enumerate() {
            let line = line.context("reading stdin")?;
            if !line.trim().is_empty() {
                specs.push((format!("stdin line {}", i + 1), line));
            }
        }
    }
    if specs.is_empty() {
        bail!("no op given: pass SPEC or --stdin");
    }
    // Cost everything first, so a bad spec exits 2 before any output.
    let results = specs
        .iter()
        .map(|(origin, text)| cost_spec(text, &args.chip, &model).with_context(|| origin.clone()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for ((_, text), s) in specs.iter().zip(&results) {
        if args.json {
            writeln!(out, "{}", serde_json::to_string(s)?)?;
        } else {
            print_text(&mut out, text.trim(), s)?;
        }
    }
    Ok(0)
}
