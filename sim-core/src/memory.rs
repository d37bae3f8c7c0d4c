//! Capacity accounting per memory space (HBM, VMEM, CMEM, Spmem, TileSpmem, host) with static
//! allocation, freeing and peak tracking. Over-capacity is a typed error carrying the numbers.

use std::collections::BTreeMap;

/// An allocation that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("out of {space}: allocating {requested_bytes} B for '{what}' with {in_use_bytes} B in use exceeds the capacity of {capacity_bytes} B by {} B", requested_bytes + in_use_bytes - capacity_bytes)]
pub struct OutOfMemory {
    /// Memory space name.
    pub space: String,
    /// What was being allocated.
    pub what: String,
    /// Bytes asked for.
    pub requested_bytes: u64,
    /// Bytes already in use.
    pub in_use_bytes: u64,
    /// Capacity of the space.
    pub capacity_bytes: u64,
}

/// One memory space's accounting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceUsage {
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// Bytes in use now.
    pub in_use_bytes: u64,
    /// Largest `in_use_bytes` seen.
    pub peak_bytes: u64,
    /// Live allocations by name (bytes).
    pub allocations: BTreeMap<String, u64>,
}

/// Capacity accounting for several memory spaces.
#[derive(Clone, Debug, Default)]
pub struct MemoryMap {
    spaces: BTreeMap<String, SpaceUsage>,
}

impl MemoryMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a space and its capacity.
    pub fn add_space(&mut self, space: &str, capacity_bytes: u64) {
        self.spaces.insert(
            space.to_string(),
            SpaceUsage {
                capacity_bytes,
                ..Default::default()
            },
        );
    }

    /// Allocates `bytes` for `what`; fails without changing anything when it would exceed capacity.
    pub fn allocate(&mut self, space: &str, what: &str, bytes: u64) -> Result<(), OutOfMemory> {
        let s = self.spaces.entry(space.to_string()).or_default();
        let total = s.in_use_bytes.saturating_add(bytes);
        if total > s.capacity_bytes {
            return Err(OutOfMemory {
                space: space.to_string(),
                what: what.to_string(),
                requested_bytes: bytes,
                in_use_bytes: s.in_use_bytes,
                capacity_bytes: s.capacity_bytes,
            });
        }
        s.in_use_bytes = total;
        s.peak_bytes = s.peak_bytes.max(total);
        *s.allocations.entry(what.to_string()).or_default() += bytes;
        Ok(())
    }

    /// Records an allocation even when it does not fit (for what-if reports); returns whether it fit.
    pub fn allocate_unchecked(&mut self, space: &str, what: &str, bytes: u64) -> bool {
        let s = self.spaces.entry(space.to_string()).or_default();
        s.in_use_bytes = s.in_use_bytes.saturating_add(bytes);
        s.peak_bytes = s.peak_bytes.max(s.in_use_bytes);
        *s.allocations.entry(what.to_string()).or_default() += bytes;
        s.in_use_bytes <= s.capacity_bytes
    }

    /// Frees what `what` holds in `space` (all of it).
    pub fn free(&mut self, space: &str, what: &str) {
        if let Some(s) = self.spaces.get_mut(space) {
            if let Some(b) = s.allocations.remove(what) {
                s.in_use_bytes -= b;
            }
        }
    }

    /// The accounting of one space.
    pub fn space(&self, space: &str) -> Option<&SpaceUsage> {
        self.spaces.get(space)
    }

    /// All spaces, by name.
    pub fn spaces(&self) -> &BTreeMap<String, SpaceUsage> {
        &self.spaces
    }

    /// Whether every space's peak is within its capacity.
    pub fn fits(&self) -> bool {
        self.spaces.values().all(|s| s.peak_bytes <= s.capacity_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_and_out_of_memory() {
        let mut m = MemoryMap::new();
        m.add_space("vmem", 100);
        m.allocate("vmem", "a", 60).unwrap();
        m.free("vmem", "a");
        m.allocate("vmem", "b", 30).unwrap();
        let err = m.allocate("vmem", "c", 80).unwrap_err();
        assert_eq!(err.in_use_bytes, 30);
        assert_eq!(
            err.to_string(),
            "out of vmem: allocating 80 B for 'c' with 30 B in use exceeds the capacity of 100 B by 10 B"
        );
        assert_eq!(m.space("vmem").unwrap().peak_bytes, 60);
        assert!(m.fits());
        assert!(!m.allocate_unchecked("vmem", "d", 90));
        assert!(!m.fits());
    }
}
