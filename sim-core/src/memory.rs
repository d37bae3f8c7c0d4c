//! Capacity accounting per memory space (HBM, VMEM, CMEM, Spmem, TileSpmem, host) with static
//! allocation and peak tracking; over-capacity is a typed error carrying the numbers.

/// Index of a memory space in a [`MemoryMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpaceId(pub usize);

/// Index of a live allocation in a [`MemoryMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocId(pub usize);

/// One memory space: its capacity and what is allocated in it now and at most.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemorySpace {
    /// Name, e.g. "chip0 HBM", "SC0 TileSpmem".
    pub name: String,
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// Bytes allocated now.
    pub in_use_bytes: u64,
    /// Highest `in_use_bytes` seen.
    pub peak_bytes: u64,
}

/// Errors of memory accounting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// An allocation does not fit.
    #[error(
        "allocating {requested_bytes} bytes for {what:?} in {space}: {in_use_bytes} of {capacity_bytes} bytes \
         already in use ({} short)",
        in_use_bytes + requested_bytes - capacity_bytes
    )]
    OverCapacity {
        /// Memory space name.
        space: String,
        /// What the allocation was for.
        what: String,
        /// Bytes requested.
        requested_bytes: u64,
        /// Bytes in use before the request.
        in_use_bytes: u64,
        /// Capacity of the space.
        capacity_bytes: u64,
    },
    /// A space or allocation id that this map did not hand out, or an allocation freed twice.
    #[error("{0}")]
    Unknown(String),
}

#[derive(Clone, Debug)]
struct Allocation {
    space: SpaceId,
    bytes: u64,
    what: String,
    live: bool,
}

/// Static allocations over a set of memory spaces.
#[derive(Clone, Debug, Default)]
pub struct MemoryMap {
    spaces: Vec<MemorySpace>,
    allocs: Vec<Allocation>,
}

impl MemoryMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a memory space of `capacity_bytes`.
    pub fn add_space(&mut self, name: impl Into<String>, capacity_bytes: u64) -> SpaceId {
        self.spaces.push(MemorySpace {
            name: name.into(),
            capacity_bytes,
            in_use_bytes: 0,
            peak_bytes: 0,
        });
        SpaceId(self.spaces.len() - 1)
    }
    /// Allocates `bytes` for `what` in `space`, or says by how much it does not fit.
    pub fn alloc(&mut self, space: SpaceId, bytes: u64, what: impl Into<String>) -> Result<AllocId, MemoryError> {
        let what = what.into();
        let s = self
            .spaces
            .get_mut(space.0)
            .ok_or_else(|| MemoryError::Unknown(format!("allocating {what:?}: unknown memory space #{}", space.0)))?;
        let total = s.in_use_bytes.checked_add(bytes);
        if total.is_none_or(|t| t > s.capacity_bytes) {
            return Err(MemoryError::OverCapacity {
                space: s.name.clone(),
                what,
                requested_bytes: bytes,
                in_use_bytes: s.in_use_bytes,
                capacity_bytes: s.capacity_bytes,
            });
        }
        s.in_use_bytes += bytes;
        s.peak_bytes = s.peak_bytes.max(s.in_use_bytes);
        self.allocs.push(Allocation {
            space,
            bytes,
            what,
            live: true,
        });
        Ok(AllocId(self.allocs.len() - 1))
    }
    /// Frees an allocation.
    pub fn free(&mut self, id: AllocId) -> Result<(), MemoryError> {
        let a =
            self.allocs.get_mut(id.0).filter(|a| a.live).ok_or_else(|| {
                MemoryError::Unknown(format!("freeing allocation #{}: unknown or already freed", id.0))
            })?;
        a.live = false;
        self.spaces[a.space.0].in_use_bytes -= a.bytes;
        Ok(())
    }
    /// A space's state.
    pub fn space(&self, id: SpaceId) -> Option<&MemorySpace> {
        self.spaces.get(id.0)
    }
    /// All spaces, in the order added.
    pub fn spaces(&self) -> &[MemorySpace] {
        &self.spaces
    }
    /// Live allocations of a space: (what, bytes), in allocation order.
    pub fn live(&self, space: SpaceId) -> impl Iterator<Item = (&str, u64)> {
        self.allocs
            .iter()
            .filter(move |a| a.live && a.space == space)
            .map(|a| (a.what.as_str(), a.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_survives_free() {
        let mut m = MemoryMap::new();
        let v = m.add_space("VMEM", 100);
        let a = m.alloc(v, 60, "a").unwrap();
        m.free(a).unwrap();
        m.alloc(v, 30, "b").unwrap();
        let s = m.space(v).unwrap();
        assert_eq!((s.in_use_bytes, s.peak_bytes), (30, 60));
        assert_eq!(m.live(v).collect::<Vec<_>>(), vec![("b", 30)]);
    }

    #[test]
    fn over_capacity_carries_numbers() {
        let mut m = MemoryMap::new();
        let v = m.add_space("SC0 TileSpmem", 100);
        m.alloc(v, 70, "ids").unwrap();
        let e = m.alloc(v, 40, "rows").unwrap_err();
        assert_eq!(
            e,
            MemoryError::OverCapacity {
                space: "SC0 TileSpmem".into(),
                what: "rows".into(),
                requested_bytes: 40,
                in_use_bytes: 70,
                capacity_bytes: 100
            }
        );
        assert_eq!(
            e.to_string(),
            "allocating 40 bytes for \"rows\" in SC0 TileSpmem: 70 of 100 bytes already in use (10 short)"
        );
    }

    #[test]
    fn double_free_is_an_error() {
        let mut m = MemoryMap::new();
        let v = m.add_space("HBM", 10);
        let a = m.alloc(v, 1, "x").unwrap();
        m.free(a).unwrap();
        assert!(matches!(m.free(a), Err(MemoryError::Unknown(_))));
    }
}
