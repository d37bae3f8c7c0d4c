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

#[cfg(test)]
mod tests {
    use super::*;

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
