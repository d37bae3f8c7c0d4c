//! `tpusim chips`: the chip presets (or one chip with a chip file's overrides), every field with its
//! value, unit and source.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use serde_json::{Map, Value};
use sim_core::units::{bytes, bytes_per_s, rate};
use sim_tpu::chips::{FieldUnit, PRESETS};

pub use sim_tpu::chips::Chip;

/// Loads the chip named by `chip` (a preset) with the overrides of the JSON file `chip_file`.
pub fn load(chip: Option<&str>, chip_file: Option<&Path>) -> crate::Result<Chip> {
    let file = match chip_file {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Some(serde_json::from_str::<Value>(&text).with_context(|| format!("parsing {}", p.display()))?)
        }
        None => None,
    };
    Ok(Chip::load(chip, file.as_ref()).map_err(anyhow::Error::from)?)
}

/// The chips `tpusim chips` shows: every preset, or the one chip named and/or given by a file.
pub fn chips(chip: Option<&str>, chip_file: Option<&Path>) -> crate::Result<Vec<Chip>> {
    match (chip, chip_file) {
        (None, None) => Ok(PRESETS
            .iter()
            .map(|(n, _)| Chip::preset(n))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::from)?),
        (c, f) => Ok(vec![load(c, f)?]),
    }
}

/// `tpusim chips --json`: per chip, every field as `{"value", "source"}`.
pub fn chips_json(chips: &[Chip]) -> Value {
    Value::Object(chips.iter().map(|c| (c.spec.name.clone(), c.to_json())).collect())
}

/// One field of a chip: its value, what the number counts, and where it comes from.
#[derive(Clone, Debug, Serialize)]
pub struct ChipField {
    /// The field's name (as in chip files and `--set chip.FIELD`).
    pub name: String,
    /// Its value.
    pub value: Value,
    /// What the number counts when its name says (`bytes`, `bytes/s`, `FLOP/s`); none otherwise.
    pub unit: Option<&'static str>,
    /// Its source: a datasheet, the compiler, a calibration, or `assumed ...` with why.
    pub source: String,
}

/// The unit a field's name gives its number.
pub fn unit_of(field: &str) -> Option<&'static str> {
    match FieldUnit::of(field) {
        FieldUnit::BytesPerSecond => Some("bytes/s"),
        FieldUnit::Bytes => Some("bytes"),
        FieldUnit::Flops => Some("FLOP/s"),
        FieldUnit::Plain => None,
    }
}

/// Every field of a chip (the chip's values, then its step parameters), in `chips --json` order.
pub fn fields(chip: &Chip) -> Vec<ChipField> {
    let Value::Object(m) = chip.to_json() else {
        return Vec::new();
    };
    m.into_iter()
        .map(|(name, v)| ChipField {
            unit: unit_of(&name),
            value: v["value"].clone(),
            source: v["source"].as_str().unwrap_or("").to_string(),
            name,
        })
        .collect()
}

/// A field as `tpusim chips --show` prints it.
#[derive(Clone, Debug)]
pub struct ShownField {
    /// The field's name.
    pub name: String,
    /// Its value as a person reads it (units by the field's name).
    pub text: String,
    /// Its source, as text.
    pub source: String,
}

/// `tpusim chips --show`: every field of a chip as a person reads it, with its typed source.
pub fn show(chip: &Chip) -> Vec<ShownField> {
    fields(chip)
        .into_iter()
        .map(|f| ShownField {
            text: human(&f.name, &f.value).unwrap_or_else(|| f.value.to_string()),
            name: f.name,
            source: f.source,
        })
        .collect()
}

/// One cell of the `tpusim chips` table.
#[derive(Clone, Debug)]
pub struct Cell {
    /// The value as a person reads it (units by the field's name).
    pub text: String,
    /// `*` an assumption (not public), `~` calibrated on another chip, ` ` otherwise.
    pub mark: char,
}

/// The `tpusim chips` table: a row per field, a column per chip.
#[derive(Clone, Debug)]
pub struct ChipTable {
    /// The chips' names, one per column.
    pub chips: Vec<String>,
    /// Per field (the name left out), its cells in chip order.
    pub rows: Vec<(String, Vec<Cell>)>,
}

/// A chip value in units a person reads, by its field's unit (`--json` keeps the raw value).
fn human(field: &str, v: &Value) -> Option<String> {
    let x = v.as_f64()?;
    match FieldUnit::of(field) {
        FieldUnit::BytesPerSecond => Some(bytes_per_s(x)),
        FieldUnit::Flops => Some(rate(x, "FLOP/s")),
        FieldUnit::Bytes if x >= 1024.0 => Some(bytes(v.as_u64()?)),
        _ => None,
    }
}

/// The chip's values, then its step parameters (launch costs, latencies, calibrated rates), as one object.
fn flat(c: &Chip) -> Map<String, Value> {
    let mut m = serde_json::to_value(&c.spec)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    if let Some(p) = serde_json::to_value(&c.params)
        .ok()
        .and_then(|v| v.as_object().cloned())
    {
        m.extend(p);
    }
    m
}

/// The table `tpusim chips` prints (fields of the first chip, in order).
pub fn table(chips: &[Chip]) -> ChipTable {
    let json: Vec<Map<String, Value>> = chips.iter().map(flat).collect();
    let fields: Vec<String> = json.first().map(|o| o.keys().cloned().collect()).unwrap_or_default();
    let rows = fields
        .into_iter()
        .filter(|f| f != "name")
        .map(|f| {
            let cells = json
                .iter()
                .zip(chips)
                .map(|(m, c)| {
                    let v = m.get(&f).unwrap_or(&Value::Null);
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => human(&f, other).unwrap_or_else(|| other.to_string()),
                    };
                    let mark = match c.sources.get(&f) {
                        Some(s) if s.is_assumed() => '*',
                        Some(s) if s.is_uncertain_on(&c.spec.name) => '~',
                        _ => ' ',
                    };
                    Cell { text, mark }
                })
                .collect();
            (f, cells)
        })
        .collect();
    ChipTable {
        chips: chips.iter().map(|c| c.spec.name.clone()).collect(),
        rows,
    }
}

/// Per chip, every field with its value, unit and source (Python's `tpusim.chips()`):
/// `{chip: {field: {"value", "unit", "source"}}}`.
pub fn fields_json(chips: &[Chip]) -> Value {
    Value::Object(
        chips
            .iter()
            .map(|c| {
                let fields = fields(c)
                    .into_iter()
                    .map(|f| {
                        let v = serde_json::json!({"value": f.value, "unit": f.unit, "source": f.source});
                        (f.name, v)
                    })
                    .collect();
                (c.spec.name.clone(), Value::Object(fields))
            })
            .collect(),
    )
}
