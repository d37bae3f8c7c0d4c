//! SCALE-Sim's `.cfg` file: an INI file with `[general]` (run_name), `[architecture_presets]` (ArrayHeight,
//! ArrayWidth, SRAM sizes in kB, offsets, Dataflow, Bandwidth, ...) and `[run_presets]`. Keys are matched
//! case-insensitively and `key: value` or `key = value` both work, as Python's configparser reads them.

use super::SystolicError;

/// Dataflow of the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dataflow {
    /// Output stationary.
    Os,
    /// Weight stationary.
    #[default]
    Ws,
    /// Input stationary.
    Is,
}

impl Dataflow {
    /// Short name as SCALE-Sim spells it (`os`, `ws`, `is`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dataflow::Os => "os",
            Dataflow::Ws => "ws",
            Dataflow::Is => "is",
        }
    }
}

/// The fields of a SCALE-Sim config that matter for compute cycles, plus the memory ones kept for display.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ScaleConfig {
    /// `[general] run_name`.
    pub run_name: String,
    /// Array rows (`ArrayHeight`).
    pub array_height: u64,
    /// Array columns (`ArrayWidth`).
    pub array_width: u64,
    /// `IfmapSramSzkB`, kilobytes (0 when absent).
    pub ifmap_sram_kb: u64,
    /// `FilterSramSzkB`, kilobytes (0 when absent).
    pub filter_sram_kb: u64,
    /// `OfmapSramSzkB`, kilobytes (0 when absent).
    pub ofmap_sram_kb: u64,
    /// `Bandwidth`, words per cycle (0 when absent).
    pub bandwidth_words_per_cycle: u64,
    /// `Dataflow`.
    pub dataflow: Dataflow,
}

impl ScaleConfig {
    /// Parses the text of a `.cfg` file.
    pub fn parse(text: &str) -> Result<Self, SystolicError> {
        let mut cfg = ScaleConfig::default();
        let (mut height, mut width, mut dataflow) = (None, None, None);
        let mut section = String::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[') {
                let name = name.strip_suffix(']').ok_or_else(|| SystolicError::Config {
                    line: line_no,
                    msg: format!("section header `{line}` has no closing `]`"),
                })?;
                section = name.trim().to_ascii_lowercase();
                continue;
            }
            let Some(sep) = line.find([':', '=']) else {
                return Err(SystolicError::Config {
                    line: line_no,
                    msg: format!("expected `key: value` or `key = value`, got `{line}`"),
                });
            };
            let key = line[..sep].trim().to_ascii_lowercase();
            let value = line[sep + 1..].trim();
            let int = |v: &str| -> Result<u64, SystolicError> {
                v.parse::<u64>().map_err(|_| SystolicError::Config {
                    line: line_no,
                    msg: format!("`{}` must be a non-negative integer, got `{v}`", line[..sep].trim()),
                })
            };
            match (section.as_str(), key.as_str()) {
                ("general", "run_name") => cfg.run_name = value.to_string(),
                ("architecture_presets", "arrayheight") => height = Some(int(value)?),
                ("architecture_presets", "arraywidth") => width = Some(int(value)?),
                ("architecture_presets", "ifmapsramszkb") => cfg.ifmap_sram_kb = int(value)?,
                ("architecture_presets", "filtersramszkb") => cfg.filter_sram_kb = int(value)?,
                ("architecture_presets", "ofmapsramszkb") => cfg.ofmap_sram_kb = int(value)?,
                ("architecture_presets", "bandwidth") => cfg.bandwidth_words_per_cycle = int(value)?,
                ("architecture_presets", "dataflow") => {
                    dataflow = Some(match value.to_ascii_lowercase().as_str() {
                        "os" => Dataflow::Os,
                        "ws" => Dataflow::Ws,
                        "is" => Dataflow::Is,
                        other => {
                            return Err(SystolicError::Config {
                                line: line_no,
                                msg: format!("Dataflow must be os, ws or is, got `{other}`"),
                            })
                        }
                    })
                }
                // Offsets, memory banks, run presets and others do not change compute cycles.
                _ => {}
            }
        }
        cfg.array_height = height.ok_or_else(|| SystolicError::MissingKey("ArrayHeight".into()))?;
        cfg.array_width = width.ok_or_else(|| SystolicError::MissingKey("ArrayWidth".into()))?;
        cfg.dataflow = dataflow.ok_or_else(|| SystolicError::MissingKey("Dataflow".into()))?;
        if cfg.array_height == 0 || cfg.array_width == 0 {
            return Err(SystolicError::Config {
                line: 0,
                msg: "ArrayHeight and ArrayWidth must be at least 1".into(),
            });
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scalesim_style_cfg() {
        let text =
            "[general]\nrun_name = google_tpu\n\n[architecture_presets]\nArrayHeight:    128\nArrayWidth :    128\n\
                    IfmapSramSzkB:    6144\nFilterSramSzkB:   6144\nOfmapSramSzkB:    2048\nIfmapOffset:    0\n\
                    Dataflow : os\nBandwidth : 10\n[run_presets]\nInterfaceBandwidth: CALC\n";
        let c = ScaleConfig::parse(text).unwrap();
        assert_eq!((c.array_height, c.array_width, c.dataflow), (128, 128, Dataflow::Os));
        assert_eq!(
            (c.run_name.as_str(), c.ifmap_sram_kb, c.bandwidth_words_per_cycle),
            ("google_tpu", 6144, 10)
        );
    }

    #[test]
    fn bad_values_name_the_line_and_key() {
        let e = ScaleConfig::parse("[architecture_presets]\nArrayHeight: x\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "config line 2: `ArrayHeight` must be a non-negative integer, got `x`"
        );
        let e = ScaleConfig::parse("[architecture_presets]\nArrayHeight: 8\nArrayWidth: 8\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "config: missing key `Dataflow` in [architecture_presets]"
        );
    }
}
