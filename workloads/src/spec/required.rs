//! The fields a workload must give, and a starting workload that gives them: a hand-written file
//! missing several required fields hears about all of them at once, not one per attempt.

/// A commented starting workload (`tpusim init`): the required fields set to a small model that runs
/// in about a second, every optional field written out, commented, at its default.
pub const STARTER_WORKLOAD: &str = include_str!("starter.toml");

/// Required fields at the top of a workload.
const TOP: &[&str] = &["chip", "chips", "global_batch", "tables", "features", "dense"];
/// Required fields of `dense`, of each table and of each feature.
const DENSE: &[&str] = &["dense_features", "bottom", "top"];
const TABLE: &[&str] = &["name", "vocab", "dim"];
const FEATURE: &[&str] = &["name", "table"];

/// The required fields `text` leaves out, as field paths (`tables[1].dim`), in file order of
/// sections; empty when none is missing or the text is not a TOML/JSON table at all.
pub fn missing_fields(text: &str, json: bool) -> Vec<String> {
    let value: Option<serde_json::Value> = if json {
        serde_json::from_str(text).ok()
    } else {
        toml::from_str::<toml::Value>(text)
            .ok()
            .and_then(|v| serde_json::to_value(v).ok())
    };
    let Some(serde_json::Value::Object(top)) = value else {
        return Vec::new();
    };
    let mut missing = Vec::new();
    let mut need = |obj: &serde_json::Map<String, serde_json::Value>, fields: &[&str], prefix: &str| {
        for f in fields {
            if !obj.contains_key(*f) {
                missing.push(format!("{prefix}{f}"));
            }
        }
    };
    need(&top, TOP, "");
    if let Some(serde_json::Value::Object(d)) = top.get("dense") {
        need(d, DENSE, "dense.");
    }
    for (list, fields) in [("tables", TABLE), ("features", FEATURE)] {
        if let Some(serde_json::Value::Array(items)) = top.get(list) {
            for (i, item) in items.iter().enumerate() {
                if let serde_json::Value::Object(o) = item {
                    need(o, fields, &format!("{list}[{i}]."));
                }
            }
        }
    }
    missing
}

/// The error for a workload missing required fields: all of them, and where to start from.
pub fn missing_message(text: &str, json: bool) -> Option<String> {
    let missing = missing_fields(text, json);
    (!missing.is_empty()).then(|| {
        format!(
            "missing required field{} {}: a workload needs chip, chips, global_batch, tables (name, vocab, dim), features (name, table) and dense (dense_features, bottom, top); every other field has a default (`tpusim init` writes a commented starting workload)",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{IdDist, Pipelining, Valency, Workload};

    #[test]
    fn every_missing_required_field_is_named_at_once() {
        let text = "name = \"w\"\nchips = 4\n[dense]\nbottom = [8]\n[[tables]]\nname = \"t\"\nvocab = 10\n[[features]]\nname = \"f\"\n";
        assert_eq!(
            missing_fields(text, false),
            [
                "chip",
                "global_batch",
                "dense.dense_features",
                "dense.top",
                "tables[0].dim",
                "features[0].table"
            ]
        );
        let e = Workload::parse(text).unwrap_err().to_string();
        assert!(
            e.contains("chip, global_batch, dense.dense_features, dense.top, tables[0].dim, features[0].table"),
            "{e}"
        );
        assert!(missing_fields(r#"{"chip": "v5p"}"#, true).contains(&"chips".to_string()));
    }

    #[test]
    fn a_workload_of_only_the_required_fields_takes_the_documented_defaults() {
        let text = "chip = \"v5p\"\nchips = 4\nglobal_batch = 1024\n[dense]\ndense_features = 13\nbottom = [64]\ntop = [64, 1]\n[[tables]]\nname = \"t\"\nvocab = 1000\ndim = 16\n[[features]]\nname = \"f\"\ntable = \"t\"\n";
        let w = Workload::parse(text).unwrap();
        assert_eq!(
            (w.name.as_str(), w.steps, w.pipelining),
            ("workload", 6, Pipelining::Pipelined)
        );
        assert_eq!(
            (&w.features[0].valency, &w.features[0].ids),
            (&Valency::Fixed(1), &IdDist::Uniform)
        );
        assert_eq!(w.dense.interaction, crate::spec::Interaction::Dot);
        assert_eq!(
            (w.host.threads, w.host.prefetch, w.limits.enable_minibatching),
            (4, 2, true)
        );
    }

    /// Every `# key = value` line of the starter is an optional field at its default: uncommenting
    /// them all gives the same workload.
    #[test]
    fn the_starter_runs_as_is_and_its_commented_values_are_the_defaults() {
        let plain = Workload::parse(STARTER_WORKLOAD).unwrap();
        let mut uncommented = 0;
        let all: String = STARTER_WORKLOAD
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest) if is_assignment(rest) => {
                    uncommented += 1;
                    rest.to_string()
                }
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert!(uncommented >= 20, "only {uncommented} defaults written out");
        let explicit = Workload::parse(&all).unwrap_or_else(|e| panic!("{e}\n{all}"));
        assert_eq!(plain, explicit);
    }

    /// `key = value` with a bare key (prose comments never start that way).
    fn is_assignment(line: &str) -> bool {
        line.split_once(" = ").is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
    }
}
