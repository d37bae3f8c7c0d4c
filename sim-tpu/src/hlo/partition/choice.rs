//! The chip's side of the compiler's choice between one collective and a windowed einsum
//! (the `windowed` module).

/// Groups of at most this many devices always take one collective.
pub const MAX_PLAIN_GROUP: u64 = 4;

/// The chip's side of the decision: rows per device from which a block's dot covers its transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowedEinsum {
    /// `peak bf16 FLOP/s / (ICI links x bytes/s per link)`, rounded up.
    pub min_rows: u64,
}

impl WindowedEinsum {
    /// From the chip's peak and links.
    pub fn of(peak_flops: u64, links: u32, link_bytes_per_s: u64) -> WindowedEinsum {
        let bw = u64::from(links.max(1)).saturating_mul(link_bytes_per_s.max(1));
        WindowedEinsum {
            min_rows: peak_flops.div_ceil(bw),
        }
    }

    /// Whether a dot over groups of `n` devices with `rows` rows per device runs windowed.
    pub fn applies(&self, n: u64, rows: u64) -> bool {
        n > MAX_PLAIN_GROUP && rows >= self.min_rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_from_the_datasheet() {
        // v5p: 459e12 FLOP/s over 6 links of 90 GB/s = 850 rows; v6e: 918e12 over 4 x 90 GB/s = 2550.
        assert_eq!(WindowedEinsum::of(459_000_000_000_000, 6, 90_000_000_000).min_rows, 850);
        let v6e = WindowedEinsum::of(918_000_000_000_000, 4, 90_000_000_000);
        assert_eq!(v6e.min_rows, 2550);
        assert!(v6e.applies(8, 4096) && !v6e.applies(8, 1024) && !v6e.applies(4, 1 << 20));
    }
}
