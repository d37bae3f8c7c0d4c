//! Stable LSD radix sort of 64-bit keys on their high 38 bits (bucket and rotated column). The low
//! 26 bits are the extraction index, which grows in push order, so a stable sort on the high bits
//! gives exactly the order of a full 64-bit sort, in linear time.

const DIGIT_BITS: u32 = 11;
const LOW_BITS: u32 = 26;

/// Sorts `keys` ascending; `scratch` is reused between calls.
pub fn sort_keys(keys: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    if keys.len() < 256 {
        keys.sort_unstable();
        return;
    }
    let varying = keys.iter().fold(0u64, |acc, &k| acc | (k ^ keys[0])) >> LOW_BITS;
    scratch.clear();
    scratch.resize(keys.len(), 0);
    let mut shift = LOW_BITS;
    let mut counts = vec![0usize; 1 << DIGIT_BITS];
    while shift < 64 {
        let digit_mask = ((1u64 << DIGIT_BITS) - 1) << (shift - LOW_BITS);
        if varying & digit_mask != 0 {
            counts.iter_mut().for_each(|c| *c = 0);
            for &k in keys.iter() {
                counts[((k >> shift) & ((1 << DIGIT_BITS) - 1)) as usize] += 1;
            }
            let mut sum = 0;
            for c in counts.iter_mut() {
                let x = *c;
                *c = sum;
                sum += x;
            }
            for &k in keys.iter() {
                let d = ((k >> shift) & ((1 << DIGIT_BITS) - 1)) as usize;
                scratch[counts[d]] = k;
                counts[d] += 1;
            }
            std::mem::swap(keys, scratch);
        }
        shift += DIGIT_BITS;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_full_sort_when_low_bits_grow_in_order() {
        let mut x = 12345u64;
        let mut keys: Vec<u64> = (0..5000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x % 300) << 40) | ((x % 7) << 30) | i
            })
            .collect();
        let mut expected = keys.clone();
        expected.sort_unstable();
        sort_keys(&mut keys, &mut Vec::new());
        assert_eq!(keys, expected);
    }
}
