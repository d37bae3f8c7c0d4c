//! Chip presets v4, v5e, v5p, v6e, tpu7x as embedded JSON data files (sim-tpu/chips/*.json,
//! written by tools/gen_chip_presets.py from reference/chips.md). Every value carries its source, or
//! says `assumed: ...` with the reason; any field can be overridden from a file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::params::{StepParams, PARAMS_JSON};
use crate::source::Source;

/// The chips with presets.
pub const PRESETS: &[(&str, &str)] = &[
    ("v4", include_str!("../chips/v4.json")),
    ("v5e", include_str!("../chips/v5e.json")),
    ("v5p", include_str!("../chips/v5p.json")),
    ("v6e", include_str!("../chips/v6e.json")),
    ("tpu7x", include_str!("../chips/tpu7x.json")),
];

/// Errors of loading chip specs.
#[derive(Debug, thiserror::Error)]
pub enum ChipError {
    /// The chip name is not a preset.
    #[error("unknown chip '{0}': expected one of v4, v5e, v5p, v6e, tpu7x")]
    Unknown(String),
    /// An override names a field presets do not have.
    #[error("chip file: unknown field '{0}'{1} (see `tpusim chips --json` for the field names)")]
    UnknownField(String, String),
    /// A field has the wrong type.
    #[error("chip spec: {0}")]
    Invalid(String),
}

/// A chip's parameters. Units are in the names; see the preset files for each value's source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ChipSpec {
    pub name: String,
    pub tensorcores_per_chip: u32,
    pub megacore: bool,
    pub mxus_per_tensorcore: u32,
    /// MXU side (128 or 256).
    pub mxu_dim: u32,
    pub tc_clock_mhz: u64,
    pub vpu_lanes: u32,
    pub vpu_sublanes: u32,
    pub vpu_alus_per_lane: u32,
    pub vector_registers: u32,
    pub vmem_bytes_per_tc: u64,
    pub smem_bytes_per_tc: u64,
    pub cmem_bytes: u64,
    pub hbm_bytes: u64,
    pub hbm_bytes_per_s: u64,
    pub ici_links: u32,
    pub ici_topology: String,
    pub ici_bytes_per_s_per_link: u64,
    pub host_link_bytes_per_s: u64,
    pub peak_bf16_flops: u64,
    pub peak_int8_ops: u64,
    pub sparsecores_per_chip: u32,
    pub sc_tiles_per_sc: u32,
    pub sc_simd_lanes_f32: u32,
    pub sc_simd_lanes_bf16: u32,
    pub sc_tilespmem_bytes_per_tile: u64,
    /// TileSpmem bytes a SparseCore program can use per tile, as the compiler reports it.
    pub sc_tilespmem_bytes_available: u64,
    /// TileSpmem bytes the compiler offers a SparseCore fusion's window ("scratchpad allocation size").
    pub sc_tilespmem_scratchpad_bytes: u64,
    pub sc_spmem_bytes_per_sc: u64,
    pub sc_dma_granule_bytes: u64,
    /// Constant part of a SparseCore backward pass's fixed Spmem allocation (read off E3001 reports).
    pub sc_spmem_fixed_overhead_bytes: u64,
    pub sc_clock_mhz: u64,
    /// Share of HBM bandwidth the SparseCores can draw (0..=1).
    pub sc_hbm_share: f64,
    /// TensorCores in one compiler "device".
    pub model_device_tensorcores: u32,
    /// The compiler cost model's peak bf16 FLOPs per cycle per device.
    pub model_peak_flops_per_cycle: u64,
    /// The clock the compiler cost model implies.
    pub model_clock_mhz: u64,
    /// The HBM bandwidth the compiler cost model implies per device.
    pub model_hbm_bytes_per_s: u64,
}

/// A chip spec and the step-model parameters, plus the source of each value.
#[derive(Clone, Debug)]
pub struct Chip {
    /// The values.
    pub spec: ChipSpec,
    /// The step model's launch costs, latencies and calibrated rates (`chips/params.json`).
    pub params: StepParams,
    /// Source of each field (spec and params), by field name.
    pub sources: BTreeMap<String, Source>,
}

/// Normalises chip names ("v5p:2x2x1", "TPU v5p", "TPU7x", "ironwood") to a preset name.
pub fn preset_name(name: &str) -> Result<&'static str, ChipError> {
    crate::tiling::normalize_chip(name).map_err(|_| ChipError::Unknown(name.to_string()))
}

/// Plain field values and their sources, split out of a chip file.
type ValuesAndSources = (Map<String, Value>, BTreeMap<String, Source>);

fn split(file: &Value) -> Result<ValuesAndSources, ChipError> {
    let obj = file
        .as_object()
        .ok_or_else(|| ChipError::Invalid("a chip file must be a JSON object".into()))?;
    let mut values = Map::new();
    let mut sources = BTreeMap::new();
    for (k, v) in obj {
        match v {
            Value::Object(o) if o.contains_key("value") => {
                values.insert(k.clone(), o["value"].clone());
                if let Some(s) = o.get("source") {
                    let source = Source::from_json(s).ok_or_else(|| {
                        ChipError::Invalid(format!(
                            "{k}.source = {s}: expected text or one of {{\"datasheet\": DOC}}, {{\"compiler\": RECORD}}, {{\"calibrated\": {{\"on\": FIGURE, \"chip\": CHIP}}}}, {{\"assumed\": WHY}}"
                        ))
                    })?;
                    sources.insert(k.clone(), source);
                }
            }
            other => {
                values.insert(k.clone(), other.clone());
            }
        }
    }
    Ok((values, sources))
}

/// Whether a field is a rate (bandwidth, clock, throughput): zero or less would mean the chip never
/// finishes anything.
fn is_rate(field: &str) -> bool {
    ["per_s", "clock_mhz", "flops", "_ops", "per_cycle", "sc_hbm_share"]
        .iter()
        .any(|p| field.contains(p))
}

/// Refuses an overridden rate that is not a finite number > 0, naming the field and the value.
fn check_rate(field: &str, v: &Value) -> Result<(), ChipError> {
    if !is_rate(field) {
        return Ok(());
    }
    match v.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => Ok(()),
        _ => Err(ChipError::Invalid(format!(
            "{field} = {v}: a rate must be a finite number > 0"
        ))),
    }
}

impl Chip {
    /// A preset by name (aliases accepted).
    pub fn preset(name: &str) -> Result<Chip, ChipError> {
        let key = preset_name(name)?;
        let text = PRESETS
            .iter()
            .find(|(n, _)| *n == key)
            .map(|(_, t)| *t)
            .ok_or(ChipError::Unknown(name.into()))?;
        let file: Value = serde_json::from_str(text).map_err(|e| ChipError::Invalid(e.to_string()))?;
        let (values, mut sources) = split(&file)?;
        let spec: ChipSpec =
            serde_json::from_value(Value::Object(values)).map_err(|e| ChipError::Invalid(format!("{key}: {e}")))?;
        let pfile: Value = serde_json::from_str(PARAMS_JSON).map_err(|e| ChipError::Invalid(e.to_string()))?;
        let (pvalues, psources) = split(&pfile)?;
        let params: StepParams =
            serde_json::from_value(Value::Object(pvalues)).map_err(|e| ChipError::Invalid(format!("params: {e}")))?;
        sources.extend(psources);
        Ok(Chip { spec, params, sources })
    }

    /// Overrides fields from a JSON object (plain values or {"value", "source"}); a "chip" or "base"
    /// key is ignored here (it names the preset to start from). Unknown fields are errors.
    pub fn with_overrides(mut self, overrides: &Value) -> Result<Chip, ChipError> {
        let (mut values, sources) = split(overrides)?;
        values.remove("chip");
        values.remove("base");
        let as_map = |v: Result<Value, serde_json::Error>| match v {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(ChipError::Invalid("internal: spec is not an object".into())),
        };
        let mut current = as_map(serde_json::to_value(&self.spec))?;
        let mut params = as_map(serde_json::to_value(&self.params))?;
        for (k, v) in values {
            let slot = if current.contains_key(&k) {
                &mut current
            } else if params.contains_key(&k) {
                &mut params
            } else {
                let names = current.keys().chain(params.keys()).map(String::as_str);
                let hint = sim_core::suggest::did_you_mean(&k, names)
                    .map(|n| format!("; did you mean '{n}'?"))
                    .unwrap_or_default();
                return Err(ChipError::UnknownField(k, hint));
            };
            let source = sources
                .get(&k)
                .cloned()
                .unwrap_or_else(|| Source::Given("override from --chip-file".to_string()));
            self.sources.insert(k.clone(), source);
            check_rate(&k, &v)?;
            slot.insert(k, v);
        }
        self.spec = sim_core::de::json_value(Value::Object(current)).map_err(ChipError::Invalid)?;
        self.params = sim_core::de::json_value(Value::Object(params)).map_err(ChipError::Invalid)?;
        Ok(self)
    }

    /// Loads a chip: the preset `name` (or the file's "chip"/"base" key) with a file's overrides.
    pub fn load(name: Option<&str>, chip_file: Option<&Value>) -> Result<Chip, ChipError> {
        // A file's "chip"/"base" must name a preset even when --chip wins over it.
        let mut from_file = None;
        for key in ["chip", "base"] {
            if let Some(v) = chip_file.and_then(|f| f.get(key)) {
                let n = v
                    .as_str()
                    .ok_or_else(|| ChipError::Invalid(format!("{key} = {v}: expected a chip name")))?;
                preset_name(n)?;
                from_file = from_file.or(Some(n));
            }
        }
        let base = name
            .or(from_file)
            .ok_or_else(|| ChipError::Invalid("no chip named (use --chip)".into()))?;
        let chip = Chip::preset(base)?;
        match chip_file {
            Some(f) => chip.with_overrides(f),
            None => Ok(chip),
        }
    }

    /// The spec and sources as one JSON object of {"value", "source", "source_kind"} fields: the source
    /// as text and typed (the preset files' form).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        for part in [serde_json::to_value(&self.spec), serde_json::to_value(&self.params)] {
            if let Ok(Value::Object(m)) = part {
                for (k, v) in m {
                    let (text, kind) = match self.sources.get(&k) {
                        Some(s) => (s.to_string(), serde_json::to_value(s).unwrap_or(Value::Null)),
                        None => (String::new(), Value::Null),
                    };
                    out.insert(k, serde_json::json!({"value": v, "source": text, "source_kind": kind}));
                }
            }
        }
        Value::Object(out)
    }

    /// Fields whose value is uncertain on this chip: assumed, or calibrated on another chip (what
    /// `tpusim run --sensitivity` varies).
    pub fn uncertain(&self) -> Vec<(&str, &Source)> {
        self.sources
            .iter()
            .filter(|(_, s)| s.is_uncertain_on(&self.spec.name))
            .map(|(k, s)| (k.as_str(), s))
            .collect()
    }
}

/// What a chip field's number counts, read from its name (`hbm_bytes_per_s`, `sc_spmem_bytes_per_sc`):
/// how `tpusim chips` writes it for people.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldUnit {
    /// Bytes per second (`..._bytes_per_s`, `..._bytes_per_s_per_link`).
    BytesPerSecond,
    /// A size in bytes (`..._bytes`, `..._bytes_per_sc`, `..._bytes_available`).
    Bytes,
    /// Floating-point operations per second (`..._flops`).
    Flops,
    /// Anything else: printed as it is.
    Plain,
}

impl FieldUnit {
    /// The unit of the field named `field`.
    pub fn of(field: &str) -> FieldUnit {
        if field.ends_with("_flops") {
            return FieldUnit::Flops;
        }
        let words: Vec<&str> = field.split('_').collect();
        let Some(i) = words.iter().rposition(|w| *w == "bytes") else {
            return FieldUnit::Plain;
        };
        match &words[i + 1..] {
            [] | ["available"] => FieldUnit::Bytes,
            ["per", "s", ..] => FieldUnit::BytesPerSecond,
            // A size held by each of some part: a SparseCore, a TensorCore, a tile.
            ["per", "sc" | "tc" | "tile" | "chip"] => FieldUnit::Bytes,
            _ => FieldUnit::Plain,
        }
    }
}

impl ChipSpec {
    /// Total SparseCore tiles per chip.
    pub fn sc_tiles_per_chip(&self) -> u32 {
        self.sparsecores_per_chip * self.sc_tiles_per_sc
    }
    /// SparseCores per compiler device (a megacore pair counts as one device).
    pub fn sc_per_device(&self) -> u32 {
        if self.megacore || self.tensorcores_per_chip == 0 {
            self.sparsecores_per_chip
        } else {
            self.sparsecores_per_chip / self.tensorcores_per_chip
        }
    }
    /// Peak bf16 FLOPs per TensorCore per cycle (MXUs x dim^2 x 2).
    pub fn tc_flops_per_cycle(&self) -> u64 {
        self.mxus_per_tensorcore as u64 * (self.mxu_dim as u64).pow(2) * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_loads_with_a_source_for_every_field() {
        for (name, _) in PRESETS {
            let chip = Chip::preset(name).unwrap();
            assert_eq!(chip.spec.name, *name);
            let fields = chip.to_json();
            for (k, v) in fields.as_object().unwrap() {
                assert!(!v["source"].as_str().unwrap().is_empty(), "{name}.{k} has no source");
                assert!(v["source_kind"].is_object(), "{name}.{k} has no typed source");
            }
        }
    }

    /// What `--sensitivity` varies, by hand from the data files: on v4 its six assumed chip values,
    /// the six assumed step parameters and the SparseCore tile DMA rate calibrated on tpu7x; on tpu7x
    /// that rate is its own chip's figure, not varied.
    #[test]
    fn uncertain_values_are_the_assumed_and_those_calibrated_on_another_chip() {
        let names = |c: &str| -> Vec<String> {
            let chip = Chip::preset(c).unwrap();
            chip.uncertain().iter().map(|(k, _)| k.to_string()).collect()
        };
        let step = [
            "host_id_bound_check_ps_per_id",
            "host_init_bytes_per_s_per_thread",
            "ici_collective_launch_ns",
            "sc_cycles_per_id",
            "sc_pass_launch_cycles",
            "sc_serial_barrier_cycles",
        ];
        let mut v4: Vec<String> = step.iter().map(|s| s.to_string()).collect();
        v4.extend(
            [
                "sc_clock_mhz",
                "sc_hbm_share",
                "sc_simd_lanes_bf16",
                "sc_spmem_fixed_overhead_bytes",
                "sc_tile_dma_bytes_per_cycle_milli",
                "sc_tilespmem_bytes_available",
                "sc_tilespmem_scratchpad_bytes",
            ]
            .map(String::from),
        );
        v4.sort();
        assert_eq!(names("v4"), v4);
        let tpu7x = names("tpu7x");
        assert!(!tpu7x.contains(&"sc_tile_dma_bytes_per_cycle_milli".to_string()));
        assert!(tpu7x.contains(&"sc_cycles_per_id".to_string()));
    }

    #[test]
    fn peaks_agree_with_mxu_geometry() {
        // v4: 2 TCs x 4 MXUs x 128^2 x 2 x 1.05 GHz = 275 TFLOP/s.
        let v4 = Chip::preset("v4").unwrap().spec;
        let derived = v4.tc_flops_per_cycle() * v4.tensorcores_per_chip as u64 * v4.tc_clock_mhz * 1_000_000;
        assert!(
            (derived as f64 / v4.peak_bf16_flops as f64 - 1.0).abs() < 0.01,
            "{derived}"
        );
    }

    #[test]
    fn overrides_and_unknown_fields() {
        let o = serde_json::json!({"chip": "v5p", "hbm_bytes_per_s": 3_000_000_000_000u64, "sc_clock_mhz": {"value": 1000, "source": "my measurement"}});
        let c = Chip::load(None, Some(&o)).unwrap();
        assert_eq!(c.spec.hbm_bytes_per_s, 3_000_000_000_000);
        assert_eq!(c.sources["sc_clock_mhz"], Source::Given("my measurement".into()));
        assert_eq!(
            c.sources["hbm_bytes_per_s"],
            Source::Given("override from --chip-file".into())
        );
        let bad = serde_json::json!({"hbm_gb": 1});
        assert!(matches!(Chip::load(Some("v4"), Some(&bad)), Err(ChipError::UnknownField(f, _)) if f == "hbm_gb"));
        assert!(Chip::preset("v9").is_err());
        assert_eq!(Chip::preset("TPU v5p").unwrap().spec.name, "v5p");
    }
}

#[cfg(test)]
mod field_unit_tests {
    use super::FieldUnit;

    #[test]
    fn units_come_from_the_whole_field_name() {
        // "bytes_per_sc" is a size per SparseCore, not a rate ("bytes_per_s" is a prefix of it).
        assert_eq!(FieldUnit::of("sc_spmem_bytes_per_sc"), FieldUnit::Bytes);
        assert_eq!(FieldUnit::of("hbm_bytes_per_s"), FieldUnit::BytesPerSecond);
        assert_eq!(FieldUnit::of("ici_bytes_per_s_per_link"), FieldUnit::BytesPerSecond);
        assert_eq!(
            FieldUnit::of("host_init_bytes_per_s_per_thread"),
            FieldUnit::BytesPerSecond
        );
        assert_eq!(FieldUnit::of("hbm_bytes"), FieldUnit::Bytes);
        assert_eq!(FieldUnit::of("sc_tilespmem_bytes_available"), FieldUnit::Bytes);
        assert_eq!(FieldUnit::of("sc_tile_dma_bytes_per_cycle_milli"), FieldUnit::Plain);
        assert_eq!(FieldUnit::of("peak_bf16_flops"), FieldUnit::Flops);
        assert_eq!(FieldUnit::of("sc_tiles_per_sc"), FieldUnit::Plain);
    }
}
