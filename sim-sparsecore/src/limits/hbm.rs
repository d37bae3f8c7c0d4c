//! HBM estimates of the SparseCore guide (openxla.org/xla/sparsecore §9) and jax-tpu-embedding's
//! COO-buffer sizing rules.

/// Forward-pass HBM stack of one table: (2 x feature_width + 1) x max_unique x replicas x 4 B.
pub fn forward_stack_bytes(feature_width: u64, max_unique: u64, logical_replicas: u64) -> u64 {
    (2 * feature_width + 1) * max_unique * logical_replicas * 4
}

/// Backward-pass HBM stack of one table: 3 x feature_width x max_unique x replicas x 4 B.
pub fn backward_stack_bytes(feature_width: u64, max_unique: u64, logical_replicas: u64) -> u64 {
    3 * feature_width * max_unique * logical_replicas * 4
}

/// Bytes of one COO entry (embedding id, sample id, gain).
pub const COO_ENTRY_BYTES: u64 = 12;

/// jax-tpu-embedding's theoretical maximum COO buffer per device: roundup8(max_ids) x SparseCores per
/// device x SparseCores in all (x 64 with minibatching).
pub fn theoretical_max_coo(max_ids: u64, global_devices: u64, sc_per_device: u64, minibatching: bool) -> u64 {
    max_ids.div_ceil(8) * 8 * sc_per_device * sc_per_device * global_devices * if minibatching { 64 } else { 1 }
}

/// Row pointers per device: max(SparseCores in all, 8) x SparseCores per device (x 64 with minibatching).
pub fn row_pointers_len(global_devices: u64, sc_per_device: u64, minibatching: bool) -> u64 {
    (global_devices * sc_per_device).max(8) * sc_per_device * if minibatching { 64 } else { 1 }
}

/// One table of a stack, as HBM sizing sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableHbmInput {
    /// Table name.
    pub name: String,
    /// Rows as stored (the vocabulary padded for sharding).
    pub padded_rows: u64,
    /// Rows of the vocabulary.
    pub rows: u64,
    /// The table's own embedding dim.
    pub dim: u64,
}

/// One stack, as HBM sizing sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackHbmInput {
    /// Stack name.
    pub name: String,
    /// Its tables.
    pub tables: Vec<TableHbmInput>,
    /// The stack's embedding dim (rows are stored at this width).
    pub dim: u64,
    /// Bytes per element.
    pub elem_bytes: u64,
    /// Optimizer slot rows per table row.
    pub slots: u64,
    /// max_unique_ids_per_partition in force.
    pub max_unique: u64,
}

impl StackHbmInput {
    /// A stack as preprocessing builds it, its tables' vocabularies and dims from `spec`.
    pub fn from_stack(
        spec: &crate::preprocess::PreprocessSpec,
        stack: &crate::preprocess::Stack,
        elem_bytes: u64,
        slots: u64,
    ) -> StackHbmInput {
        StackHbmInput {
            name: stack.name.clone(),
            tables: stack
                .tables
                .iter()
                .map(|t| {
                    let def = spec.tables.iter().find(|x| x.name == t.name);
                    TableHbmInput {
                        name: t.name.clone(),
                        padded_rows: t.padded_vocab,
                        rows: def.map_or(t.padded_vocab, |x| x.vocabulary_size),
                        dim: def.map_or(stack.stack_embedding_dim, |x| x.embedding_dim),
                    }
                })
                .collect(),
            dim: stack.stack_embedding_dim,
            elem_bytes,
            slots,
            max_unique: stack.max_unique_ids_per_partition as u64,
        }
    }
}

/// HBM the SparseCore embedding needs on one shard (a chip or a device).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseCoreHbm {
    /// Per table: name, bytes as stored (rows padded to the DMA granule, with slots), bytes unpadded.
    pub tables: Vec<(String, u64, u64)>,
    /// Sum of the tables' stored bytes.
    pub tables_bytes: u64,
    /// Per stack: the guide's forward and backward HBM stack estimates.
    pub stack_estimates: Vec<(String, u64, u64)>,
    /// Peak SparseCore HBM stack: all stacks live at once, or one serial group at a time; the
    /// forward and backward programs do not overlap, so the larger sum is the peak.
    pub stack_peak_bytes: u64,
}

impl SparseCoreHbm {
    /// Tables plus the peak stack.
    pub fn total_bytes(&self) -> u64 {
        self.tables_bytes.saturating_add(self.stack_peak_bytes)
    }
}

/// The one HBM sizing of SparseCore tables and stacks, shared by `tpusim run` and `limits validate`:
/// each of `shards` holders keeps 1/shards of every table's rows, each row padded to `granule` bytes
/// (`model::padded_row_bytes`) and followed by its optimizer slots; `serial` > 0 processes stacks in
/// groups of that many (`xla_sc_num_serialized_tables_to_optimize_hbm`).
pub fn sparsecore_hbm(stacks: &[StackHbmInput], shards: u64, granule: u64, serial: usize) -> SparseCoreHbm {
    let shards = shards.max(1);
    let mut out = SparseCoreHbm::default();
    let mut est = Vec::new();
    for s in stacks {
        let row = crate::model::padded_row_bytes(s.dim, s.elem_bytes, granule);
        for t in &s.tables {
            let stored = (t.padded_rows / shards).saturating_mul(row).saturating_mul(1 + s.slots);
            let unpadded = (t.rows / shards)
                .saturating_mul(t.dim * s.elem_bytes)
                .saturating_mul(1 + s.slots);
            out.tables_bytes = out.tables_bytes.saturating_add(stored);
            out.tables.push((t.name.clone(), stored, unpadded));
        }
        let f = forward_stack_bytes(s.dim, s.max_unique, 1);
        let b = backward_stack_bytes(s.dim, s.max_unique, 1);
        out.stack_estimates.push((s.name.clone(), f, b));
        est.push((f, b));
    }
    let group_peak = |c: &[(u64, u64)]| {
        c.iter()
            .map(|x| x.0)
            .sum::<u64>()
            .max(c.iter().map(|x| x.1).sum::<u64>())
    };
    out.stack_peak_bytes = if serial == 0 {
        group_peak(&est)
    } else {
        est.chunks(serial).map(group_peak).max().unwrap_or(0)
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizing_by_hand() {
        // Two stacks of dim 100 f32 (rows padded to 104 x 4 = 416 B at a 32 B granule), 4 shards,
        // Adagrad (1 slot): a 1,000-row table keeps 250 x 416 x 2 = 208,000 B per shard.
        let t = |n: &str, rows| TableHbmInput {
            name: n.into(),
            padded_rows: rows,
            rows,
            dim: 100,
        };
        let s = |n: &str, tables, max_unique| StackHbmInput {
            name: n.into(),
            tables,
            dim: 100,
            elem_bytes: 4,
            slots: 1,
            max_unique,
        };
        let stacks = vec![s("a", vec![t("t0", 1000)], 8), s("b", vec![t("t1", 400)], 16)];
        let h = sparsecore_hbm(&stacks, 4, 32, 0);
        assert_eq!(h.tables[0], ("t0".into(), 208_000, 250 * 400 * 2));
        assert_eq!(h.tables_bytes, 208_000 + 100 * 416 * 2);
        // Forward (2 x 100 + 1) x 8 x 4 = 6,432 and x 16: 12,864; backward 3 x 100 x 4 x 8 = 9,600
        // and 19,200: all live the backward sum 28,800 is the peak; one at a time 19,200.
        assert_eq!(h.stack_peak_bytes, 28_800);
        assert_eq!(sparsecore_hbm(&stacks, 4, 32, 1).stack_peak_bytes, 19_200);
    }

    #[test]
    fn v13_sizes() {
        assert_eq!(row_pointers_len(1, 4, false), 32);
        assert_eq!(row_pointers_len(4, 4, false), 64);
        assert_eq!(row_pointers_len(1, 4, true), 2048);
        assert_eq!(theoretical_max_coo(12, 1, 4, false), 256);
        assert_eq!(theoretical_max_coo(12, 1, 4, true), 16384);
        assert_eq!(theoretical_max_coo(100, 8, 2, false), 3328);
        // Guide: fwd (2*128+1) * 256 * 1 * 4.
        assert_eq!(forward_stack_bytes(128, 256, 1), 263_168);
        assert_eq!(backward_stack_bytes(128, 256, 1), 393_216);
    }
}
