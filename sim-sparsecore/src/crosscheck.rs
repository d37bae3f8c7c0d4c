//! Cross-checks between inputs, in one place: every stack or table name a limits file, FDO stats
//! or a spec's `stack_limits` uses is resolved against the spec it is used with, and every batch of
//! ids is checked against the spec's features (rows, valency, ragged structure, ids within the
//! table's vocabulary, finite weights) before any work. A name that matches nothing is an error
//! naming it and the closest valid name, never silently ignored.

use crate::preprocess::error::PreprocessError;
use crate::preprocess::input::BatchIds;
use crate::preprocess::spec::PreprocessSpec;
use crate::preprocess::stacking::build_stacks;

/// The closest valid name for an error message: ` (did you mean 'x'?)` when one is near, else
/// the valid names (the first twelve).
pub fn hint<'a>(name: &str, valid: impl IntoIterator<Item = &'a str> + Clone) -> String {
    if let Some(near) = sim_core::suggest::did_you_mean(name, valid.clone()) {
        return format!(" (did you mean '{near}'?)");
    }
    let all: Vec<&str> = valid.into_iter().collect();
    if all.is_empty() {
        return String::new();
    }
    let more = if all.len() > 12 { ", ..." } else { "" };
    let shown: Vec<&str> = all.into_iter().take(12).collect();
    format!(" (valid: {}{more})", shown.join(", "))
}

/// Whether `name` is table names joined by `_` (a stack another grouping of the tables would
/// make, as automatic stacking at another batch does).
fn joins_tables(name: &str, tables: &[&str]) -> bool {
    // reach[i]: the first i bytes are table names joined by '_'.
    let mut reach = vec![false; name.len() + 1];
    reach[0] = true;
    for i in 0..name.len() {
        if !reach[i] || (i > 0 && !name[..i].ends_with('_')) {
            continue;
        }
        for t in tables {
            if name[i..].starts_with(t) {
                let end = i + t.len();
                if end == name.len() {
                    return true;
                }
                if name[end..].starts_with('_') {
                    reach[end + 1] = true;
                }
            }
        }
    }
    false
}

/// Checks every name a limits file or FDO stats (`origin`, named in the error) sets limits for: a
/// stack of `spec`, one of its tables, or its tables joined by `_`. An unknown name is an error
/// naming it, the file and the closest valid name.
pub fn check_limit_names<'a>(
    spec: &PreprocessSpec,
    names: impl IntoIterator<Item = &'a str>,
    origin: &str,
) -> Result<(), String> {
    let stacks: Vec<String> = build_stacks(spec).into_iter().map(|s| s.name).collect();
    let tables: Vec<&str> = spec.tables.iter().map(|t| t.name.as_str()).collect();
    for name in names {
        if stacks.iter().any(|s| s == name) || tables.contains(&name) || joins_tables(name, &tables) {
            continue;
        }
        let valid = stacks.iter().map(String::as_str).chain(tables.iter().copied());
        return Err(format!(
            "{origin}: limits for '{name}', which is no stack or table of the workload{}",
            hint(name, valid)
        ));
    }
    Ok(())
}

/// Checks the spec's own `stack_limits`: each names a stack of two or more of its tables.
pub fn check_stack_limits(spec: &PreprocessSpec) -> Result<(), PreprocessError> {
    if spec.stack_limits.is_empty() {
        return Ok(());
    }
    let stacks: Vec<String> = build_stacks(spec)
        .into_iter()
        .filter(|s| s.tables.len() > 1)
        .map(|s| s.name)
        .collect();
    for name in spec.stack_limits.keys() {
        if !stacks.contains(name) {
            return Err(PreprocessError::Spec(format!(
                "stack_limits.{name}: no stack of two or more tables is named '{name}'{}",
                hint(name, stacks.iter().map(String::as_str))
            )));
        }
    }
    Ok(())
}

/// Checks a batch against the spec's features before any work: every feature has ids, rows equal
/// `input_shape[0]`, ragged `row_splits` run from 0 to the values' length without decreasing, weights
/// (where given) match the ids and are finite. Errors name the feature; callers add the file.
pub fn check_batch(spec: &PreprocessSpec, ids: &BatchIds) -> Result<(), PreprocessError> {
    for (i, f) in spec.features.iter().enumerate() {
        let Some(fi) = ids.get(&f.name) else {
            return Err(PreprocessError::Input(format!(
                "no ids for feature '{}' (features[{i}] of the spec){}",
                f.name,
                hint(&f.name, ids.keys().map(String::as_str))
            )));
        };
        fi.validate(&f.name)?;
        if fi.rows() as u64 != f.input_shape[0] {
            return Err(PreprocessError::Input(format!(
                "feature '{}': {} rows, but features[{i}].input_shape is {:?}",
                f.name,
                fi.rows(),
                f.input_shape
            )));
        }
        if let Some(w) = &fi.weights {
            if let Some(at) = w.iter().position(|x| !x.is_finite()) {
                return Err(PreprocessError::Input(format!(
                    "feature '{}': weight {} at position {at} is not a finite number",
                    f.name, w[at]
                )));
            }
        }
    }
    Ok(())
}

/// Checks that every id is in `0..vocabulary_size` of its feature's table. jax-tpu-embedding itself
/// takes ids up to the padded vocabulary (the reference case V2 has them, and `preprocess` stays
/// bit-exact with it), so this is the commands' check of the user's ids, not the library's.
pub fn check_vocabulary(spec: &PreprocessSpec, ids: &BatchIds) -> Result<(), PreprocessError> {
    for f in &spec.features {
        let Some(fi) = ids.get(&f.name) else { continue };
        let vocab = spec
            .tables
            .iter()
            .find(|t| t.name == f.table)
            .map_or(u64::MAX, |t| t.vocabulary_size);
        check_feature_vocabulary(&f.name, &f.table, vocab, &fi.values)?;
    }
    Ok(())
}

/// Checks one feature's ids against its table's vocabulary (see [`check_vocabulary`]).
pub fn check_feature_vocabulary(feature: &str, table: &str, vocab: u64, values: &[i32]) -> Result<(), PreprocessError> {
    // The largest id first (vectorised), its position only when it is out of range.
    let top = values.iter().fold(0i32, |a, &v| a.max(v));
    if top as u64 >= vocab {
        let at = values.iter().position(|&v| v as u64 >= vocab).unwrap_or(0);
        return Err(PreprocessError::Input(format!(
            "feature '{feature}': id {} at position {at} is at or beyond the vocabulary of table '{table}' (vocabulary_size {vocab}: ids 0..={})",
            values[at],
            vocab - 1
        )));
    }
    Ok(())
}

/// Checks that each dense array of the NPZ at `path` has the spec's `input_shape` (ragged arrays
/// have rows + 1 row splits; rows are checked with the ids). Reads the array headers only.
pub fn check_npz_shapes(spec: &PreprocessSpec, path: &std::path::Path) -> Result<(), PreprocessError> {
    let shapes = crate::preprocess::input::npz_shapes(path)?;
    for (i, f) in spec.features.iter().enumerate() {
        // Arrays that are not 2-D are the reader's to refuse, with its own message.
        if let Some(shape) = shapes.get(&f.name).filter(|s| s.len() == 2) {
            if shape != &f.input_shape {
                return Err(PreprocessError::Input(format!(
                    "{}: array '{}' has shape {shape:?}, but features[{i}].input_shape of the spec is {:?} (dense ids have exactly that shape)",
                    path.display(),
                    f.name,
                    f.input_shape
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PreprocessSpec {
        PreprocessSpec::from_json(
            r#"{"num_sc_per_device": 4, "tables": [
                {"name": "user", "vocabulary_size": 1000, "embedding_dim": 16, "combiner": "sum"},
                {"name": "item", "vocabulary_size": 5000, "embedding_dim": 16, "combiner": "sum"},
                {"name": "country", "vocabulary_size": 200, "embedding_dim": 8, "combiner": "mean"}],
              "features": [{"name": "user_id", "table": "user", "input_shape": [8, 1]},
                           {"name": "country", "table": "country", "input_shape": [8, 2]}],
              "stacks": [["user", "item"]]}"#,
        )
        .unwrap()
    }

    #[test]
    fn a_limit_for_a_name_that_matches_nothing_is_refused_with_the_closest() {
        let s = spec();
        for ok in ["user_item", "user", "country", "item_country"] {
            check_limit_names(&s, [ok], "l.json").unwrap();
        }
        let e = check_limit_names(&s, ["usr_item"], "l.json").unwrap_err();
        assert!(
            e.contains("l.json") && e.contains("'usr_item'") && e.contains("did you mean 'user_item'"),
            "{e}"
        );
        let e = check_limit_names(&s, ["zzzzzzzzzzzz"], "l.json").unwrap_err();
        assert!(e.contains("valid: ") && e.contains("country"), "{e}");
    }

    #[test]
    fn ids_past_the_vocabulary_and_nan_weights_are_refused_naming_the_feature() {
        let s = spec();
        let mut b = BatchIds::new();
        b.insert(
            "user_id".into(),
            crate::preprocess::input::FeatureIds::dense(vec![0; 8], 8, 1).unwrap(),
        );
        let mut c = crate::preprocess::input::FeatureIds::dense(vec![1; 16], 8, 2).unwrap();
        c.values[5] = 200; // country's vocabulary is 200: ids 0..=199
        b.insert("country".into(), c.clone());
        check_batch(&s, &b).unwrap();
        let e = check_vocabulary(&s, &b).unwrap_err().to_string();
        assert!(
            e.contains("feature 'country'") && e.contains("id 200 at position 5"),
            "{e}"
        );
        c.values[5] = 199;
        c.weights = Some(vec![1.0; 16]);
        c.weights.as_mut().unwrap()[3] = f32::NAN;
        b.insert("country".into(), c);
        let e = check_batch(&s, &b).unwrap_err().to_string();
        assert!(e.contains("feature 'country'") && e.contains("position 3"), "{e}");
    }

    #[test]
    fn a_stack_limit_naming_no_stack_is_refused() {
        let mut s = spec();
        s.stack_limits.insert("usr_item".into(), Default::default());
        let e = check_stack_limits(&s).unwrap_err().to_string();
        assert!(e.contains("stack_limits.usr_item") && e.contains("user_item"), "{e}");
    }
}
