//! `tpusim op`: the cost of one op on a chip, from a spec in the compiler calibration schema
//! (`{"op": ..., "params": {...}}`), given as an argument or one per line on stdin.

use std::io::{BufRead, Write};

use anyhow::{bail, Context};
use tpusim_api::op::{cost_spec, op_chip, OpSummary};

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
    /// Print one JSON object per op: {"cycles","time_ns","flops","hbm_bytes","hbm_bytes_unpadded","vmem_bytes","bound",
    /// "total_cycles_low","total_cycles_high","out_of_domain_fraction","domain"}.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when an op is outside the calibrated domain (more than a fifth of its cycles: an op is one kernel).
    #[arg(long)]
    pub strict: bool,
    /// Read one spec per line from stdin (blank lines are skipped).
    #[arg(long)]
    pub stdin: bool,
    /// The op, e.g. '{"op":"matmul","params":{"M":1024,"K":1024,"N":1024,"dtype":"bfloat16"}}'.
    pub spec: Option<String>,
}

fn print_text(out: &mut impl Write, spec: &str, s: &OpSummary) -> std::io::Result<()> {
    writeln!(out, "{spec}")?;
    writeln!(
        out,
        "  cycles {}  time {}  flops {}  hbm {} (unpadded {})  vmem {}  bound {}",
        s.cycles,
        tpusim_api::units::duration_us(s.time_ns / 1e3),
        s.flops,
        tpusim_api::units::bytes(s.hbm_bytes),
        tpusim_api::units::bytes(s.hbm_bytes_unpadded),
        tpusim_api::units::bytes(s.vmem_bytes),
        s.bound
    )?;
    let per_cycle_us = if s.cycles == 0 {
        0.0
    } else {
        s.time_ns / 1e3 / s.cycles as f64
    };
    writeln!(
        out,
        "  band {}-{} cycles ({}-{}, {:.0}% band from held-out residuals); {}",
        s.band.total_cycles_low,
        s.band.total_cycles_high,
        tpusim_api::units::duration_us(s.band.total_cycles_low as f64 * per_cycle_us),
        tpusim_api::units::duration_us(s.band.total_cycles_high as f64 * per_cycle_us),
        tpusim_api::hlo::BAND_LEVEL * 100.0,
        match &s.domain {
            Some(d) if d.calibrated => format!("calibrated domain ({} of this size and intensity)", d.class.as_str()),
            Some(d) => format!(
                "OUTSIDE the calibrated domain ({}: no fit record of this size and intensity)",
                d.class.as_str()
            ),
            None => "no domain verdict".to_string(),
        }
    )?;
    for (name, cycles, bound) in &s.kernels {
        writeln!(out, "    {name:<20} {cycles:>12} cycles  {bound}")?;
    }
    Ok(())
}

/// Runs `tpusim op`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    // Load the chip up front so a bad --chip is reported even with empty stdin.
    let file = match &args.chip_file {
        None => None,
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("option --chip-file: reading {}", p.display()))?;
            Some(
                serde_json::from_str::<serde_json::Value>(&text)
                    .with_context(|| format!("option --chip-file: parsing {}", p.display()))?,
            )
        }
    };
    let (chip, model) = op_chip(&args.chip, file.as_ref())?;
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
        .map(|(origin, text)| cost_spec(text, &chip, &model).with_context(|| origin.clone()))
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
    if args.strict && results.iter().any(|s| s.band.strict_fails()) {
        return Ok(1);
    }
    Ok(0)
}
