//! Stable LSD radix sort of 64-bit keys on their high 38 bits (bucket and rotated column). The low
//! 26 bits are the extraction index, which grows in push order, so a stable sort on the high bits
//! gives exactly the order of a full 64-bit sort, in linear time.

const DIGIT_BITS: u32 = 11;
const LOW_BITS: u32 = 26;

/// Digits above the low bits: (64 - 26) / 11 rounded up.
const DIGITS: usize = (64 - LOW_BITS as usize).div_ceil(DIGIT_BITS as usize);

/// Sorts `keys` ascending; `scratch` is reused between calls. One read pass counts every digit;
/// digits whose keys all fall in one bucket are skipped; each remaining digit is one scatter pass.
pub fn sort_keys(keys: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    if keys.len() < 256 {
        keys.sort_unstable();
        return;
    }
    const RADIX: usize = 1 << DIGIT_BITS;
    let mask = (RADIX - 1) as u64;
    let mut counts = vec![[0usize; RADIX]; DIGITS];
    for &k in keys.iter() {
        let high = k >> LOW_BITS;
        for (d, c) in counts.iter_mut().enumerate() {
            c[((high >> (d as u32 * DIGIT_BITS)) & mask) as usize] += 1;
        }
    }
    scratch.clear();
    scratch.resize(keys.len(), 0);
    let n = keys.len();
    for (d, c) in counts.iter_mut().enumerate() {
        if c.contains(&n) {
            continue;
        }
        let mut sum = 0;
        for x in c.iter_mut() {
            let v = *x;
            *x = sum;
            sum += v;
        }
        let shift = LOW_BITS + d as u32 * DIGIT_BITS;
        for &k in keys.iter() {
            let digit = ((k >> shift) & mask) as usize;
            scratch[c[digit]] = k;
            c[digit] += 1;
        }
        std::mem::swap(keys, scratch);
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
