//! Minibatching: HighwayHash buckets, the split tree over 64 buckets, and bucket merging.

use highway::{HighwayHash, HighwayHasher, Key};

/// jax-tpu-embedding's HighwayHash key for minibatching buckets.
const KEY: [u64; 4] = [
    0x4451e30f87db9609,
    0xca7358a1fd2737f8,
    0x4b2c991fcee4fdea,
    0x0b2658e18326f6ba,
];

/// Columns below this have their bucket memoised process-wide (a byte each, 16 MiB reserved, pages
/// touched only as columns are seen).
const MEMO_COLUMNS: usize = 1 << 24;

/// Bucket + 1 of each column seen so far (0: not yet computed); a pure function's memo, so races only
/// write the same value twice.
static MEMO: std::sync::OnceLock<Box<[std::sync::atomic::AtomicU8]>> = std::sync::OnceLock::new();

/// The bucket (0..64) of a column id: HighwayHash-64 of its 4 little-endian bytes, low 6 bits.
pub fn bucket_of(col: u32) -> u32 {
    use std::sync::atomic::{AtomicU8, Ordering};
    if (col as usize) < MEMO_COLUMNS {
        let memo = MEMO.get_or_init(|| (0..MEMO_COLUMNS).map(|_| AtomicU8::new(0)).collect());
        let cell = &memo[col as usize];
        let known = cell.load(Ordering::Relaxed);
        if known != 0 {
            return known as u32 - 1;
        }
        let b = hash_bucket(col);
        cell.store(b as u8 + 1, Ordering::Relaxed);
        return b;
    }
    hash_bucket(col)
}

fn hash_bucket(col: u32) -> u32 {
    let mut h = HighwayHasher::new(Key(KEY));
    h.append(&(col as i32).to_le_bytes());
    (h.finalize64() & 63) as u32
}

/// The split bits of a bottom-up binary tree over `counts` (a power of two in length): pairs first,
/// then quads, ...; a pair whose sum exceeds `limit` is split (bit set, left keeps the larger),
/// otherwise merged (left keeps the sum). `counts` is consumed as scratch.
pub fn compute_split(counts: &mut [u32], limit: u32) -> u64 {
    let n = counts.len();
    let mut split = 0u64;
    let mut index = 0;
    let mut size = 2;
    while size <= n {
        let mut i = 0;
        while i < n {
            let (l, r) = (counts[i], counts[i + size / 2]);
            if l as u64 + r as u64 > limit as u64 {
                split |= 1 << index;
                counts[i] = l.max(r);
            } else {
                counts[i] = l + r;
            }
            i += size;
            index += 1;
        }
        size *= 2;
    }
    split
}

/// Calls `merge(left, right)` for every tree node whose split bit is clear, in tree order.
pub fn for_each_merge(split: u64, n: usize, mut merge: impl FnMut(usize, usize)) {
    let mut index = 0;
    let mut size = 2;
    while size <= n {
        let mut i = 0;
        while i < n {
            if split & (1 << index) == 0 {
                merge(i, i + size / 2);
            }
            i += size;
            index += 1;
        }
        size *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_vectors_v10() {
        let run = |c: &[u32], lim| compute_split(&mut c.to_vec(), lim);
        assert_eq!(run(&[10; 8], 100), 0);
        assert_eq!(run(&[100; 8], 150), 0b1111111);
        assert_eq!(run(&[10, 20, 30, 40, 50, 60, 70, 80], 100), 0b1101100);
        assert_eq!(run(&[50, 50, 20, 80, 10, 10, 70, 10], 100), 0b1010000);
        assert_eq!(run(&[90, 10, 90, 10, 90, 10, 90, 10], 100), 0b1110000);
    }
}
