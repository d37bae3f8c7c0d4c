//! Where a chip value or step parameter comes from, typed: a published document, the compiler, a
//! calibration on a named figure of a named chip, an assumption with its reason, or the user.
//! Carried in the chip data files (`chips/*.json`, `{"assumed": "why"}` and so on) and read by
//! `tpusim chips` and `tpusim run --sensitivity`.

use serde::{Deserialize, Serialize};

/// A value's source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A datasheet, paper or official document (named, with the figure it gives).
    Datasheet(String),
    /// Read off the XLA TPU compiler (which record or message).
    Compiler(String),
    /// Fitted or set by hand to match a measured figure.
    Calibrated {
        /// The figure it was calibrated on.
        on: String,
        /// The chip that figure was measured on (a preset name).
        chip: String,
    },
    /// Not public: the value is a guess, with why it is this one.
    Assumed(String),
    /// Given by the user (a chip file or `--set chip.FIELD`), with the user's note.
    Given(String),
}

impl Source {
    /// Reads a source as the data files and chip files write it: the typed object, or (in a user's
    /// chip file) free text, which is the user's note unless it starts with `assumed`.
    pub fn from_json(v: &serde_json::Value) -> Option<Source> {
        match v {
            serde_json::Value::String(s) => Some(match s.strip_prefix("assumed") {
                Some(why) => Source::Assumed(why.trim_start_matches([':', ' ']).to_string()),
                None => Source::Given(s.clone()),
            }),
            other => serde_json::from_value(other.clone()).ok(),
        }
    }

    /// Whether `tpusim run --sensitivity` varies a value of this source on chip `chip`: every
    /// assumption, and every calibration made on another chip.
    pub fn is_uncertain_on(&self, chip: &str) -> bool {
        match self {
            Source::Assumed(_) => true,
            Source::Calibrated { chip: on_chip, .. } => on_chip != chip,
            _ => false,
        }
    }

    /// Whether the value is an assumption.
    pub fn is_assumed(&self) -> bool {
        matches!(self, Source::Assumed(_))
    }

    /// The kind's name (`datasheet`, `compiler`, `calibrated`, `assumed`, `given`).
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Datasheet(_) => "datasheet",
            Source::Compiler(_) => "compiler",
            Source::Calibrated { .. } => "calibrated",
            Source::Assumed(_) => "assumed",
            Source::Given(_) => "given",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Datasheet(d) => write!(f, "datasheet: {d}"),
            Source::Compiler(r) => write!(f, "compiler: {r}"),
            Source::Calibrated { on, chip } => write!(f, "calibrated on {chip}: {on}"),
            Source::Assumed(why) => write!(f, "assumed: {why}"),
            Source::Given(note) => write!(f, "given: {note}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_typed_and_free_text_sources() {
        let v = serde_json::json!({"calibrated": {"on": "a figure", "chip": "tpu7x"}});
        let s = Source::from_json(&v).unwrap();
        assert!(s.is_uncertain_on("v4") && !s.is_uncertain_on("tpu7x"));
        assert_eq!(s.to_string(), "calibrated on tpu7x: a figure");
        let a = Source::from_json(&serde_json::json!("assumed: a guess")).unwrap();
        assert_eq!(a, Source::Assumed("a guess".into()));
        assert!(a.is_uncertain_on("v4"));
        let g = Source::from_json(&serde_json::json!("my measurement")).unwrap();
        assert_eq!(g, Source::Given("my measurement".into()));
        assert!(!g.is_uncertain_on("v4"));
        assert!(Source::from_json(&serde_json::json!({"datasheet": "x"})).is_some_and(|s| !s.is_assumed()));
        assert!(Source::from_json(&serde_json::json!({"rumour": "x"})).is_none());
    }
}
