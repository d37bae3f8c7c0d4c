//! Counting one source SparseCore's statistics without sorting or dropping: per (partition, bucket)
//! the ids after within-sample dedup and the unique columns.
//!
//! Over a stack of modest size each column has two bits: "in the current sample" and "seen on this
//! SparseCore". One read-modify-write per id gives both answers branch-free, and a second pass over
//! the sample's ids clears the first bits. The table (a quarter byte per column) stays in cache and
//! is reused thread by thread: fresh pages, each a fault and a zeroing, are few. Column c's pair is
//! in word c mod W (W a power of two), not c / 32: skewed ids crowd the low columns, and in one word
//! their read-modify-writes would wait on each other.
//!
//! On CPUs with AVX-512, dense samples of 8 to 32 ids go through [`avx512`] instead: no in-sample
//! bits, no second pass.
//!
//! Larger stacks, or samples cut across blocks, use a hash table from column to the stamp of the
//! last sample that held it, stamps growing sample after sample: the current stamp means a repeat
//! within the sample, none means a column new to the SparseCore.

use std::cell::RefCell;

use super::minibatch::bucket_of;

#[cfg(target_arch = "x86_64")]
mod avx512;

/// Two-bit tables up to this many columns (64 MiB)...
const BITS_MAX_COLUMNS: u64 = 1 << 28;
/// ...when they are this small (256 KiB)...
const BITS_SMALL_COLUMNS: u64 = 1 << 20;
/// ...or have at most this many columns per id (clearing the table costs columns / 4 bytes).
const BITS_COLUMNS_PER_ID: u64 = 64;

/// Bit 0 of a column's pair: in the current sample; bit 1: seen on this SparseCore.
const IN_ROW: u64 = 1;
const PAIR: u64 = 3;

thread_local! {
    /// A thread's two-bit table, reused from unit to unit (cleared for each).
    static BITS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Column -> last stamp, open addressing; a slot is `stamp << 32 | (column + 1)`, 0 when empty.
struct Hashed {
    slots: Vec<u64>,
    len: usize,
}

impl Hashed {
    fn new(expected: usize) -> Hashed {
        Hashed {
            slots: vec![0; (expected.clamp(8, 1 << 16) * 2).next_power_of_two()],
            len: 0,
        }
    }

    fn home(key: u32, mask: usize) -> usize {
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
    }

    fn grow(&mut self) {
        let doubled = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        let mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|&s| s != 0) {
            let mut i = Self::home(slot as u32, mask);
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }
}

impl Hashed {
    /// Stores `stamp` for `col` and returns the previous one (0: never seen), or None for a column
    /// the table cannot hold.
    #[inline(always)]
    fn swap(&mut self, col: u32, stamp: u32) -> Option<u32> {
        let key = col.checked_add(1)?;
        if self.len * 2 >= self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = Self::home(key, mask);
        loop {
            let slot = self.slots[i];
            if slot as u32 == key {
                self.slots[i] = (stamp as u64) << 32 | key as u64;
                return Some((slot >> 32) as u32);
            }
            if slot == 0 {
                self.slots[i] = (stamp as u64) << 32 | key as u64;
                self.len += 1;
                return Some(0);
            }
            i = (i + 1) & mask;
        }
    }
}

/// A two-bit table: `words.len()` is a power of two, 2^`log_words`, holding `columns` pairs.
struct Bits<'a> {
    words: &'a mut [u64],
    log_words: u32,
    columns: u32,
}

enum Table<'a> {
    Bits(Bits<'a>),
    Hashed(Hashed),
}

/// One unit's counts (a source SparseCore), fed sample by sample.
pub(super) struct Tally<'a> {
    table: Table<'a>,
    /// Ids after within-sample dedup per (partition, bucket).
    pub ids: Vec<u32>,
    /// Unique columns per (partition, bucket).
    pub unique: Vec<u32>,
    mask: u32,
    buckets: usize,
    /// The current sample's stamp (hash table only).
    stamp: u32,
}

/// Partitions up to this many are counted in fixed arrays (no bounds checks in the hot loop).
const SMALL_CELLS: usize = 64;

/// A feature's map from ids to stack columns: rotation `shift`, column `offset`.
#[derive(Clone, Copy)]
pub(super) struct ColumnMap {
    pub shift: u32,
    pub offset: u32,
}

/// Calls `$body` with `$col_of`, the column map as a closure: with no rotation a column is
/// id + offset ((id & mask) + (id & !mask) is the id itself), a loop of its own.
macro_rules! with_col_of {
    ($map:expr, $mask:expr, |$col_of:ident| $body:expr) => {{
        let (shift, offset, mask) = ($map.shift, $map.offset, $mask);
        if shift == 0 {
            let $col_of = move |id: i32| (id as u32).wrapping_add(offset);
            $body
        } else {
            let $col_of = move |id: i32| {
                let id = id as u32;
                (id.wrapping_add(shift) & mask)
                    .wrapping_add(id & !mask)
                    .wrapping_add(offset)
            };
            $body
        }
    }};
}

impl Tally<'_> {
    /// Adds whole samples of `valency` ids each (`ids.len()` a multiple of it). False when a column
    /// lies outside the table (the caller groups by sorting).
    pub fn add_rows(&mut self, ids: &[i32], valency: usize, map: ColumnMap) -> bool {
        if valency == 0 {
            return true;
        }
        let cells = self.ids.len();
        match &mut self.table {
            Table::Bits(bits) if self.buckets == 1 && cells <= SMALL_CELLS => {
                // The common case: counts in fixed arrays, no buckets.
                let mut cids = [0u32; SMALL_CELLS];
                let mut cuniq = [0u32; SMALL_CELLS];
                cids[..cells].copy_from_slice(&self.ids);
                cuniq[..cells].copy_from_slice(&self.unique);
                let ok = if let Some(ok) = rows_vectorised(bits, ids, valency, map, self.mask, &mut cids, &mut cuniq) {
                    ok
                } else {
                    with_col_of!(map, self.mask, |col_of| {
                        bits_rows::<false, SMALL_CELLS>(bits, ids, valency, col_of, self.mask, 1, &mut cids, &mut cuniq)
                    })
                };
                self.ids.copy_from_slice(&cids[..cells]);
                self.unique.copy_from_slice(&cuniq[..cells]);
                ok
            }
            Table::Bits(bits) => with_col_of!(map, self.mask, |col_of| {
                if self.buckets > 1 {
                    bits_rows::<true, 0>(
                        bits,
                        ids,
                        valency,
                        col_of,
                        self.mask,
                        self.buckets,
                        &mut self.ids,
                        &mut self.unique,
                    )
                } else {
                    bits_rows::<false, 0>(
                        bits,
                        ids,
                        valency,
                        col_of,
                        self.mask,
                        1,
                        &mut self.ids,
                        &mut self.unique,
                    )
                }
            }),
            Table::Hashed(_) => ids.chunks(valency).all(|row| {
                self.next_row();
                self.add(row, map)
            }),
        }
    }

    /// Starts the next sample, fed by [`Tally::add`] (a tally made for samples in parts only).
    pub fn next_row(&mut self) {
        self.stamp += 1;
    }

    /// Adds ids of the current sample (a hash-table tally); false as for [`Tally::add_rows`].
    pub fn add(&mut self, ids: &[i32], map: ColumnMap) -> bool {
        let Table::Hashed(table) = &mut self.table else {
            return false;
        };
        let (stamp, mask, buckets) = (self.stamp, self.mask, self.buckets);
        let (cids, cuniq) = (&mut self.ids[..], &mut self.unique[..]);
        with_col_of!(map, mask, |col_of| {
            for &id in ids {
                let col = col_of(id);
                let Some(prev) = table.swap(col, stamp) else {
                    return false;
                };
                let cell = if buckets > 1 {
                    (col & mask) as usize * buckets + bucket_of(col) as usize
                } else {
                    (col & mask) as usize
                };
                cids[cell] += (prev != stamp) as u32;
                cuniq[cell] += (prev == 0) as u32;
            }
            true
        })
    }
}

/// `add_rows` on a two-bit table, unbucketed, by vector instructions where the CPU, the sample length
/// and the partition count allow; None where they do not.
#[allow(unused_variables)]
fn rows_vectorised(
    bits: &mut Bits,
    ids: &[i32],
    valency: usize,
    map: ColumnMap,
    mask: u32,
    cids: &mut [u32],
    cuniq: &mut [u32],
) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    if avx512::VALENCY.contains(&valency) && (mask as usize) < avx512::MAX_PARTITIONS && avx512::available() {
        let geometry = avx512::Geometry {
            log_words: bits.log_words,
            columns: bits.columns,
            shift: map.shift,
            offset: map.offset,
            mask,
        };
        // SAFETY: `available` checked the CPU's features.
        return Some(unsafe { avx512::rows(bits.words, &geometry, ids, valency, cids, cuniq) });
    }
    None
}

/// `add_rows` on a two-bit table: per sample, one pass sets both bits of each id's column and
/// counts, a second clears the in-sample bits. `N` > 0: counts in arrays of that size (indices
/// reduced modulo N, a no-op as the caller checked, which lets the bounds checks go).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn bits_rows<const BUCKETED: bool, const N: usize>(
    bits: &mut Bits,
    ids: &[i32],
    valency: usize,
    col_of: impl Fn(i32) -> u32,
    mask: u32,
    buckets: usize,
    cids: &mut [u32],
    cuniq: &mut [u32],
) -> bool {
    let wmask = (1u32 << bits.log_words) - 1;
    for row in ids.chunks(valency) {
        for &id in row {
            let col = col_of(id);
            if col >= bits.columns {
                // The unit is abandoned; the next one clears the table.
                return false;
            }
            let w = &mut bits.words[(col & wmask) as usize];
            let sh = (col >> bits.log_words) * 2;
            let old = (*w >> sh) & PAIR;
            *w |= PAIR << sh;
            let mut cell = if BUCKETED {
                (col & mask) as usize * buckets + bucket_of(col) as usize
            } else {
                (col & mask) as usize
            };
            if N > 0 {
                cell %= N;
            }
            cids[cell] += (old & IN_ROW == 0) as u32;
            cuniq[cell] += (old == 0) as u32;
        }
        for &id in row {
            let col = col_of(id);
            bits.words[(col & wmask) as usize] &= !(IN_ROW << ((col >> bits.log_words) * 2));
        }
    }
    true
}

/// Runs `f` on a fresh tally for one unit of about `ids` ids over a stack of `columns` columns,
/// `num_scs` partitions and `buckets` buckets per partition. `parts`: samples may come in parts
/// ([`Tally::next_row`] and [`Tally::add`]), else whole ([`Tally::add_rows`]).
pub(super) fn with_tally<R>(
    columns: u64,
    ids: usize,
    num_scs: u32,
    buckets: usize,
    parts: bool,
    f: impl FnOnce(&mut Tally) -> R,
) -> R {
    fn new(table: Table, num_scs: u32, buckets: usize) -> Tally {
        Tally {
            table,
            ids: vec![0; num_scs as usize * buckets],
            unique: vec![0; num_scs as usize * buckets],
            mask: num_scs - 1,
            buckets,
            stamp: 0,
        }
    }
    let bits =
        !parts && columns <= BITS_MAX_COLUMNS && columns <= (ids as u64 * BITS_COLUMNS_PER_ID).max(BITS_SMALL_COLUMNS);
    if bits {
        let words = columns.div_ceil(32).next_power_of_two() as usize;
        let log_words = words.trailing_zeros();
        // A thread's table is borrowed for the unit; were it busy, a private one does the same work.
        let run = |table: &mut Vec<u64>| {
            if table.len() < words {
                // Written, not calloc'd: a calloc'd page read before it is written faults twice,
                // the second time with a TLB shootdown across the pool's threads.
                *table = Vec::new();
                table.reserve_exact(words);
                table.resize(words, 0);
            } else {
                table[..words].fill(0);
            }
            let bits = Bits {
                words: &mut table[..words],
                log_words,
                columns: columns as u32,
            };
            f(&mut new(Table::Bits(bits), num_scs, buckets))
        };
        return BITS.with(|cell| match cell.try_borrow_mut() {
            Ok(mut table) => run(&mut table),
            Err(_) => run(&mut Vec::new()),
        });
    }
    f(&mut new(Table::Hashed(Hashed::new(ids)), num_scs, buckets))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Counts by sets: per sample its distinct columns, each counted once; a column's first
    /// sighting on the SparseCore is a unique id.
    fn by_sets(rows: &[Vec<i32>], map: ColumnMap, num_scs: u32, buckets: usize) -> (Vec<u32>, Vec<u32>) {
        let mask = num_scs - 1;
        let mut ids = vec![0; num_scs as usize * buckets];
        let mut unique = ids.clone();
        let mut seen = std::collections::HashSet::new();
        for row in rows {
            let mut in_row = std::collections::HashSet::new();
            for &id in row {
                let id = id as u32;
                let col = (id.wrapping_add(map.shift) & mask)
                    .wrapping_add(id & !mask)
                    .wrapping_add(map.offset);
                if in_row.insert(col) {
                    let b = if buckets > 1 { bucket_of(col) as usize } else { 0 };
                    let cell = (col & mask) as usize * buckets + b;
                    ids[cell] += 1;
                    unique[cell] += seen.insert(col) as u32;
                }
            }
        }
        (ids, unique)
    }

    proptest! {
        /// The two-bit table (whole samples) and the hash table (samples in parts) count as sets do.
        #[test]
        fn tables_count_as_sets(
            rows in proptest::collection::vec(proptest::collection::vec(0i32..300, 0..20), 0..30),
            scs_bits in 0u32..4,
            shift in 0u32..8,
            offset in 0u32..50,
            bucketed in any::<bool>(),
            cut in 1usize..6,
        ) {
            let num_scs = 1 << scs_bits;
            let map = ColumnMap { shift: shift % num_scs, offset };
            let buckets = if bucketed { 64 } else { 1 };
            let expected = by_sets(&rows, map, num_scs, buckets);
            let n: usize = rows.iter().map(Vec::len).sum();
            let whole = with_tally(400, n, num_scs, buckets, false, |t| {
                for row in &rows {
                    assert!(t.add_rows(row, row.len(), map));
                }
                (t.ids.clone(), t.unique.clone())
            });
            prop_assert_eq!(&whole, &expected);
            let parts = with_tally(400, n, num_scs, buckets, true, |t| {
                for row in &rows {
                    t.next_row();
                    for part in row.chunks(cut) {
                        assert!(t.add(part, map));
                    }
                }
                (t.ids.clone(), t.unique.clone())
            });
            prop_assert_eq!(&parts, &expected);
            // Dense samples in one call, as blocks of a stored member arrive.
            if let Some(v) = rows.first().map(Vec::len).filter(|&v| v > 0) {
                let dense: Vec<Vec<i32>> = rows.iter().filter(|r| r.len() == v).cloned().collect();
                let flat: Vec<i32> = dense.concat();
                let got = with_tally(400, n, num_scs, buckets, false, |t| {
                    assert!(t.add_rows(&flat, v, map));
                    (t.ids.clone(), t.unique.clone())
                });
                prop_assert_eq!(got, by_sets(&dense, map, num_scs, buckets));
            }
        }
    }

    /// A dense block through the portable loop alone, whatever the CPU.
    fn portable_rows(t: &mut Tally, ids: &[i32], valency: usize, map: ColumnMap) -> bool {
        let Table::Bits(bits) = &mut t.table else {
            panic!("a two-bit tally was asked for");
        };
        with_col_of!(map, t.mask, |col_of| {
            bits_rows::<false, 0>(bits, ids, valency, col_of, t.mask, 1, &mut t.ids, &mut t.unique)
        })
    }

    proptest! {
        /// Dense samples of 8 to 32 ids, repeats within and across the two vector halves: `add_rows`
        /// (the vector path on CPUs that have it) and the portable loop count as sets do, alone and
        /// taking turns on one table.
        #[test]
        fn vector_and_portable_paths_count_as_sets(
            flat in proptest::collection::vec(0i32..300, 32..=400),
            valency in 8usize..=32,
            scs_bits in 0u32..5,
            shift in 0u32..16,
            offset in 0u32..50,
            turns in proptest::collection::vec(0u8..3, 1..8),
        ) {
            let num_scs = 1 << scs_bits;
            let map = ColumnMap { shift: shift % num_scs, offset };
            let flat = &flat[..flat.len() / valency * valency];
            let rows: Vec<Vec<i32>> = flat.chunks(valency).map(<[i32]>::to_vec).collect();
            let expected = by_sets(&rows, map, num_scs, 1);
            let got = with_tally(400, flat.len(), num_scs, 1, false, |t| {
                for (i, row) in rows.iter().enumerate() {
                    let ok = match turns[i % turns.len()] {
                        0 => t.add_rows(row, valency, map),
                        1 => portable_rows(t, row, valency, map),
                        // Two samples in one call, as a block holds many.
                        _ => t.add_rows(&[row.as_slice(), row.as_slice()].concat(), valency, map),
                    };
                    assert!(ok);
                }
                (t.ids.clone(), t.unique.clone())
            });
            // A repeated sample adds its ids again but no unique column.
            let repeats: Vec<Vec<i32>> = rows
                .iter()
                .enumerate()
                .flat_map(|(i, r)| std::iter::repeat_n(r.clone(), if turns[i % turns.len()] == 2 { 2 } else { 1 }))
                .collect();
            prop_assert_eq!(&got, &by_sets(&repeats, map, num_scs, 1));
            prop_assert_eq!(&got.1, &expected.1);
        }
    }

    /// Counts worked by hand, through the vector path itself where the CPU has it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_path_counts_by_hand() {
        if !avx512::available() {
            return;
        }
        let run = |ids: &[i32], valency: usize, mask: u32| {
            let mut words = vec![0u64; 16];
            let g = avx512::Geometry {
                log_words: 4,
                columns: 512,
                shift: 0,
                offset: 0,
                mask,
            };
            let (mut cids, mut cuniq) = ([0u32; 16], [0u32; 16]);
            // SAFETY: `available` said the CPU has the features.
            let ok = unsafe { avx512::rows(&mut words, &g, ids, valency, &mut cids, &mut cuniq) };
            (
                ok,
                cids[..mask as usize + 1].to_vec(),
                cuniq[..mask as usize + 1].to_vec(),
            )
        };
        // Two partitions (even, odd columns). Sample 1 holds {1..6}: 3 even, 3 odd, all new.
        // Sample 2 holds {1, 8, 9}: 8 even and new; 1 and 9 odd, 9 new.
        let two = [1, 2, 2, 3, 1, 4, 5, 6, 1, 1, 1, 1, 8, 8, 9, 9];
        assert_eq!(run(&two, 8, 1), (true, vec![4, 5], vec![4, 4]));
        // 20 ids: 0..16, then 3 and 0 (already in the first half), 40 twice: 17 distinct.
        let mut wide: Vec<i32> = (0..16).collect();
        wide.extend([3, 40, 0, 40]);
        assert_eq!(run(&wide, 20, 0), (true, vec![17], vec![17]));
        // Column 600 is past the 512-column table.
        let past = [1, 2, 3, 4, 5, 6, 7, 600];
        assert!(!run(&past, 8, 0).0);
    }

    #[test]
    fn columns_past_the_table_are_refused() {
        let map = ColumnMap { shift: 0, offset: 0 };
        assert!(!with_tally(64, 4, 1, 1, false, |t| t.add_rows(&[1, 100], 2, map)));
        // The table's words hold 64 pairs; the stack's 40th column is already outside.
        assert!(with_tally(40, 4, 1, 1, false, |t| t.add_rows(&[39, 0], 2, map)));
        assert!(!with_tally(40, 4, 1, 1, false, |t| t.add_rows(&[39, 40], 2, map)));
        assert!(!with_tally(64, 4, 1, 1, true, |t| t.add(&[-1], map)));
    }
}
