//! `tpusim hlo --json`: the cost of a JAX program's HLO module on a chip, with what-if chip values.

use anyhow::{bail, Context};
use serde_json::Value;
pub use sim_tpu::chips::Chip;
pub use sim_tpu::hlo::{report, HloModule, HloReport};

/// Chip overrides from `chip.FIELD=VALUE` sets (numbers may be written 3.2e12).
pub fn chip_overrides(sets: &[String]) -> crate::Result<Value> {
    Ok(overrides_inner(sets)?)
}

fn overrides_inner(sets: &[String]) -> anyhow::Result<Value> {
    let mut m = serde_json::Map::new();
    for s in sets {
        let (k, v) = s
            .split_once('=')
            .with_context(|| format!("--set {s}: expected chip.FIELD=VALUE"))?;
        let Some(field) = k.trim().strip_prefix("chip.") else {
            bail!("--set {s}: the key must start with `chip.` (e.g. chip.hbm_bytes_per_s=3.2e12)");
        };
        let v = v.trim();
        // Numbers may be written 3.2e12; integer fields need whole values.
        let value = match v.parse::<f64>() {
            Ok(x) if x.fract() == 0.0 && x.abs() < 9.0e18 => serde_json::json!(x as i64),
            Ok(x) => serde_json::json!(x),
            Err(_) => serde_json::from_str(v).unwrap_or_else(|_| serde_json::json!(v)),
        };
        m.insert(field.to_string(), value);
    }
    Ok(Value::Object(m))
}

/// The chip preset with `chip.FIELD=VALUE` what-if values applied.
pub fn chip(name: &str, sets: &[String]) -> crate::Result<Chip> {
    let chip = Chip::preset(name)
        .context("option --chip")?
        .with_overrides(&chip_overrides(sets)?)
        .context("option --set")?;
    Ok(chip)
}

/// Parses HLO text; `origin` (a path, or `hlo`) names it in errors.
pub fn parse(text: &str, origin: &str) -> crate::Result<HloModule> {
    Ok(HloModule::parse(text).with_context(|| origin.to_string())?)
}

/// Costs a module on a chip: the `tpusim hlo --json` report.
pub fn hlo_report(module: &HloModule, chip: &Chip, origin: &str) -> crate::Result<HloReport> {
    Ok(report(module, chip).with_context(|| origin.to_string())?)
}

/// `tpusim hlo --json` for HLO text on a chip preset with what-if sets.
pub fn hlo_json(text: &str, origin: &str, chip_name: &str, sets: &[String]) -> crate::Result<Value> {
    let module = parse(text, origin)?;
    let chip = chip(chip_name, sets)?;
    let r = hlo_report(&module, &chip, origin)?;
    Ok(serde_json::to_value(&r).map_err(anyhow::Error::from)?)
}

/// The kernel sequence of a costed module as a Chrome trace (`tpusim hlo --trace`), timed at the
/// TensorCore clock of the chip it was costed on.
pub fn chrome_trace(r: &HloReport, chip: &Chip) -> crate::Result<Value> {
    let model = sim_tpu::tensorcore::ChipModel::for_chip(chip).map_err(anyhow::Error::from)?;
    Ok(r.cost.chrome_trace(model.clock_hz))
}

/// The level of the error bands on `hlo` and `op` answers (a fraction: 0.8 is the 10th to 90th percentile).
pub use sim_tpu::band::BAND_LEVEL;

/// The slice `--slice TEXT` names for `chip` (e.g. `8x8x8` on v5p, `16x16` on v6e).
pub fn slice(chip: &Chip, text: &str) -> crate::Result<sim_tpu::topology::SliceShape> {
    Ok(sim_tpu::topology::SliceShape::from_text(&chip.spec, text).context("option --slice")?)
}

pub use sim_tpu::hlo::spmd::report::SliceReport;

/// The per-device program and its collectives on a slice, with an optional `--mesh` naming the devices. A
/// module annotated with `sharding={...}` is partitioned first (`text` is its source, for line numbers).
pub fn hlo_slice_report(
    module: &HloModule,
    text: &str,
    chip: &Chip,
    slice: &sim_tpu::topology::SliceShape,
    origin: &str,
    mesh: Option<&str>,
) -> crate::Result<SliceReport> {
    let mesh = match mesh {
        Some(t) => Some(sim_tpu::hlo::spmd::mesh::Mesh::parse(t).map_err(anyhow::Error::msg)?),
        None => None,
    };
    Ok(
        sim_tpu::hlo::spmd::report::report_on_slice_partitioned(module, text, chip, slice, mesh.as_ref())
            .with_context(|| origin.to_string())?,
    )
}

/// The step on the slice as a Chrome trace (`--trace` with `--slice`).
pub fn slice_trace(r: &SliceReport) -> Value {
    r.chrome_trace(r.slice.clock_hz)
}

/// The human summary of `tpusim hlo --slice` (lines; the CLI prints them).
pub fn slice_summary(r: &SliceReport, file: &str, top: usize) -> Vec<String> {
    use sim_core::units::{bytes, duration_us, percent};
    let s = &r.step;
    let clock = r.slice.clock_hz;
    let us = |c: u64| duration_us(c as f64 * 1e6 / clock);
    let share = |c: u64| percent(c as f64 / s.step_cycles.max(1) as f64);
    let c = &r.device.cost;
    let mut out = vec![
        format!(
            "{file} on {} x {} ({} chips, {} devices): step {} cycles = {}",
            c.chip,
            r.slice.shape,
            r.slice.chips,
            r.slice.devices,
            s.step_cycles,
            us(s.step_cycles)
        ),
        format!(
            "compute {} ({}), collectives {} summed, exposed communication {} ({})",
            us(s.compute_cycles),
            share(s.compute_cycles),
            us(s.collective_cycles),
            us(s.exposed_communication_cycles),
            share(s.exposed_communication_cycles)
        ),
        format!(
            "memory per device: arguments {}  outputs {}  temp {}  = {} of {} HBM: {}",
            bytes(c.argument_bytes),
            bytes(c.output_bytes),
            bytes(c.temp_bytes),
            bytes(r.device.footprint_bytes),
            bytes(r.device.hbm_capacity_bytes),
            if r.device.fits { "fits" } else { "DOES NOT FIT" }
        ),
    ];
    if let Some(p) = &r.partition {
        let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        for c in &p.inserted {
            *kinds.entry(c.kind.name()).or_default() += 1;
        }
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        out.push(format!(
            "partitioned from its sharding annotations over mesh {}: inserted {}",
            p.mesh,
            if kinds.is_empty() {
                "no collectives".to_string()
            } else {
                kinds.join(", ")
            }
        ));
    }
    out.extend([
        String::new(),
        format!(
            "{:<28} {:<18} {:>10} {:>6} {:>6} {:<18} {:>5} {:>10} {:>7}",
            "collective", "kind", "bytes", "group", "chips", "algorithm", "hops", "time", "share"
        ),
    ]);
    let mut cs: Vec<_> = r.collectives.iter().collect();
    cs.sort_by(|a, b| b.cycles.cmp(&a.cycles).then(a.start_cycle.cmp(&b.start_cycle)));
    for x in cs.iter().take(top) {
        let alg = serde_json::to_value(x.algorithm)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let axes = x
            .mesh_axes
            .as_ref()
            .map(|a| format!("  [{}]", a.join(",")))
            .unwrap_or_default();
        out.push(format!(
            "{:<28} {:<18} {:>10} {:>6} {:>6} {:<18} {:>5} {:>10} {:>7}{axes}",
            x.name.chars().take(28).collect::<String>(),
            x.kind.name(),
            bytes(x.bytes),
            x.group_size,
            x.chips,
            alg,
            x.hops,
            us(x.cycles),
            share(x.cycles)
        ));
    }
    if cs.len() > top {
        out.push(format!("({} more collectives)", cs.len() - top));
    }
    out
}
