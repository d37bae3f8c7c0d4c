//! Limits bound to tables, not to stack names. A limits file, an FDO directory or a workload names
//! its limits by a key: a table, or a stack named by its tables (jax-tpu-embedding's stack name,
//! the tables joined by `_`, hashed past 50 characters). Stacking depends on the batch, so the stacks
//! of a run need not be the ones the key was written for; each stack takes the limits of the keys
//! that name its tables:
//! - a key naming all of the stack's tables and no others, or a larger stack the stack is a piece
//!   of: that key's limits (a subset of a stack's tables sends a partition no more ids than the
//!   whole stack at the same batch);
//! - keys naming parts of the stack: the sum of their limits (a partition of the stack receives the
//!   ids of each part), plus the default limits once for tables no key names.
//!
//! The same table named by several keys takes the first source's (sources come in precedence
//! order) and, within it, the key naming the fewest tables.

use std::collections::BTreeMap;

use sim_core::summary::{LimitsFrom, LimitsOrigin};

use super::files::StackLimit;
use crate::preprocess::{build_stacks, stack_name, PreprocessSpec, StackLimits};

/// Limits by key from one source.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyedLimits {
    /// Where they come from.
    pub origin: LimitsOrigin,
    /// Limits by key (a table name, or a stack name).
    pub limits: BTreeMap<String, StackLimit>,
}

/// A spec with keyed limits applied, and where every stack's limits came from.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedLimits {
    /// The spec with the limits in force.
    pub spec: PreprocessSpec,
    /// Per stack name (stacks of `spec`): the sources of its limits, the default included when
    /// some of its tables are named by no key.
    pub sources: BTreeMap<String, Vec<LimitsFrom>>,
    /// Keys that name no table of the spec (origin, key), in source order.
    pub unknown: Vec<(LimitsOrigin, String)>,
}

/// The ordered table lists within which automatic stacking forms stacks as contiguous runs, when
/// the caller knows no better: the spec's tables grouped by (padded dim, combiner), in spec order,
/// and all its tables in spec order.
pub fn stacking_classes(spec: &PreprocessSpec) -> Vec<Vec<String>> {
    let mut classes: Vec<((u64, String), Vec<String>)> = Vec::new();
    for t in &spec.tables {
        let key = (t.embedding_dim.div_ceil(8) * 8, format!("{:?}", t.combiner));
        match classes.iter_mut().find(|c| c.0 == key) {
            Some(c) => c.1.push(t.name.clone()),
            None => classes.push((key, vec![t.name.clone()])),
        }
    }
    let mut out: Vec<Vec<String>> = classes.into_iter().map(|c| c.1).collect();
    out.push(spec.tables.iter().map(|t| t.name.clone()).collect());
    out
}

/// The tables a key names, in order: a table's name; a stack name spelled out (tables joined by
/// `_`, read against the spec's table names); or a hashed stack name (longer than 50 characters),
/// matched against the name of every contiguous run of tables in `classes`. None when it names none.
pub fn key_tables(spec: &PreprocessSpec, classes: &[Vec<String>], key: &str) -> Option<Vec<String>> {
    if spec.tables.iter().any(|t| t.name == key) {
        return Some(vec![key.to_string()]);
    }
    if let Some(tables) = split_joined(spec, key) {
        return Some(tables);
    }
    if !key.contains("...") {
        return None;
    }
    for class in classes {
        for start in 0..class.len() {
            for end in start + 2..=class.len() {
                if stack_name(&class[start..end]) == key {
                    return Some(class[start..end].to_vec());
                }
            }
        }
    }
    None
}

/// `key` read as table names joined by `_` (at least two), the longest name first at each position.
fn split_joined(spec: &PreprocessSpec, key: &str) -> Option<Vec<String>> {
    let mut names: Vec<&str> = spec.tables.iter().map(|t| t.name.as_str()).collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    // reach[i]: the table ending a parse of key[..i] (start index, name); filled left to right.
    let n = key.len();
    let mut reach: Vec<Option<(usize, &str)>> = vec![None; n + 1];
    for i in 0..n {
        if i > 0 && (reach[i].is_none() || !key[i..].starts_with('_')) {
            continue;
        }
        let from = if i == 0 { 0 } else { i + 1 };
        for name in &names {
            let end = from + name.len();
            if end <= n
                && key[from..].starts_with(name)
                && reach[end].is_none()
                && (end == n || key[end..].starts_with('_'))
            {
                reach[end] = Some((i, name));
            }
        }
    }
    let mut tables = Vec::new();
    let mut at = n;
    while at > 0 {
        let (start, name) = reach[at]?;
        tables.push(name.to_string());
        at = start;
    }
    tables.reverse();
    (tables.len() >= 2).then_some(tables)
}

/// Applies keyed limits (sources in precedence order, the first wins) to the stacks `spec` builds;
/// the limits already in the spec are the default.
pub fn resolve_limits(spec: &PreprocessSpec, classes: &[Vec<String>], sources: &[KeyedLimits]) -> ResolvedLimits {
    // Every key's tables, per source; unknown keys are kept aside.
    let mut unknown = Vec::new();
    let keyed: Vec<Vec<(&String, Vec<String>, &StackLimit)>> = sources
        .iter()
        .map(|src| {
            src.limits
                .iter()
                .filter_map(|(k, l)| match key_tables(spec, classes, k) {
                    Some(t) => Some((k, t, l)),
                    None => {
                        unknown.push((src.origin, k.clone()));
                        None
                    }
                })
                .collect()
        })
        .collect();
    let mut out = spec.clone();
    let mut origins = BTreeMap::new();
    for stack in build_stacks(spec) {
        // Each table's key: the first source naming it, its narrowest key there.
        let mut parts: Vec<(usize, &String, &StackLimit)> = Vec::new();
        let mut unnamed = false;
        for t in &stack.tables {
            let found = keyed.iter().enumerate().find_map(|(si, keys)| {
                keys.iter()
                    .filter(|(_, tables, _)| tables.contains(&t.name))
                    .min_by_key(|(_, tables, _)| tables.len())
                    .map(|(k, _, l)| (si, *k, *l))
            });
            match found {
                Some(p) if !parts.iter().any(|q| q.0 == p.0 && q.1 == p.1) => parts.push(p),
                Some(_) => {}
                None => unnamed = true,
            }
        }
        let mut from: Vec<LimitsFrom> = parts
            .iter()
            .map(|(si, k, _)| LimitsFrom {
                origin: sources[*si].origin,
                key: Some((*k).clone()),
            })
            .collect();
        if parts.is_empty() {
            origins.insert(stack.name.clone(), vec![LimitsFrom::default()]);
            continue;
        }
        let default = StackLimit {
            max_ids_per_partition: u64::from(stack.max_ids_per_partition),
            max_unique_ids_per_partition: u64::from(stack.max_unique_ids_per_partition),
            suggested_coo_buffer_size_per_device: None,
        };
        if unnamed {
            from.push(LimitsFrom::default());
        }
        let all: Vec<&StackLimit> = parts.iter().map(|p| p.2).chain(unnamed.then_some(&default)).collect();
        let clamp = |x: u64| x.clamp(1, i32::MAX as u64) as u32;
        let ids = clamp(all.iter().map(|l| l.max_ids_per_partition).fold(0, u64::saturating_add));
        let unique = clamp(
            all.iter()
                .map(|l| l.max_unique_ids_per_partition)
                .fold(0, u64::saturating_add),
        );
        let suggested = all
            .iter()
            .map(|l| l.suggested_coo_buffer_size_per_device)
            .sum::<Option<u64>>()
            .map(|v| v.clamp(1, i32::MAX as u64));
        if stack.tables.len() == 1 {
            if let Some(t) = out.tables.iter_mut().find(|t| t.name == stack.tables[0].name) {
                t.max_ids_per_partition = ids;
                t.max_unique_ids_per_partition = unique;
                t.suggested_coo_buffer_size_per_device = suggested;
            }
        } else {
            out.stack_limits.insert(
                stack.name.clone(),
                StackLimits {
                    max_ids_per_partition: Some(ids),
                    max_unique_ids_per_partition: Some(unique),
                    suggested_coo_buffer_size_per_device: suggested,
                },
            );
        }
        origins.insert(stack.name.clone(), from);
    }
    ResolvedLimits {
        spec: out,
        sources: origins,
        unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocess::{Combiner, FeatureSpec, TableSpec};

    fn spec(stacks: Vec<Vec<&str>>) -> PreprocessSpec {
        let table = |name: &str| TableSpec {
            name: name.into(),
            vocabulary_size: 1000,
            embedding_dim: 8,
            combiner: Combiner::Sum,
            max_ids_per_partition: 256,
            max_unique_ids_per_partition: 256,
            suggested_coo_buffer_size_per_device: None,
        };
        let names = ["emb0", "emb1", "emb2", "emb3", "emb_x"];
        PreprocessSpec {
            num_sc_per_device: 4,
            local_device_count: 1,
            global_device_count: 1,
            allow_id_dropping: false,
            enable_minibatching: false,
            tables: names.iter().map(|n| table(n)).collect(),
            features: names
                .iter()
                .map(|n| FeatureSpec {
                    name: format!("f_{n}"),
                    table: n.to_string(),
                    input_shape: vec![64, 1],
                })
                .collect(),
            stacks: stacks
                .into_iter()
                .map(|g| g.into_iter().map(String::from).collect())
                .collect(),
            stack_limits: Default::default(),
        }
    }

    fn limit(ids: u64, unique: u64) -> StackLimit {
        StackLimit {
            max_ids_per_partition: ids,
            max_unique_ids_per_partition: unique,
            suggested_coo_buffer_size_per_device: None,
        }
    }

    fn file(keys: &[(&str, StackLimit)]) -> KeyedLimits {
        KeyedLimits {
            origin: LimitsOrigin::File,
            limits: keys.iter().map(|(k, l)| (k.to_string(), l.clone())).collect(),
        }
    }

    fn limits_of(r: &ResolvedLimits, stack: &str) -> (u32, u32) {
        let s = build_stacks(&r.spec).into_iter().find(|s| s.name == stack).unwrap();
        (s.max_ids_per_partition, s.max_unique_ids_per_partition)
    }

    #[test]
    fn a_stack_split_into_single_tables_keeps_its_limit() {
        // Written for emb0_emb1_emb2_emb3; at this batch every table is a stack of its own.
        let s = spec(vec![]);
        let f = file(&[("emb0_emb1_emb2_emb3", limit(30_000, 9_000))]);
        let r = resolve_limits(&s, &stacking_classes(&s), &[f]);
        for t in ["emb0", "emb1", "emb2", "emb3"] {
            assert_eq!(limits_of(&r, t), (30_000, 9_000), "{t}");
            assert_eq!(
                r.sources[t],
                vec![LimitsFrom {
                    origin: LimitsOrigin::File,
                    key: Some("emb0_emb1_emb2_emb3".into())
                }]
            );
        }
        // A table the key does not name keeps the default.
        assert_eq!(limits_of(&r, "emb_x"), (256, 256));
        assert_eq!(r.sources["emb_x"], vec![LimitsFrom::default()]);
        assert!(r.unknown.is_empty());
    }

    #[test]
    fn tables_stacked_together_add_their_limits() {
        // Limits written per table; at this batch emb0 and emb1 share a stack: 100 + 60 ids reach a
        // partition at most; emb2 is named by no key and adds the default 256 once.
        let s = spec(vec![vec!["emb0", "emb1", "emb2"]]);
        let f = file(&[("emb0", limit(100, 40)), ("emb1", limit(60, 20))]);
        let r = resolve_limits(&s, &stacking_classes(&s), &[f]);
        assert_eq!(limits_of(&r, "emb0_emb1_emb2"), (100 + 60 + 256, 40 + 20 + 256));
        assert_eq!(r.sources["emb0_emb1_emb2"].len(), 3);
    }

    #[test]
    fn the_first_source_wins_and_unknown_keys_are_listed() {
        let s = spec(vec![vec!["emb0", "emb1"]]);
        let workload = KeyedLimits {
            origin: LimitsOrigin::Workload,
            limits: [("emb0_emb1".to_string(), limit(880, 400))].into(),
        };
        let f = file(&[("emb0_emb1", limit(30_000, 9_000)), ("nope", limit(8, 8))]);
        let r = resolve_limits(&s, &stacking_classes(&s), &[workload, f]);
        assert_eq!(limits_of(&r, "emb0_emb1"), (880, 400));
        assert_eq!(r.sources["emb0_emb1"][0].origin, LimitsOrigin::Workload);
        assert_eq!(r.unknown, vec![(LimitsOrigin::File, "nope".to_string())]);
    }

    #[test]
    fn keys_are_read_against_table_names_with_underscores() {
        let s = spec(vec![]);
        let classes = stacking_classes(&s);
        assert_eq!(
            key_tables(&s, &classes, "emb_x_emb0"),
            Some(vec!["emb_x".to_string(), "emb0".to_string()])
        );
        assert_eq!(key_tables(&s, &classes, "emb_x"), Some(vec!["emb_x".to_string()]));
        assert_eq!(key_tables(&s, &classes, "emb_y_emb0"), None);
        assert_eq!(key_tables(&s, &classes, "emb0_"), None);
    }

    #[test]
    fn hashed_stack_names_are_matched_by_their_tables() {
        let mut s = spec(vec![]);
        for t in &mut s.tables {
            t.name = format!("{}_with_a_rather_long_feature_name", t.name);
        }
        let classes = stacking_classes(&s);
        let group: Vec<String> = s.tables[1..4].iter().map(|t| t.name.clone()).collect();
        let key = stack_name(&group);
        assert!(key.contains("..."), "{key}");
        assert_eq!(key_tables(&s, &classes, &key), Some(group));
    }
}
