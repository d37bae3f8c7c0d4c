//! `tpusim hlo --json`: the cost of a JAX program's HLO module on a chip, with what-if chip values.

use anyhow::{bail, Context};
use serde_json::Value;
use sim_tpu::chips::Chip;
use sim_tpu::hlo::{report, HloModule, HloReport};

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
