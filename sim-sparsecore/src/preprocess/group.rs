//! Per stack: extraction of (sample, column, gain) per SparseCore, the sort, within-sample dedup,
//! id dropping, statistics, and filling the CSR buffers.

use rayon::prelude::*;

use super::minibatch::{bucket_of, compute_split, for_each_merge};
use super::radix;
use super::spec::{Combiner, PreprocessSpec};
use super::stacking::Stack;
use super::tally;
use super::{
    FeatureIds, LimitExceeded, LimitKind, Options, PreprocessError, StackOutput, ALIGNMENT, MINIBATCH_BUCKETS,
    PAD_VALUE,
};

/// Bits of the key's data field (the extraction index).
const DATA_BITS: u32 = 26;
const DATA_MASK: u64 = (1 << DATA_BITS) - 1;

/// One grouped id: device sample id, column in the stack, gain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Coo {
    pub row: u32,
    pub col: u32,
    pub gain: f32,
}

/// One source SparseCore's grouped ids.
pub(super) struct ScGroups {
    pub coos: Vec<Coo>,
    /// Start of each bucket in `coos`, plus the end (buckets + 1 entries).
    pub bucket_offsets: Vec<usize>,
    /// Observed ids per (partition, bucket) after dedup, before dropping.
    pub ids: Vec<u32>,
    /// Observed unique columns per (partition, bucket).
    pub unique: Vec<u32>,
    pub dropped: u64,
    /// Counting met a column outside its column set: group by sorting instead.
    pub needs_sort: bool,
}

impl ScGroups {
    /// A SparseCore grouped by counting alone: its counts and no ids.
    pub fn counted(ids: Vec<u32>, unique: Vec<u32>, buckets: usize) -> ScGroups {
        ScGroups {
            coos: Vec::new(),
            bucket_offsets: vec![0; buckets + 1],
            ids,
            unique,
            dropped: 0,
            needs_sort: false,
        }
    }
}

/// A stack's grouped ids on every local device and SparseCore.
pub(super) struct StackGroups {
    /// [device][sparsecore].
    pub devices: Vec<Vec<ScGroups>>,
    pub batch_per_sc: u32,
    pub buckets: usize,
    /// Some partition exceeds a limit (pass 1 of minibatching).
    pub exceeds_limits: bool,
    /// Split bits ORed over SparseCores and partitions (pass 2).
    pub split: u64,
    /// Grouped by counting only (`coos` empty): exact statistics as long as no id is dropped.
    pub counted_only: bool,
    /// The counting pass cannot give exact statistics (ids would be dropped, or a column lies
    /// outside its column set): group again by sorting.
    pub needs_sort: bool,
    /// With `report_limits`: the first limit the spec without dropping would have failed on.
    pub violation: Option<LimitExceeded>,
}

fn round8(x: u64) -> u64 {
    x.div_ceil(ALIGNMENT as u64) * ALIGNMENT as u64
}

impl StackGroups {
    /// No devices grouped yet, no limit exceeded.
    pub(super) fn empty(batch_per_sc: u32, buckets: usize, counted_only: bool) -> StackGroups {
        StackGroups {
            devices: Vec::new(),
            batch_per_sc,
            buckets,
            exceeds_limits: false,
            split: 0,
            counted_only,
            needs_sort: false,
            violation: None,
        }
    }
}

/// Extracts, sorts and groups one stack. With `report_limits` (and a spec that drops ids), a
/// limit the spec without dropping would fail on is recorded in `violation` instead.
pub(super) fn group_stack(
    spec: &PreprocessSpec,
    stack: &Stack,
    features: &[&FeatureIds],
    buckets_on: bool,
    count_only: bool,
    report_limits: bool,
) -> Result<StackGroups, PreprocessError> {
    let nsc = spec.num_sc_per_device as u64;
    let ldev = spec.local_device_count as u64;
    let gdev = spec.global_device_count as u64;
    let num_scs = spec.num_scs();
    let sc_bits = num_scs.trailing_zeros();
    let mask = num_scs - 1;
    let buckets = if buckets_on { MINIBATCH_BUCKETS } else { 1 };
    let batch_per_sc = batch_per_sc(spec, stack, |f| features[f].rows() as u64)?;
    let perform_drop = spec.allow_id_dropping && (!spec.enable_minibatching || buckets_on);
    let (max_ids, max_unique) = (stack.max_ids_per_partition, stack.max_unique_ids_per_partition);
    let mut out = StackGroups::empty(batch_per_sc as u32, buckets, count_only);
    for d in 0..ldev {
        let work = |s: u64| -> Result<ScGroups, PreprocessError> {
            let mut rows: Vec<u32> = Vec::new();
            let mut gains: Vec<f32> = Vec::new();
            let mut keys: Vec<u64> = Vec::new();
            let total: usize = stack
                .features
                .iter()
                .map(|fis| {
                    let f = features[fis.feature];
                    let n = f.rows() as u64 / (ldev * nsc);
                    let a = (d * nsc + s) * n;
                    f.row_splits[(a + n) as usize] - f.row_splits[a as usize]
                })
                .sum();
            check_sc_ids(stack, total as u64)?;
            if count_only {
                let drop = perform_drop.then_some((max_ids, max_unique));
                return Ok(count_sc(
                    stack, features, d, s, ldev, nsc, num_scs, buckets, total, drop,
                ));
            }
            rows.reserve(total);
            gains.reserve(total);
            keys.reserve(total);
            for fis in &stack.features {
                let f = features[fis.feature];
                let n = f.rows() as u64 / (ldev * nsc);
                let slice_start = (d * nsc + s) * n;
                let base = s * batch_per_sc + fis.row_offset / (gdev * nsc);
                let (shift, offset) = (fis.col_shift as u32, fis.col_offset as u32);
                for r in slice_start..slice_start + n {
                    let (a, b) = (f.row_splits[r as usize], f.row_splits[r as usize + 1]);
                    let row = (base + r - slice_start) as u32;
                    let divisor = row_divisor(stack.combiner, f, a, b);
                    for k in a..b {
                        let id = f.values[k] as u32;
                        let col = (id.wrapping_add(shift) & mask)
                            .wrapping_add(id & !mask)
                            .wrapping_add(offset);
                        let w = f.weights.as_ref().map_or(1.0f32, |w| w[k]);
                        let index = rows.len() as u64;
                        let bucket = if buckets_on { bucket_of(col) as u64 } else { 0 };
                        keys.push((bucket << 58) | ((col.rotate_right(sc_bits) as u64) << DATA_BITS) | index);
                        rows.push(row);
                        gains.push(w / divisor);
                    }
                }
            }
            radix::sort_keys(&mut keys, &mut Vec::new());
            Ok(group_sc(
                &keys,
                &rows,
                &gains,
                sc_bits,
                num_scs,
                buckets,
                perform_drop,
                max_ids,
                max_unique,
            ))
        };
        // SparseCores are independent: group them in parallel.
        let results: Vec<Result<ScGroups, PreprocessError>> = (0..nsc).into_par_iter().map(work).collect();
        let mut scs = Vec::with_capacity(nsc as usize);
        for (s, sc) in results.into_iter().enumerate() {
            let sc = sc?;
            let s = s as u64;
            if sc.needs_sort {
                out.needs_sort = true;
                return Ok(out);
            }
            check_sc(spec, stack, d, s, &sc, report_limits, &mut out)?;
            scs.push(sc);
        }
        out.devices.push(scs);
    }
    Ok(out)
}

/// Samples per SparseCore of a stack whose features have `rows(feature index)` rows, with the
/// errors jax-tpu-embedding gives for a batch it cannot split.
pub(super) fn batch_per_sc(
    spec: &PreprocessSpec,
    stack: &Stack,
    rows: impl Fn(usize) -> u64,
) -> Result<u64, PreprocessError> {
    let nsc = spec.num_sc_per_device as u64;
    let ldev = spec.local_device_count as u64;
    let batch_for_device: u64 = stack.features.iter().map(|f| rows(f.feature) / ldev).sum();
    if !batch_for_device.is_multiple_of(nsc) {
        return Err(PreprocessError::Spec(format!(
            "stack {}: the per-device batch ({batch_for_device}) is not divisible by num_sc_per_device ({nsc})",
            stack.name
        )));
    }
    if batch_for_device >= (1 << DATA_BITS) {
        return Err(PreprocessError::Spec(format!(
            "stack {}: per-device batch {batch_for_device} exceeds 2^26 - 1",
            stack.name
        )));
    }
    Ok(batch_for_device / nsc)
}

/// Whether one SparseCore's ids fit the sort key's index field (else the error to give).
pub(super) fn check_sc_ids(stack: &Stack, total: u64) -> Result<(), PreprocessError> {
    if total > DATA_MASK + 1 {
        return Err(PreprocessError::Input(format!(
            "stack {}: more than 2^26 ids for one SparseCore",
            stack.name
        )));
    }
    Ok(())
}

/// The checks of one grouped SparseCore (device `d`, SparseCore `s`) in jax-tpu-embedding's order:
/// limits (unless dropping or before minibatching), then the minibatching split or overflow flag.
pub(super) fn check_sc(
    spec: &PreprocessSpec,
    stack: &Stack,
    d: u64,
    s: u64,
    sc: &ScGroups,
    report_limits: bool,
    out: &mut StackGroups,
) -> Result<(), PreprocessError> {
    let buckets = out.buckets;
    let buckets_on = buckets > 1;
    let num_scs = spec.num_scs();
    let check_limits = !spec.enable_minibatching || buckets_on;
    let (max_ids, max_unique) = (stack.max_ids_per_partition, stack.max_unique_ids_per_partition);
    // Limits (jax-tpu-embedding validates per SparseCore, ids before unique ids).
    if check_limits && (!spec.allow_id_dropping || report_limits) {
        for (counts, kind, limit) in [
            (&sc.ids, LimitKind::MaxIds, max_ids),
            (&sc.unique, LimitKind::MaxUniqueIds, max_unique),
        ] {
            if let Some((pos, &observed)) = counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > limit)
                .max_by_key(|(i, &c)| (c, std::cmp::Reverse(*i)))
            {
                let e = LimitExceeded {
                    stack: stack.name.clone(),
                    kind,
                    partition: (pos / buckets) as u32,
                    device: d as u32,
                    sparsecore: s as u32,
                    observed,
                    limit,
                };
                if !report_limits {
                    return Err(PreprocessError::LimitExceeded(e));
                }
                // The first one, as the failing run would report it; ids are dropped on.
                out.violation.get_or_insert(e);
                break;
            }
        }
    }
    if spec.enable_minibatching {
        if buckets_on {
            for p in 0..num_scs as usize {
                let r = p * buckets..(p + 1) * buckets;
                out.split |= compute_split(&mut sc.ids[r.clone()].to_vec(), max_ids);
                out.split |= compute_split(&mut sc.unique[r].to_vec(), max_unique);
            }
        } else {
            out.exceeds_limits |= sc.ids.iter().any(|&c| c > max_ids) || sc.unique.iter().any(|&c| c > max_unique);
        }
    }
    Ok(())
}

/// Columns one SparseCore has seen: a bitset over the stack's columns when it is small against the
/// ids, else an open-addressing hash set sized to the ids. Membership is all the statistics need: a
/// column's first sighting is a unique id. (Buckets come from `bucket_of`'s process-wide memo.)
enum ColumnSet {
    /// Bit `col` set once seen; `columns` the bitset's extent.
    Bits { words: Vec<u64>, columns: u64 },
    /// Slots hold column + 1 (0: empty); `shift` keeps a hash's top bits.
    Hash { slots: Vec<u32>, shift: u32 },
}

/// Bitsets are used up to this many columns (8 MiB of bits).
const MAX_BITSET_COLUMNS: u64 = 1 << 26;

impl ColumnSet {
    fn new(columns: u64, ids: usize) -> ColumnSet {
        // A bitset costs columns / 8 bytes to clear, a hash set ~8 bytes per id: take the smaller.
        if columns <= MAX_BITSET_COLUMNS && columns / 8 <= (ids as u64 * 8).max(1 << 16) {
            ColumnSet::Bits {
                words: vec![0; (columns as usize).div_ceil(64)],
                columns,
            }
        } else {
            let bits = (ids.max(8) * 2).next_power_of_two().trailing_zeros();
            ColumnSet::Hash {
                slots: vec![0; 1 << bits],
                shift: 32 - bits,
            }
        }
    }

    /// Records `col`: Some(first sighting), or None if the set cannot hold it.
    #[inline]
    fn insert(&mut self, col: u32) -> Option<bool> {
        match self {
            ColumnSet::Bits { words, columns } => {
                if col as u64 >= *columns {
                    return None;
                }
                let w = &mut words[col as usize / 64];
                let bit = 1u64 << (col % 64);
                let new = *w & bit == 0;
                *w |= bit;
                Some(new)
            }
            ColumnSet::Hash { slots, shift } => {
                let key = col.checked_add(1)?;
                let mask = slots.len() - 1;
                let mut i = (key.wrapping_mul(0x9E37_79B1) >> *shift) as usize;
                loop {
                    let slot = slots[i];
                    if slot == key {
                        return Some(false);
                    }
                    if slot == 0 {
                        slots[i] = key;
                        return Some(true);
                    }
                    i = (i + 1) & mask;
                }
            }
        }
    }
}

/// One source SparseCore's statistics by counting instead of sorting: per (partition, bucket) the
/// ids after within-sample dedup and the unique columns, in one pass over its rows. Equal to
/// `group_sc`'s counts (its sort only orders what is counted here). With dropping on
/// (`drop_limits`: max ids, max unique ids), each (row, column) pair is also kept with its raw ids,
/// and only the cells over a limit are ordered (by column, then row, as the sort would) to find
/// the pairs past a limit, whose raw ids are dropped. `coos` stays empty.
#[allow(clippy::too_many_arguments)]
fn count_sc(
    stack: &Stack,
    features: &[&FeatureIds],
    d: u64,
    s: u64,
    ldev: u64,
    nsc: u64,
    num_scs: u32,
    buckets: usize,
    total: usize,
    drop_limits: Option<(u32, u32)>,
) -> ScGroups {
    let mask = num_scs - 1;
    let buckets_on = buckets > 1;
    let cells = num_scs as usize * buckets;
    let mut g = ScGroups {
        coos: Vec::new(),
        bucket_offsets: vec![0; buckets + 1],
        ids: vec![0; cells],
        unique: vec![0; cells],
        dropped: 0,
        needs_sort: false,
    };
    if drop_limits.is_none() {
        // Without dropping only the counts matter: a tally counts them in one pass.
        return tally::with_tally(stack.stack_vocab_size, total, num_scs, buckets, false, |t| {
            for fis in &stack.features {
                let f = features[fis.feature];
                let n = f.rows() as u64 / (ldev * nsc);
                let slice_start = (d * nsc + s) * n;
                let map = tally::ColumnMap {
                    shift: fis.col_shift as u32,
                    offset: fis.col_offset as u32,
                };
                let splits = &f.row_splits[slice_start as usize..=(slice_start + n) as usize];
                for w in splits.windows(2) {
                    let row = &f.values[w[0]..w[1]];
                    if !t.add_rows(row, row.len(), map) {
                        g.needs_sort = true;
                        return g;
                    }
                }
            }
            g.ids = std::mem::take(&mut t.ids);
            g.unique = std::mem::take(&mut t.unique);
            g
        });
    }
    let mut seen = ColumnSet::new(stack.stack_vocab_size, total);
    let rows = SlicedRows {
        stack,
        features,
        d,
        s,
        ldev,
        nsc,
    };
    // The column set's kind and the bucket mode are fixed per SparseCore: one monomorphised loop each.
    match (&mut seen, buckets_on) {
        (ColumnSet::Bits { words, columns }, false) => {
            let columns = *columns;
            count_rows(&rows, g, mask, buckets, drop_limits, |col| {
                if col as u64 >= columns {
                    return None;
                }
                let w = &mut words[col as usize / 64];
                let bit = 1u64 << (col % 64);
                let new = *w & bit == 0;
                *w |= bit;
                Some((new, 0))
            })
        }
        (set, false) => count_rows(&rows, g, mask, buckets, drop_limits, |col| {
            set.insert(col).map(|n| (n, 0))
        }),
        (set, true) => count_rows(&rows, g, mask, buckets, drop_limits, |col| {
            set.insert(col).map(|n| (n, bucket_of(col)))
        }),
    }
}

/// The rows of one source SparseCore: its slice of every feature of the stack.
struct SlicedRows<'a> {
    stack: &'a Stack,
    features: &'a [&'a FeatureIds],
    d: u64,
    s: u64,
    ldev: u64,
    nsc: u64,
}

/// `count_sc`'s pass over the rows, with `insert` the column set's (first sighting, bucket).
fn count_rows(
    rows: &SlicedRows,
    mut g: ScGroups,
    mask: u32,
    buckets: usize,
    drop_limits: Option<(u32, u32)>,
    mut insert: impl FnMut(u32) -> Option<(bool, u32)>,
) -> ScGroups {
    let SlicedRows {
        stack,
        features,
        d,
        s,
        ldev,
        nsc,
    } = *rows;
    let buckets_on = buckets > 1;
    let cells = g.ids.len();
    const ROW_TABLE: usize = 128;
    let mut row_table = [0u64; ROW_TABLE];
    // With dropping: each slot's pair index in `pairs`, and every (column, raw ids) pair in order.
    let mut row_pair = [0u32; ROW_TABLE];
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let keep_pairs = drop_limits.is_some();
    let mut generation = 0u32;
    let mut long_row: Vec<u32> = Vec::new();
    let mut count = |col: u32, g: &mut ScGroups| -> bool {
        let Some((new, bucket)) = insert(col) else {
            return false;
        };
        let cell = (col & mask) as usize * buckets + bucket as usize;
        g.ids[cell] += 1;
        g.unique[cell] += new as u32;
        true
    };
    for fis in &stack.features {
        let f = features[fis.feature];
        let n = f.rows() as u64 / (ldev * nsc);
        let slice_start = (d * nsc + s) * n;
        let (shift, offset) = (fis.col_shift as u32, fis.col_offset as u32);
        let col_of = |id: i32| {
            let id = id as u32;
            (id.wrapping_add(shift) & mask)
                .wrapping_add(id & !mask)
                .wrapping_add(offset)
        };
        let splits = &f.row_splits[slice_start as usize..=(slice_start + n) as usize];
        for w in splits.windows(2) {
            let values = &f.values[w[0]..w[1]];
            if values.len() <= ROW_TABLE / 2 {
                generation = generation.wrapping_add(1);
                if generation == 0 {
                    row_table = [0; ROW_TABLE];
                    generation = 1;
                }
                let stamp = (generation as u64) << 32;
                for &id in values {
                    let col = col_of(id);
                    let entry = stamp | col as u64;
                    let mut i = (col.wrapping_mul(0x9E37_79B1) >> 25) as usize;
                    let fresh = loop {
                        let slot = row_table[i];
                        if slot == entry {
                            break false;
                        }
                        if slot >> 32 != generation as u64 {
                            row_table[i] = entry;
                            break true;
                        }
                        i = (i + 1) % ROW_TABLE;
                    };
                    if keep_pairs {
                        if fresh {
                            row_pair[i] = pairs.len() as u32;
                            pairs.push((col, 1));
                        } else {
                            pairs[row_pair[i] as usize].1 += 1;
                        }
                    }
                    if fresh && !count(col, &mut g) {
                        g.needs_sort = true;
                        return g;
                    }
                }
            } else {
                long_row.clear();
                long_row.extend(values.iter().map(|&id| col_of(id)));
                long_row.sort_unstable();
                for run in long_row.chunk_by(|a, b| a == b) {
                    if keep_pairs {
                        pairs.push((run[0], run.len() as u32));
                    }
                    if !count(run[0], &mut g) {
                        g.needs_sort = true;
                        return g;
                    }
                }
            }
        }
    }
    if let Some((max_ids, max_unique)) = drop_limits {
        // Cells over a limit: their pairs in the sorted path's order (column, then row: pairs are
        // pushed row after row, so a stable sort by column), the first `max_ids` pairs and the
        // first `max_unique` columns kept, every raw id of the other pairs dropped.
        let over: Vec<usize> = (0..cells)
            .filter(|&c| g.ids[c] > max_ids || g.unique[c] > max_unique)
            .collect();
        if !over.is_empty() {
            let mut slot_of = vec![usize::MAX; cells];
            for (k, &c) in over.iter().enumerate() {
                slot_of[c] = k;
            }
            let mut cell_pairs: Vec<Vec<(u32, u32)>> = vec![Vec::new(); over.len()];
            for &(col, raw) in &pairs {
                let bucket = if buckets_on { bucket_of(col) as usize } else { 0 };
                let k = slot_of[(col & mask) as usize * buckets + bucket];
                if k != usize::MAX {
                    cell_pairs[k].push((col, raw));
                }
            }
            for mut list in cell_pairs {
                list.sort_by_key(|&(col, _)| col);
                let mut rank = 0u32;
                for (i, &(col, raw)) in list.iter().enumerate() {
                    if i > 0 && col != list[i - 1].0 {
                        rank += 1;
                    }
                    if i as u32 >= max_ids || rank >= max_unique {
                        g.dropped += raw as u64;
                    }
                }
            }
        }
    }
    g
}

/// Whether a stack grouped by counting fits its COO buffer, so that filling it would drop nothing
/// and the counted statistics are exactly the sorted path's. Each SparseCore's partitions start
/// 8-aligned; with minibatches, splitting a partition's ids over buckets only adds padding, so the
/// sum over buckets of each bucket rounded up to 8 bounds what the minibatches use.
pub(super) fn counts_fit_buffer(
    spec: &PreprocessSpec,
    stack: &Stack,
    g: &StackGroups,
) -> Result<bool, PreprocessError> {
    let buffer = coo_buffer_size(spec, stack)?;
    let nsc = spec.num_sc_per_device as u64;
    let per_sc = buffer / nsc;
    for scs in &g.devices {
        let mut used = 0u64;
        for sc in scs {
            let mine: u64 = sc.ids.iter().map(|&x| round8(x as u64)).sum();
            if !spec.enable_minibatching && mine > per_sc {
                return Ok(false);
            }
            used += mine;
        }
        if spec.enable_minibatching && used > buffer {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The divisor of a row's weights: 1 (sum), their sum (mean), sqrt of the sum of squares (sqrtn),
/// in f32 as jax-tpu-embedding computes it (squares via double `pow`).
fn row_divisor(combiner: Combiner, f: &FeatureIds, a: usize, b: usize) -> f32 {
    match (combiner, &f.weights) {
        (Combiner::Sum, _) => 1.0,
        (Combiner::Mean, None) => (b - a) as f32,
        (Combiner::Sqrtn, None) => ((b - a) as f32).sqrt(),
        (Combiner::Mean, Some(w)) => w[a..b].iter().fold(0.0f32, |s, &x| s + x),
        (Combiner::Sqrtn, Some(w)) => w[a..b]
            .iter()
            .fold(0.0f32, |s, &x| (s as f64 + (x as f64).powi(2)) as f32)
            .sqrt(),
    }
}

#[allow(clippy::too_many_arguments)]
fn group_sc(
    keys: &[u64],
    rows: &[u32],
    gains: &[f32],
    sc_bits: u32,
    num_scs: u32,
    buckets: usize,
    perform_drop: bool,
    max_ids: u32,
    max_unique: u32,
) -> ScGroups {
    let mask = num_scs - 1;
    let cells = num_scs as usize * buckets;
    let mut g = ScGroups {
        coos: Vec::with_capacity(keys.len()),
        bucket_offsets: vec![0],
        ids: vec![0; cells],
        unique: vec![0; cells],
        dropped: 0,
        needs_sort: false,
    };
    let mut kept = vec![0u32; if perform_drop { cells } else { 0 }];
    let mut kept_unique = vec![0u32; if perform_drop { cells } else { 0 }];
    let (mut prev_col, mut prev_row, mut prev_bucket) = (u32::MAX, u32::MAX, 0u32);
    let (mut dedup_col, mut dedup_row) = (u32::MAX, u32::MAX);
    let mut dropping_col = false;
    let mut cur_bucket = 0usize;
    for &key in keys {
        let bucket = (key >> 58) as u32;
        let col = (((key >> DATA_BITS) & 0xFFFF_FFFF) as u32).rotate_left(sc_bits);
        let index = (key & DATA_MASK) as usize;
        let (row, gain) = (rows[index], gains[index]);
        if row == dedup_row && col == dedup_col {
            if let Some(last) = g.coos.last_mut() {
                last.gain += gain;
            }
            continue;
        }
        if perform_drop && row == prev_row && col == prev_col {
            g.dropped += 1;
            continue;
        }
        let is_new_col = col != prev_col || bucket != prev_bucket;
        let cell = (col & mask) as usize * buckets + bucket as usize;
        g.ids[cell] += 1;
        if is_new_col {
            g.unique[cell] += 1;
        }
        let mut add = true;
        if perform_drop {
            let exceeds = kept[cell] + 1 > max_ids;
            if is_new_col {
                dropping_col = kept_unique[cell] + 1 > max_unique;
            }
            if exceeds || dropping_col {
                g.dropped += 1;
                add = false;
            }
            kept[cell] += 1;
            if is_new_col {
                kept_unique[cell] += 1;
            }
        }
        if add {
            while cur_bucket < bucket as usize {
                g.bucket_offsets.push(g.coos.len());
                cur_bucket += 1;
            }
            g.coos.push(Coo { row, col, gain });
            dedup_col = col;
            dedup_row = row;
        }
        prev_col = col;
        prev_row = row;
        prev_bucket = bucket;
    }
    while cur_bucket < buckets {
        g.bucket_offsets.push(g.coos.len());
        cur_bucket += 1;
    }
    g
}

/// Merges buckets into minibatches per the split bits (stable merge by partition, right bucket
/// survives) and returns the minibatch end offsets.
fn merge_minibatches(sc: &mut ScGroups, split: u64, num_scs: u32) -> Vec<usize> {
    let n = MINIBATCH_BUCKETS;
    let mask = num_scs - 1;
    let mut merged = [false; MINIBATCH_BUCKETS];
    let offsets = &mut sc.bucket_offsets;
    let coos = &mut sc.coos;
    for_each_merge(split, n, |left, right| {
        let half = right - left;
        let mut i = right - 1;
        while i > left && merged[i] {
            i -= 1;
        }
        let mut j = right;
        while j < right + half && merged[j] {
            j += 1;
        }
        let (a, m, b) = (offsets[i], offsets[j], offsets[j + 1]);
        let mut tmp = Vec::with_capacity(b - a);
        let (mut x, mut y) = (a, m);
        while x < m && y < b {
            if (coos[y].col & mask) < (coos[x].col & mask) {
                tmp.push(coos[y]);
                y += 1;
            } else {
                tmp.push(coos[x]);
                x += 1;
            }
        }
        tmp.extend_from_slice(&coos[x..m]);
        tmp.extend_from_slice(&coos[y..b]);
        coos[a..b].copy_from_slice(&tmp);
        offsets[i + 1] = a;
        offsets[j] = a;
        merged[i] = true;
    });
    let mut ends = Vec::new();
    for (b, &m) in merged.iter().enumerate().take(n - 1) {
        if !m {
            ends.push(offsets[b + 1]);
        }
    }
    ends.push(offsets[n]);
    ends
}

/// Where one segment's ids go and what it wrote.
struct Segment<'a> {
    coos: &'a [Coo],
    lhs_begin: usize,
    lhs_end: usize,
    coo_begin: usize,
    coo_end: usize,
}

struct Buffers<'a> {
    rp: &'a mut [i32],
    emb: &'a mut [i32],
    smp: &'a mut [i32],
    gains: &'a mut [f32],
}

/// Fills one segment (one SparseCore's minibatch) as jax-tpu-embedding does; returns the next coo
/// index and the ids that did not fit in the static buffer.
fn fill_segment(
    seg: &Segment,
    mut buf: Option<&mut Buffers>,
    absolute: bool,
    num_scs: u32,
    batch_per_sc: u32,
) -> (usize, u64) {
    let (mut lhs, mut coo, mut part, mut processed) = (seg.lhs_begin, seg.coo_begin, 0u32, 0usize);
    let total = seg.coos.len();
    let valid = |lhs: usize, coo: usize, processed: usize| {
        (processed == total && coo == seg.coo_end) || !(lhs >= seg.lhs_end || coo >= seg.coo_end)
    };
    let rp_value = |coo: usize| {
        if absolute {
            coo as i32
        } else {
            (coo - seg.coo_begin) as i32
        }
    };
    let advance = |part: &mut u32,
                   target: u32,
                   lhs: &mut usize,
                   coo: &mut usize,
                   processed: usize,
                   buf: &mut Option<&mut Buffers>| {
        while *part < target {
            if !valid(*lhs, *coo, processed) {
                return;
            }
            if let Some(b) = buf.as_deref_mut() {
                b.rp[*lhs] = rp_value(*coo);
            }
            *lhs += 1;
            while !(*coo).is_multiple_of(ALIGNMENT) && *coo < seg.coo_end {
                if let Some(b) = buf.as_deref_mut() {
                    b.emb[*coo] = PAD_VALUE;
                    b.smp[*coo] = PAD_VALUE;
                    b.gains[*coo] = f32::NAN;
                }
                *coo += 1;
            }
            *part += 1;
        }
    };
    let mut dropped = 0;
    for c in seg.coos {
        let target = c.col % num_scs;
        advance(&mut part, target, &mut lhs, &mut coo, processed, &mut buf);
        if !valid(lhs, coo, processed) {
            dropped = (total - processed) as u64;
            break;
        }
        if let Some(b) = buf.as_deref_mut() {
            b.emb[coo] = (c.col / num_scs) as i32;
            b.smp[coo] = (c.row % batch_per_sc) as i32;
            b.gains[coo] = c.gain;
        }
        coo += 1;
        processed += 1;
    }
    advance(&mut part, num_scs, &mut lhs, &mut coo, processed, &mut buf);
    while lhs < seg.lhs_end {
        if let Some(b) = buf.as_deref_mut() {
            b.rp[lhs] = rp_value(coo);
        }
        lhs += 1;
    }
    (coo, dropped)
}

/// jax-tpu-embedding's COO buffer size per device: the theoretical maximum, or the suggested size
/// rounded up to a multiple of 8 x SparseCores per device (which must not exceed the maximum).
pub fn coo_buffer_size(spec: &PreprocessSpec, stack: &Stack) -> Result<u64, PreprocessError> {
    let nsc = spec.num_sc_per_device as u64;
    let theoretical = round8(stack.max_ids_per_partition as u64)
        * nsc
        * spec.num_scs() as u64
        * if spec.enable_minibatching {
            MINIBATCH_BUCKETS as u64
        } else {
            1
        };
    match stack.suggested_coo_buffer_size_per_device {
        None => Ok(theoretical),
        Some(s) => {
            let v = s.div_ceil(8 * nsc) * 8 * nsc;
            if v > theoretical {
                return Err(PreprocessError::Spec(format!(
                    "Suggested Coo Buffer Size is larger than the theoretical max for table {}: {v} vs {theoretical}. Adjust the suggested size or the max_ids_per_partition values.",
                    stack.name
                )));
            }
            Ok(v)
        }
    }
}

/// Statistics and CSR buffers of one stack.
pub(super) fn fill_stack(
    spec: &PreprocessSpec,
    stack: &Stack,
    mut g: StackGroups,
    split: u64,
    opts: Options,
) -> Result<StackOutput, PreprocessError> {
    let nsc = spec.num_sc_per_device as usize;
    let num_scs = spec.num_scs();
    let ldev = spec.local_device_count as usize;
    let r = (num_scs as usize).max(8);
    let buffer = coo_buffer_size(spec, stack)? as usize;
    let rp_per_device = nsc * r * if spec.enable_minibatching { MINIBATCH_BUCKETS } else { 1 };
    let mut out = StackOutput {
        num_minibatches: 1,
        ..Default::default()
    };
    if !opts.stats_only {
        out.row_pointers = vec![0; rp_per_device * ldev];
        out.embedding_ids = vec![PAD_VALUE; buffer * ldev];
        out.sample_ids = vec![PAD_VALUE; buffer * ldev];
        out.gains = vec![f32::NAN; buffer * ldev];
    }
    let per_sc = buffer / nsc;
    out.ids_per_partition = vec![0; num_scs as usize];
    out.unique_per_partition = vec![0; num_scs as usize];
    for (d, scs) in g.devices.iter_mut().enumerate() {
        // Statistics.
        let mut max_ids = vec![0u32; num_scs as usize];
        let mut max_unique = vec![0u32; num_scs as usize];
        let mut required = vec![0u32; nsc];
        for (s, sc) in scs.iter().enumerate() {
            for p in 0..num_scs as usize {
                let ids: u32 = sc.ids[p * g.buckets..(p + 1) * g.buckets].iter().sum();
                let uniq: u32 = sc.unique[p * g.buckets..(p + 1) * g.buckets].iter().sum();
                max_ids[p] = max_ids[p].max(ids);
                max_unique[p] = max_unique[p].max(uniq);
                required[s] += round8(ids as u64) as u32;
                out.ids_per_partition[p] += ids as u64;
                out.unique_per_partition[p] += uniq as u64;
            }
            out.ids_per_sc.push(sc.ids.iter().sum());
            out.unique_per_sc.push(sc.unique.iter().sum());
            out.dropped_id_count += sc.dropped;
        }
        // Minibatches per SparseCore.
        let ranges: Vec<Vec<std::ops::Range<usize>>> = scs
            .iter_mut()
            .map(|sc| {
                let ends = if split != 0 {
                    merge_minibatches(sc, split, num_scs)
                } else {
                    vec![sc.coos.len()]
                };
                let mut start = 0;
                ends.into_iter()
                    .map(|e| {
                        let r = start..e;
                        start = e;
                        r
                    })
                    .collect()
            })
            .collect();
        let minibatches = ranges.first().map_or(1, |r| r.len());
        out.num_minibatches = minibatches as u32;
        let (rp_off, coo_off) = (d * rp_per_device, d * buffer);
        let mut bufs = if opts.stats_only {
            None
        } else {
            let (rp, emb, smp, gains) = (
                &mut out.row_pointers[rp_off..rp_off + rp_per_device],
                &mut out.embedding_ids[coo_off..coo_off + buffer],
                &mut out.sample_ids[coo_off..coo_off + buffer],
                &mut out.gains[coo_off..coo_off + buffer],
            );
            Some(Buffers { rp, emb, smp, gains })
        };
        let mut lhs = 0;
        let mut chained_begin = 0usize;
        let mut accumulated = 0usize;
        for (s, sc) in scs.iter().enumerate() {
            for range in &ranges[s] {
                let coo_begin = if minibatches == 1 {
                    let b = if spec.enable_minibatching {
                        accumulated
                    } else {
                        s * per_sc
                    };
                    accumulated += required[s] as usize;
                    b.min(buffer)
                } else {
                    chained_begin
                };
                let coo_end = if spec.enable_minibatching {
                    buffer
                } else {
                    coo_begin + per_sc
                };
                let seg = Segment {
                    coos: &sc.coos[range.clone()],
                    lhs_begin: lhs,
                    lhs_end: lhs + r,
                    coo_begin,
                    coo_end,
                };
                let (mut next, dropped) =
                    fill_segment(&seg, bufs.as_mut(), spec.enable_minibatching, num_scs, g.batch_per_sc);
                out.dropped_id_count += dropped;
                if spec.enable_minibatching {
                    while !next.is_multiple_of(ALIGNMENT) && next < buffer {
                        if let Some(b) = bufs.as_mut() {
                            b.emb[next] = PAD_VALUE;
                            b.smp[next] = PAD_VALUE;
                            b.gains[next] = f32::NAN;
                        }
                        next += 1;
                    }
                }
                chained_begin = next;
                lhs += r;
            }
        }
        out.max_ids_per_partition.extend(max_ids);
        out.max_unique_ids_per_partition.extend(max_unique);
        out.required_buffer_sizes.extend(required);
    }
    Ok(out)
}
