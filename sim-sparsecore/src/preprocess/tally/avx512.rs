//! Whole samples of 8 to 32 ids counted with AVX-512: a sample's columns sit in two vector registers,
//! `vpconflictd` and 16 rotated compares find each column's first occurrence in the sample, and only
//! those first occurrences touch the table, setting their "seen" bits. The in-sample bits are never
//! set, so no second pass clears them, and duplicates (frequent under skewed ids) cost nothing past
//! the compare. Counts per partition are popcounts of lane masks.
//!
//! The table is the two-bit one of the portable path, whose invariant (no in-sample bit set between
//! samples) this keeps, so both paths may count into the same table.

use std::arch::x86_64::*;

/// Samples of these lengths take this path: shorter ones waste most lanes.
pub(super) const VALENCY: std::ops::RangeInclusive<usize> = 8..=32;
/// Partitions counted by lane masks (one compare per partition and register).
pub(super) const MAX_PARTITIONS: usize = 16;

/// Whether this CPU runs [`rows`].
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512cd") && is_x86_feature_detected!("popcnt")
}

/// The table and the column map [`rows`] reads.
pub(super) struct Geometry {
    pub log_words: u32,
    pub columns: u32,
    pub shift: u32,
    pub offset: u32,
    /// Partitions - 1 (a power of two minus one).
    pub mask: u32,
}

/// The lanes of `lanes` whose column's seen bit is clear.
#[target_feature(enable = "avx512f")]
fn unseen(words: &[u64], wmask: u32, log_words: u32, cols: __m512i, lanes: u16) -> u16 {
    if lanes == 0 {
        return 0;
    }
    let word = _mm512_and_si512(cols, _mm512_set1_epi32(wmask as i32));
    let bit = _mm512_add_epi32(
        _mm512_slli_epi32::<1>(_mm512_srl_epi32(cols, _mm_cvtsi32_si128(log_words as i32))),
        _mm512_set1_epi32(1),
    );
    let one = _mm512_set1_epi64(1);
    let half = |word: __m256i, bit: __m256i, lanes: u8| -> u8 {
        // SAFETY: every gathered index is a column masked by `wmask` = `words.len()` - 1 (a power of two),
        // so inside `words`; masked-off lanes are not read.
        let w = unsafe { _mm512_mask_i32gather_epi64::<8>(_mm512_setzero_si512(), lanes, word, words.as_ptr().cast()) };
        _mm512_mask_testn_epi64_mask(lanes, _mm512_srlv_epi64(w, _mm512_cvtepu32_epi64(bit)), one)
    };
    let lo = half(_mm512_castsi512_si256(word), _mm512_castsi512_si256(bit), lanes as u8);
    let hi = half(
        _mm512_extracti64x4_epi64::<1>(word),
        _mm512_extracti64x4_epi64::<1>(bit),
        (lanes >> 8) as u8,
    );
    lo as u16 | (hi as u16) << 8
}

/// Counts whole samples of `valency` ids (in [`VALENCY`]; `ids.len()` a multiple of it) over
/// `mask + 1` (at most [`MAX_PARTITIONS`]) partitions into `cids` (ids after within-sample dedup) and
/// `cuniq` (columns new to the table). False when a column lies outside the table, as the portable
/// path answers; the counts are then abandoned by the caller.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512CD and POPCNT ([`available`]).
#[target_feature(enable = "avx512f,avx512cd,popcnt")]
pub(super) unsafe fn rows(
    words: &mut [u64],
    g: &Geometry,
    ids: &[i32],
    valency: usize,
    cids: &mut [u32],
    cuniq: &mut [u32],
) -> bool {
    debug_assert!(VALENCY.contains(&valency) && (g.mask as usize) < MAX_PARTITIONS);
    debug_assert_eq!(words.len(), 1 << g.log_words);
    let wmask = (1u32 << g.log_words) - 1;
    let lo_lanes: u16 = if valency >= 16 { u16::MAX } else { (1u16 << valency) - 1 };
    let hi_lanes: u16 = if valency > 16 {
        (((1u32 << (valency - 16)) - 1) & 0xFFFF) as u16
    } else {
        0
    };
    let columns = _mm512_set1_epi32(g.columns as i32);
    let shift = _mm512_set1_epi32(g.shift as i32);
    let offset = _mm512_set1_epi32(g.offset as i32);
    let mask = _mm512_set1_epi32(g.mask as i32);
    let not_mask = _mm512_set1_epi32(!g.mask as i32);
    let rotated = g.shift != 0;
    // A column: id + offset, or with the rotation ((id + shift) & mask) + (id & !mask) + offset.
    let col_of = |id: __m512i| {
        if rotated {
            let low = _mm512_and_si512(_mm512_add_epi32(id, shift), mask);
            _mm512_add_epi32(_mm512_add_epi32(low, _mm512_and_si512(id, not_mask)), offset)
        } else {
            _mm512_add_epi32(id, offset)
        }
    };
    let partitions = g.mask as usize + 1;
    let mut cols = [0u32; 32];
    for row in ids.chunks_exact(valency) {
        // SAFETY: masked loads touch only the lanes in the mask, all inside `row`.
        let a = col_of(unsafe { _mm512_maskz_loadu_epi32(lo_lanes, row.as_ptr()) });
        let b = col_of(unsafe { _mm512_maskz_loadu_epi32(hi_lanes, row.as_ptr().add(16.min(valency))) });
        if _mm512_mask_cmpge_epu32_mask(lo_lanes, a, columns) | _mm512_mask_cmpge_epu32_mask(hi_lanes, b, columns) != 0
        {
            return false;
        }
        // A lane's conflict bits name the earlier lanes holding its column; none: a first occurrence.
        let conflicts_a = _mm512_conflict_epi32(a);
        let mut first = _mm512_mask_testn_epi32_mask(lo_lanes, conflicts_a, conflicts_a) as u32;
        if hi_lanes != 0 {
            let conflicts_b = _mm512_conflict_epi32(b);
            let mut in_a: u16 = 0;
            // `a` is full when `b` is used: its 16 rotations meet every pair of lanes.
            macro_rules! rotations {
                ($($k:literal)*) => { $( in_a |= _mm512_cmpeq_epi32_mask(b, _mm512_alignr_epi32::<$k>(a, a)); )* };
            }
            rotations!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
            let first_b = _mm512_mask_testn_epi32_mask(hi_lanes & !in_a, conflicts_b, conflicts_b);
            first |= (first_b as u32) << 16;
        }
        // Seen bits of first occurrences, gathered eight words at a time; only the columns new to the
        // table (a few percent under skewed ids) are then set, one by one.
        let new = unseen(words, wmask, g.log_words, a, first as u16) as u32
            | (unseen(words, wmask, g.log_words, b, (first >> 16) as u16) as u32) << 16;
        if new != 0 {
            // SAFETY: unaligned stores into a local array of 32 lanes.
            unsafe {
                _mm512_storeu_si512(cols.as_mut_ptr().cast(), a);
                _mm512_storeu_si512(cols.as_mut_ptr().add(16).cast(), b);
            }
            let mut lanes = new;
            while lanes != 0 {
                let col = cols[lanes.trailing_zeros() as usize];
                lanes &= lanes - 1;
                words[(col & wmask) as usize] |= 1 << ((col >> g.log_words) * 2 + 1);
            }
        }
        let (pa, pb) = (_mm512_and_si512(a, mask), _mm512_and_si512(b, mask));
        for p in 0..partitions {
            let pv = _mm512_set1_epi32(p as i32);
            let lanes = _mm512_cmpeq_epi32_mask(pa, pv) as u32 | (_mm512_cmpeq_epi32_mask(pb, pv) as u32) << 16;
            cids[p] += (first & lanes).count_ones();
            cuniq[p] += (new & lanes).count_ones();
        }
    }
    true
}
