//! Counting one source SparseCore's statistics without sorting or dropping: per (partition, bucket)
//! the ids after within-sample dedup and the unique columns.
//!
//! Each column keeps the stamp of the last sample (row) that held it. Stamps grow row after row and
//! every unit of work starts above all earlier stamps (its `base`), so one swap per id answers both
//! questions branch-free: the current row's stamp means a repeat within the sample, a stamp below
//! the base means a column new to this SparseCore.

use std::cell::RefCell;

use super::minibatch::bucket_of;

/// Direct tables are used up to this many columns (256 MiB of stamps, touched only where ids land).
const DIRECT_MAX_COLUMNS: u64 = 1 << 26;
/// Direct tables this small are always fine, whatever the ids (4 MiB).
const DIRECT_SMALL_COLUMNS: u64 = 1 << 20;
/// Above that, a direct table needs at least one id per this many columns (pages it touches are
/// then few against the ids), else a hash table sized to the columns seen is cheaper.
const DIRECT_COLUMNS_PER_ID: u64 = 256;

/// A per-thread direct table, reused from unit to unit: its stamps stay valid because `next` only grows.
struct Direct {
    stamps: Zeroed,
    next: u32,
}

/// Zeroed u32s, on 2 MiB pages where the kernel offers them: a fresh page costs a fault (dear in a
/// virtual machine), and a table spread over a large vocabulary would otherwise fault once per 4 KiB.
#[cfg(target_os = "linux")]
struct Zeroed {
    ptr: std::ptr::NonNull<u32>,
    len: usize,
    map: *mut libc::c_void,
    map_len: usize,
}

// SAFETY: Zeroed owns its mapping exclusively, as a Vec owns its buffer.
#[cfg(target_os = "linux")]
unsafe impl Send for Zeroed {}

#[cfg(target_os = "linux")]
impl Zeroed {
    const HUGE: usize = 2 << 20;

    const fn empty() -> Zeroed {
        Zeroed {
            ptr: std::ptr::NonNull::dangling(),
            len: 0,
            map: std::ptr::null_mut(),
            map_len: 0,
        }
    }

    fn new(len: usize) -> Zeroed {
        let Some(bytes) = len.checked_mul(4).map(|b| b.next_multiple_of(Self::HUGE)) else {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<u32>());
        };
        if len == 0 {
            return Zeroed::empty();
        }
        // Room to align the start to a huge page, and whole huge pages after it.
        let map_len = bytes + Self::HUGE;
        // SAFETY: a fresh anonymous private mapping (zero-filled), checked for failure; the aligned
        // start plus `bytes` lies inside it, and madvise only advises.
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if map == libc::MAP_FAILED {
                std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align_unchecked(map_len, 4));
            }
            let aligned = (map as usize).next_multiple_of(Self::HUGE);
            libc::madvise(aligned as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
            Zeroed {
                ptr: std::ptr::NonNull::new_unchecked(aligned as *mut u32),
                len,
                map,
                map_len,
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn slice(&mut self, n: usize) -> &mut [u32] {
        let n = n.min(self.len);
        // SAFETY: n <= len u32s inside the live mapping (or dangling with n = 0), borrowed through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), n) }
    }
}

#[cfg(target_os = "linux")]
impl Drop for Zeroed {
    fn drop(&mut self) {
        if self.map_len > 0 {
            // SAFETY: the mapping made in `new`, unmapped once.
            unsafe {
                libc::munmap(self.map, self.map_len);
            }
        }
    }
}

/// Zeroed u32s (elsewhere: a plain vector).
#[cfg(not(target_os = "linux"))]
struct Zeroed(Vec<u32>);

#[cfg(not(target_os = "linux"))]
impl Zeroed {
    const fn empty() -> Zeroed {
        Zeroed(Vec::new())
    }

    fn new(len: usize) -> Zeroed {
        Zeroed(vec![0; len])
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn slice(&mut self, n: usize) -> &mut [u32] {
        let n = n.min(self.0.len());
        &mut self.0[..n]
    }
}

thread_local! {
    static DIRECT: RefCell<Direct> = const { RefCell::new(Direct { stamps: Zeroed::empty(), next: 1 }) };
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

/// Where stamps live: the previous stamp of a column (0: never seen) as the new one is stored, or
/// None for a column the table cannot hold.
trait Stamps {
    fn swap(&mut self, col: u32, stamp: u32) -> Option<u32>;
}

impl Stamps for [u32] {
    #[inline(always)]
    fn swap(&mut self, col: u32, stamp: u32) -> Option<u32> {
        self.get_mut(col as usize).map(|s| std::mem::replace(s, stamp))
    }
}

impl Stamps for Hashed {
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

enum Table<'a> {
    Direct(&'a mut [u32]),
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
    base: u32,
    stamp: u32,
}

/// Partitions up to this many are counted in fixed arrays (no bounds checks in the hot loop).
const SMALL_CELLS: usize = 64;

impl Tally<'_> {
    /// Starts the next sample: ids added until the next call are deduplicated together.
    #[inline]
    pub fn next_row(&mut self) {
        self.stamp += 1;
    }

    /// Adds ids of the current sample, mapped to stack columns by the feature's rotation `shift` and
    /// column `offset`. False when a column lies outside the table (the caller groups by sorting).
    #[inline]
    pub fn add(&mut self, ids: &[i32], shift: u32, offset: u32) -> bool {
        let mask = self.mask;
        // With no rotation a column is id + offset: (id & mask) + (id & !mask) is the id itself.
        let rotated = move |id: i32| {
            let id = id as u32;
            (id.wrapping_add(shift) & mask)
                .wrapping_add(id & !mask)
                .wrapping_add(offset)
        };
        let plain = move |id: i32| (id as u32).wrapping_add(offset);
        let (stamp, base, buckets) = (self.stamp, self.base, self.buckets);
        let (cids, cuniq) = (&mut self.ids[..], &mut self.unique[..]);
        macro_rules! go {
            ($table:expr, $bucketed:expr) => {
                if shift == 0 {
                    kernel::<_, $bucketed>($table, ids, plain, stamp, base, cids, cuniq, mask, buckets)
                } else {
                    kernel::<_, $bucketed>($table, ids, rotated, stamp, base, cids, cuniq, mask, buckets)
                }
            };
        }
        match (&mut self.table, buckets > 1) {
            (Table::Direct(t), false) => go!(&mut **t, false),
            (Table::Direct(t), true) => go!(&mut **t, true),
            (Table::Hashed(t), false) => go!(t, false),
            (Table::Hashed(t), true) => go!(t, true),
        }
    }

    /// Adds whole samples of `valency` ids each (`ids.len()` a multiple of it), each its own sample.
    pub fn add_rows(&mut self, ids: &[i32], valency: usize, shift: u32, offset: u32) -> bool {
        let cells = self.ids.len();
        if valency == 0 {
            return true;
        }
        let Table::Direct(table) = &mut self.table else {
            return ids.chunks(valency).all(|row| {
                self.next_row();
                self.add(row, shift, offset)
            });
        };
        if self.buckets > 1 || cells > SMALL_CELLS {
            return ids.chunks(valency).all(|row| {
                self.next_row();
                self.add(row, shift, offset)
            });
        }
        // The common case, in a loop of its own with the counts in fixed arrays.
        let mut cids = [0u32; SMALL_CELLS];
        let mut cuniq = [0u32; SMALL_CELLS];
        cids[..cells].copy_from_slice(&self.ids);
        cuniq[..cells].copy_from_slice(&self.unique);
        let mask = self.mask;
        let rotated = move |id: i32| {
            let id = id as u32;
            (id.wrapping_add(shift) & mask)
                .wrapping_add(id & !mask)
                .wrapping_add(offset)
        };
        let plain = move |id: i32| (id as u32).wrapping_add(offset);
        let (base, mut stamp) = (self.base, self.stamp);
        let ok = if shift == 0 {
            direct_rows(
                table, ids, valency, plain, base, &mut stamp, mask, &mut cids, &mut cuniq,
            )
        } else {
            direct_rows(
                table, ids, valency, rotated, base, &mut stamp, mask, &mut cids, &mut cuniq,
            )
        };
        self.stamp = stamp;
        self.ids.copy_from_slice(&cids[..cells]);
        self.unique.copy_from_slice(&cuniq[..cells]);
        ok
    }
}

/// `add_rows` on a direct table without buckets: one stamp swap and two count updates per id.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn direct_rows(
    table: &mut [u32],
    ids: &[i32],
    valency: usize,
    col_of: impl Fn(i32) -> u32,
    base: u32,
    stamp: &mut u32,
    mask: u32,
    cids: &mut [u32; SMALL_CELLS],
    cuniq: &mut [u32; SMALL_CELLS],
) -> bool {
    for row in ids.chunks(valency) {
        *stamp += 1;
        let stamp = *stamp;
        for &id in row {
            let col = col_of(id);
            let Some(slot) = table.get_mut(col as usize) else {
                return false;
            };
            let prev = std::mem::replace(slot, stamp);
            let cell = (col & mask) as usize % SMALL_CELLS;
            cids[cell] += (prev != stamp) as u32;
            cuniq[cell] += (prev < base) as u32;
        }
    }
    true
}

/// The per-id loop, one monomorphised copy per table kind, bucket mode and column map.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn kernel<T: Stamps + ?Sized, const BUCKETED: bool>(
    table: &mut T,
    ids: &[i32],
    col_of: impl Fn(i32) -> u32,
    stamp: u32,
    base: u32,
    cids: &mut [u32],
    cuniq: &mut [u32],
    mask: u32,
    buckets: usize,
) -> bool {
    for &id in ids {
        let col = col_of(id);
        let Some(prev) = table.swap(col, stamp) else {
            return false;
        };
        let cell = if BUCKETED {
            (col & mask) as usize * buckets + bucket_of(col) as usize
        } else {
            (col & mask) as usize
        };
        cids[cell] += (prev != stamp) as u32;
        cuniq[cell] += (prev < base) as u32;
    }
    true
}

/// Runs `f` on a fresh tally for one unit of `rows` samples and about `ids` ids over a stack of
/// `columns` columns, `num_scs` partitions and `buckets` buckets per partition.
pub(super) fn with_tally<R>(
    columns: u64,
    ids: usize,
    rows: u64,
    num_scs: u32,
    buckets: usize,
    f: impl FnOnce(&mut Tally) -> R,
) -> R {
    let cells = num_scs as usize * buckets;
    let direct_fits =
        columns <= DIRECT_MAX_COLUMNS && columns <= (ids as u64 * DIRECT_COLUMNS_PER_ID).max(DIRECT_SMALL_COLUMNS);
    let rows = u32::try_from(rows).ok().filter(|&r| r < u32::MAX / 2);
    fn new(table: Table, base: u32, cells: usize, mask: u32, buckets: usize) -> Tally {
        Tally {
            table,
            ids: vec![0; cells],
            unique: vec![0; cells],
            mask,
            buckets,
            base,
            stamp: base - 1,
        }
    }
    let mask = num_scs - 1;
    if let (true, Some(rows)) = (direct_fits, rows) {
        // A thread's table is borrowed for the unit; were it busy, a private one does the same work.
        let run = |d: &mut Direct| {
            let columns = columns as usize;
            if d.stamps.len() < columns || d.next > u32::MAX - rows - 1 {
                let len = columns.max(d.stamps.len());
                // The old table is freed before the new one is allocated.
                d.stamps = Zeroed::empty();
                d.stamps = Zeroed::new(len);
                d.next = 1;
            }
            let base = d.next;
            let mut t = new(Table::Direct(d.stamps.slice(columns)), base, cells, mask, buckets);
            let r = f(&mut t);
            d.next = t.stamp + 1;
            r
        };
        return DIRECT.with(|cell| match cell.try_borrow_mut() {
            Ok(mut d) => run(&mut d),
            Err(_) => run(&mut Direct {
                stamps: Zeroed::empty(),
                next: 1,
            }),
        });
    }
    let mut t = new(Table::Hashed(Hashed::new(ids)), 1, cells, mask, buckets);
    f(&mut t)
}
