//! A spec's rules (the contract's), apart from the spec's types: the last rule, that `stack_limits`
//! name real stacks, needs the stacks `stacking` builds from those types and `crosscheck`'s check,
//! which both read the types; here nothing they read depends on them.

use super::error::PreprocessError;
use super::spec::PreprocessSpec;

impl PreprocessSpec {
    /// Checks the rules of the contract.
    pub fn validate(&self) -> Result<(), PreprocessError> {
        let bad = |m: String| Err(PreprocessError::Spec(m));
        if ![1, 2, 4].contains(&self.num_sc_per_device) {
            return bad(format!(
                "num_sc_per_device = {}: must be 1, 2 or 4",
                self.num_sc_per_device
            ));
        }
        if self.local_device_count == 0 || self.global_device_count == 0 {
            return bad(format!(
                "local_device_count = {}, global_device_count = {}: both must be positive",
                self.local_device_count, self.global_device_count
            ));
        }
        if self.local_device_count > self.global_device_count {
            return bad(format!(
                "local_device_count ({}) must not exceed global_device_count ({})",
                self.local_device_count, self.global_device_count
            ));
        }
        let n = self.num_scs();
        if !n.is_power_of_two() {
            return bad(format!("Total number of SparseCores ({n}) must be a power of 2."));
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, t) in self.tables.iter().enumerate() {
            if !names.insert(t.name.as_str()) {
                return bad(format!("tables[{i}].name: duplicate table name '{}'", t.name));
            }
            for (field, v) in [
                ("vocabulary_size", t.vocabulary_size),
                ("embedding_dim", t.embedding_dim),
            ] {
                if v == 0 {
                    return bad(format!(
                        "tables[{i}].{field} (table '{}') = 0: must be positive",
                        t.name
                    ));
                }
            }
            for (field, v) in [
                ("max_ids_per_partition", t.max_ids_per_partition),
                ("max_unique_ids_per_partition", t.max_unique_ids_per_partition),
            ] {
                if v == 0 || v > i32::MAX as u32 {
                    return bad(format!(
                        "tables[{i}].{field} (table '{}') = {v}: must be in 1..={} (an int32 in jax-tpu-embedding)",
                        t.name,
                        i32::MAX
                    ));
                }
            }
        }
        let mut fnames = std::collections::BTreeSet::new();
        let rows_div = self.local_device_count as u64 * self.num_sc_per_device as u64;
        for (i, f) in self.features.iter().enumerate() {
            if !fnames.insert(f.name.as_str()) {
                return bad(format!("features[{i}].name: duplicate feature name '{}'", f.name));
            }
            if !names.contains(f.table.as_str()) {
                return bad(format!(
                    "features[{i}].table (feature '{}'): unknown table '{}'",
                    f.name, f.table
                ));
            }
            if f.input_shape.len() != 2 || f.input_shape[0] == 0 {
                return bad(format!(
                    "features[{i}].input_shape (feature '{}') = {:?}: must be [rows, valency] with rows > 0",
                    f.name, f.input_shape
                ));
            }
            if !f.input_shape[0].is_multiple_of(rows_div) {
                return bad(format!(
                    "features[{i}].input_shape (feature '{}'): {} rows are not divisible by local_device_count x num_sc_per_device = {rows_div}",
                    f.name, f.input_shape[0]
                ));
            }
        }
        let mut stacked = std::collections::BTreeSet::new();
        for (i, s) in self.stacks.iter().enumerate() {
            if s.len() < 2 {
                return bad(format!("stacks[{i}]: a stack lists at least 2 tables"));
            }
            let mut combiner = None;
            for t in s {
                let Some(table) = self.tables.iter().find(|x| &x.name == t) else {
                    return bad(format!("stacks[{i}]: unknown table '{t}'"));
                };
                if !stacked.insert(t.as_str()) {
                    return bad(format!("stacks[{i}]: table '{t}' is in more than one stack"));
                }
                if combiner.is_some_and(|c| c != table.combiner) {
                    return bad(format!("stacks[{i}]: tables of a stack must share one combiner"));
                }
                combiner = Some(table.combiner);
            }
        }
        for (name, l) in &self.stack_limits {
            for (field, v) in [
                ("max_ids_per_partition", l.max_ids_per_partition.map(u64::from)),
                (
                    "max_unique_ids_per_partition",
                    l.max_unique_ids_per_partition.map(u64::from),
                ),
                (
                    "suggested_coo_buffer_size_per_device",
                    l.suggested_coo_buffer_size_per_device,
                ),
            ] {
                if let Some(v) = v.filter(|&v| v == 0 || v > i32::MAX as u64) {
                    return bad(format!(
                        "stack_limits.{name}.{field} = {v}: must be in 1..={} (an int32 in jax-tpu-embedding)",
                        i32::MAX
                    ));
                }
            }
        }
        crate::crosscheck::check_stack_limits(self)
    }
}
