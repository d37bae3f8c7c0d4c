//! Collectives over groups of devices on a slice: device ids to torus coordinates, the grid a group spans,
//! the algorithm, and the busiest link's bytes and the hops, with the closed forms of [`super`].
//!
//! Device ids count cores fastest, then x, y, z (the XLA TPU compiler's device order for a slice, checked
//! against the coordinates it reports, `tools/shard-probe/`). A group whose chips form a grid (a product
//! of evenly spaced positions along each dimension) runs a ring per dimension, several dimensions at once
//! with rotated chunks (2D and 3D decompositions). Any other group is costed by the stated conservative
//! rule: a line through all its chips whose every step crosses the slice's diameter.

use serde::Serialize;

use super::{all_reduce_lanes, all_reduce_on, all_to_all_routed, CollectiveTime, Ring, SliceShape};

/// Devices of a slice: its shape and the devices on each chip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceMap {
    /// The slice.
    pub slice: SliceShape,
    /// Compiler devices per chip (2 where each TensorCore is a device: v4, tpu7x; else 1).
    pub devices_per_chip: u32,
}

/// What a collective moves, by pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Every member ends with the reduction of `bytes` (per device).
    AllReduce {
        /// Bytes of the operand on each device.
        bytes: u64,
    },
    /// All-gather of a `bytes` result per device, or reduce-scatter of a `bytes` operand: half an all-reduce.
    Gather {
        /// Bytes of the gathered result (or the scattered operand) per device.
        bytes: u64,
    },
    /// Each member sends `bytes` split evenly over the group.
    AllToAll {
        /// Bytes of the operand on each device.
        bytes: u64,
    },
    /// Each source sends `bytes` to its target.
    Permute {
        /// Bytes sent by each source.
        bytes: u64,
        /// (source, target) device ids.
        pairs: Vec<(u32, u32)>,
    },
}

/// How a collective is run on the slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Every member on one chip: no ICI.
    OnChip,
    /// A bidirectional ring along one torus dimension (wraparound closes it).
    BidirectionalRing,
    /// A line along one dimension (no wraparound): a folded ring, each link used both ways by one ring.
    Line,
    /// Rings along two dimensions at once, the data in two chunks taking the dimensions in rotated order.
    TwoD,
    /// Rings along three dimensions at once, three rotated chunks.
    ThreeD,
    /// One bidirectional ring through every chip of a group spanning several dimensions (an all-gather
    /// over more than a 2x2 grid; an all-reduce over one device of each two-device chip).
    OneRing,
    /// Point-to-point messages routed dimension by dimension (permutes, and groups that form no grid).
    Routed,
    /// A group whose chips form no grid: the conservative line (see the module doc).
    Irregular,
}

/// The cost of one collective on the slice, before pricing: the busiest link and the hops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupTime {
    /// Bandwidth time and hops.
    pub time: CollectiveTime,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The dimensions the group runs along (empty on one chip).
    pub rings: Vec<Ring>,
    /// Chips in the (largest) group.
    pub chips: u64,
}

/// Why a group cannot be costed on the slice.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("device {device} is not on the slice ({devices} devices: {chips} chips x {per_chip} per chip)")]
pub struct DeviceOutOfRange {
    /// The id named.
    pub device: u32,
    /// Devices the slice has.
    pub devices: u64,
    /// Chips.
    pub chips: u64,
    /// Devices per chip.
    pub per_chip: u32,
}

impl DeviceMap {
    /// Devices on the slice.
    pub fn devices(&self) -> u64 {
        self.slice.chips() * self.devices_per_chip as u64
    }

    /// The chip of a device and its coordinates (x first).
    pub fn coords(&self, device: u32) -> Result<Vec<u32>, DeviceOutOfRange> {
        if u64::from(device) >= self.devices() {
            return Err(DeviceOutOfRange {
                device,
                devices: self.devices(),
                chips: self.slice.chips(),
                per_chip: self.devices_per_chip,
            });
        }
        let mut chip = device / self.devices_per_chip.max(1);
        Ok(self
            .slice
            .dims
            .iter()
            .map(|&d| {
                let c = chip % d;
                chip /= d;
                c
            })
            .collect())
    }

    /// The rings a group of chips spans, `None` when its chips form no evenly spaced grid.
    pub fn rings(&self, chips: &[Vec<u32>]) -> Option<Vec<Ring>> {
        let mut rings = Vec::new();
        let mut product = 1u64;
        for (dim, (&size, &wraps)) in self.slice.dims.iter().zip(&self.slice.wraparound).enumerate() {
            let mut pos: Vec<u32> = chips.iter().map(|c| c[dim]).collect();
            pos.sort_unstable();
            pos.dedup();
            let k = pos.len() as u64;
            product *= k;
            if k < 2 {
                continue;
            }
            let stride = pos[1] - pos[0];
            if pos.windows(2).any(|w| w[1] - w[0] != stride) {
                return None;
            }
            // A dimension of two chips has two links between them (each chip's + and - ports reach the
            // other): the compiler's scheduler prices a pair's all-gather and all-to-all at twice one link.
            let wrap = (wraps || size == 2) && k * stride as u64 == size as u64;
            rings.push(Ring {
                k,
                wrap,
                stride: stride as u64,
            });
        }
        (product == chips.len() as u64).then_some(rings)
    }

    /// The chips (coordinates, distinct, in id order) of a group and how many of its devices share a chip.
    fn group_chips(&self, group: &[u32]) -> Result<(Vec<Vec<u32>>, u64), DeviceOutOfRange> {
        let mut chips: Vec<Vec<u32>> = Vec::with_capacity(group.len());
        for &d in group {
            let c = self.coords(d)?;
            if !chips.contains(&c) {
                chips.push(c);
            }
        }
        let per_chip = (group.len() as u64).div_ceil(chips.len().max(1) as u64);
        Ok((chips, per_chip))
    }

    /// Costs `pattern` over `groups` (all groups run at once; the largest sets the time).
    pub fn cost(
        &self,
        pattern: &Pattern,
        groups: &[Vec<u32>],
        link_bytes_per_s: u64,
    ) -> Result<GroupTime, DeviceOutOfRange> {
        if let Pattern::Permute { bytes, pairs } = pattern {
            return self.permute(*bytes, pairs, link_bytes_per_s);
        }
        let biggest = groups.iter().max_by_key(|g| g.len()).cloned().unwrap_or_default();
        for g in groups {
            for &d in g {
                self.coords(d)?;
            }
        }
        let (chips, per_chip) = self.group_chips(&biggest)?;
        let n_chips = chips.len() as u64;
        if n_chips <= 1 {
            return Ok(GroupTime {
                time: CollectiveTime::default(),
                algorithm: Algorithm::OnChip,
                rings: Vec::new(),
                chips: n_chips,
            });
        }
        // Devices sharing a chip combine on chip first: an all-reduce crosses ICI once per chip; gathered
        // and exchanged data carries every device's share.
        let (bytes, reduce) = match *pattern {
            Pattern::AllReduce { bytes } => (bytes, 2),
            Pattern::Gather { bytes } => (bytes, 1),
            Pattern::AllToAll { bytes } => (bytes.saturating_mul(per_chip), 0),
            Pattern::Permute { .. } => unreachable!("handled above"),
        };
        let Some(rings) = self.rings(&chips) else {
            return Ok(self.irregular(bytes, reduce, n_chips, link_bytes_per_s));
        };
        // As the compiler runs them (its scheduler's prices, `tools/shard-probe/`): all-to-all sends every
        // message one way round each ring; an all-reduce over one pair is a unidirectional ring
        // (`UniDirection1DRingStrategy`), any other uses both directions of every link (rings, and lines as
        // folded rings).
        let single_pair = rings.len() == 1 && rings[0].k == 2;
        let through_all = Ring {
            k: n_chips,
            wrap: true,
            stride: 1,
        };
        // Where a chip holds two devices (v4), an all-reduce over several dimensions that takes one device of
        // each chip runs as one ring through the group (`RotatedPincerEmitter/StrategyRing`, priced as one
        // ring's bytes per link); over every device of its chips it runs on every dimension at once
        // (`UniDirectionNDRingStrategy`, priced at a third on a 3D group). `tools/shard-probe/`.
        let one_ring = rings.len() > 1
            && match reduce {
                2 => per_chip < u64::from(self.devices_per_chip),
                1 => n_chips > 4,
                _ => false,
            };
        let mut time = match reduce {
            0 => all_to_all_routed(&rings, bytes, link_bytes_per_s, true),
            // The one ring above, and an all-gather over several dimensions but a 2x2 grid (the compiler's
            // `1DAllGatherNonMajorDim`): one bidirectional ring through all the group's chips.
            _ if one_ring => all_reduce_lanes(&[through_all], bytes, link_bytes_per_s, &|_: &Ring| 2),
            2 => all_reduce_lanes(&rings, bytes, link_bytes_per_s, &|_: &Ring| {
                if single_pair {
                    1
                } else {
                    2
                }
            }),
            _ => all_reduce_lanes(&rings, bytes, link_bytes_per_s, &|_: &Ring| 2),
        };
        if reduce == 1 {
            // Half an all-reduce: one of its two phases.
            time.bandwidth_ps /= 2;
            time.latency_hops /= 2;
        }
        let algorithm = match rings.as_slice() {
            _ if one_ring => Algorithm::OneRing,
            [r] if r.wrap => Algorithm::BidirectionalRing,
            [_] => Algorithm::Line,
            [_, _] => Algorithm::TwoD,
            _ => Algorithm::ThreeD,
        };
        Ok(GroupTime {
            time,
            algorithm,
            rings,
            chips: n_chips,
        })
    }

    /// The conservative rule for a group forming no grid: a folded ring (line) through its `n` chips,
    /// each step crossing the slice's diameter in hops and sharing one link.
    fn irregular(&self, bytes: u64, reduce: u32, n: u64, link_bytes_per_s: u64) -> GroupTime {
        let line = [Ring {
            k: n,
            wrap: false,
            stride: 1,
        }];
        let mut time = if reduce == 0 {
            all_to_all_routed(&line, bytes, link_bytes_per_s, true)
        } else {
            all_reduce_on(&line, bytes, link_bytes_per_s)
        };
        if reduce == 1 {
            time.bandwidth_ps /= 2;
        }
        let steps = if reduce == 2 { 2 * (n - 1) } else { n - 1 };
        time.latency_hops = steps * self.slice.diameter().max(1);
        GroupTime {
            time,
            algorithm: Algorithm::Irregular,
            rings: line.to_vec(),
            chips: n,
        }
    }

    /// Point-to-point messages, each routed dimension by dimension the short way round (a tie on a ring
    /// splits both ways): the busiest directed link's bytes, and the longest route in hops.
    fn permute(&self, bytes: u64, pairs: &[(u32, u32)], link_bytes_per_s: u64) -> Result<GroupTime, DeviceOutOfRange> {
        // Link loads in halves of a message, keyed by (chip index, dimension, direction).
        let mut load: std::collections::BTreeMap<(Vec<u32>, usize, bool), u64> = Default::default();
        let mut longest = 0u64;
        let mut chips = std::collections::BTreeSet::new();
        for &(s, t) in pairs {
            let (mut at, to) = (self.coords(s)?, self.coords(t)?);
            chips.insert(at.clone());
            chips.insert(to.clone());
            let mut hops = 0u64;
            for dim in 0..at.len() {
                let (size, wraps) = (self.slice.dims[dim], self.slice.wraparound[dim]);
                let fwd = (to[dim] + size - at[dim]) % size;
                // (direction +, steps, weight in halves) of each part of the message.
                let parts: Vec<(bool, u32, u64)> = if !wraps {
                    vec![(to[dim] > at[dim], to[dim].abs_diff(at[dim]), 2)]
                } else if 2 * fwd < size {
                    vec![(true, fwd, 2)]
                } else if 2 * fwd > size {
                    vec![(false, size - fwd, 2)]
                } else {
                    vec![(true, fwd, 1), (false, fwd, 1)]
                };
                let steps = parts[0].1;
                for (dir_plus, n, w) in parts {
                    let mut p = at.clone();
                    for _ in 0..n {
                        *load.entry((p.clone(), dim, dir_plus)).or_insert(0) += w;
                        p[dim] = if dir_plus {
                            (p[dim] + 1) % size
                        } else {
                            (p[dim] + size - 1) % size
                        };
                    }
                }
                at[dim] = to[dim];
                hops += steps as u64;
            }
            longest = longest.max(hops);
        }
        let busiest = load.values().copied().max().unwrap_or(0);
        Ok(GroupTime {
            time: CollectiveTime {
                bandwidth_ps: super::ps(bytes as u128 * busiest as u128, 2 * link_bytes_per_s.max(1) as u128),
                latency_hops: longest,
            },
            algorithm: if longest == 0 {
                Algorithm::OnChip
            } else {
                Algorithm::Routed
            },
            rings: Vec::new(),
            chips: chips.len() as u64,
        })
    }
}
