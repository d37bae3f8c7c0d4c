//! ICI links as resources: one group per torus dimension and direction.
//!
//! Every chip drives one link each way along each dimension of its slice (on a dimension of two
//! chips without wraparound, the one link to its neighbour), and a symmetric collective loads the
//! same links of every chip alike, so the simulated chip's links along one dimension in one
//! direction stand for all of them. Two collectives share bandwidth only on the groups both load at
//! the same time; a collective over some dimensions leaves the others free.

use crate::topology::SliceShape;

/// One direction along one torus dimension: the links every chip drives that way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkGroup {
    /// Index of the dimension in the slice shape (0 for the first of `4x4x8`).
    pub axis: usize,
    /// Towards higher positions (`+`) or lower (`-`).
    pub positive: bool,
}

impl LinkGroup {
    /// A short name for tracks and counters: `x+`, `y-`, `z+`, then `d3+`...
    pub fn name(&self) -> String {
        let axis = match self.axis {
            0 => "x".to_string(),
            1 => "y".to_string(),
            2 => "z".to_string(),
            a => format!("d{a}"),
        };
        format!("{axis}{}", if self.positive { '+' } else { '-' })
    }
}

/// What a collective asks of the links: per group, the time its bytes take there alone; and its hops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkLoads {
    /// Per loaded group, ps at the group's link rate with nothing else on it.
    pub per_group_ps: Vec<(LinkGroup, u64)>,
    /// Hops paid one after another (priced by the caller's per-hop latency).
    pub latency_hops: u64,
}

impl LinkLoads {
    /// The collective's time alone: its busiest group's, ps.
    pub fn alone_ps(&self) -> u64 {
        self.per_group_ps.iter().map(|&(_, ps)| ps).max().unwrap_or(0)
    }
}

/// Every link group of a slice: both directions of each dimension longer than one chip, in order.
pub fn link_groups(shape: &SliceShape) -> Vec<LinkGroup> {
    shape
        .dims
        .iter()
        .enumerate()
        .filter(|(_, &d)| d > 1)
        .flat_map(|(axis, _)| [true, false].map(|positive| LinkGroup { axis, positive }))
        .collect()
}

fn both_directions(per_axis: Vec<(usize, u64)>, latency_hops: u64) -> LinkLoads {
    LinkLoads {
        per_group_ps: per_axis
            .into_iter()
            .flat_map(|(axis, ps)| [true, false].map(|positive| (LinkGroup { axis, positive }, ps)))
            .collect(),
        latency_hops,
    }
}

/// The uniform all-to-all of `SliceShape::all_to_all`, per link group.
pub fn all_to_all_loads(shape: &SliceShape, bytes_per_chip: u64, link_bytes_per_s: u64) -> LinkLoads {
    let hops = shape.diameter();
    both_directions(shape.all_to_all_per_axis(bytes_per_chip, link_bytes_per_s), hops)
}

/// The all-reduce of `SliceShape::all_reduce`, per link group.
pub fn all_reduce_loads(shape: &SliceShape, bytes: u64, link_bytes_per_s: u64) -> LinkLoads {
    let hops = shape.all_reduce(0, 1).latency_hops;
    both_directions(shape.all_reduce_per_axis(bytes, link_bytes_per_s), hops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chips::Chip;

    #[test]
    fn groups_and_loads_by_hand() {
        let v4 = Chip::preset("v4").unwrap().spec;
        // 4x4x8: three dimensions, two directions each.
        let s = SliceShape::for_chip(&v4, 128, None).unwrap();
        let names: Vec<String> = link_groups(&s).iter().map(|g| g.name()).collect();
        assert_eq!(names, ["x+", "x-", "y+", "y-", "z+", "z-"]);
        // All-to-all of 6.4 MB per chip at 45 GB/s: the 4-rings' busiest link carries bytes/4 x 2
        // pairs (71.1 us), the 8-ring's bytes/8 x 8 pairs (142.2 us); each in both directions.
        let a = all_to_all_loads(&s, 6_400_000, 45_000_000_000);
        let ps: Vec<u64> = a.per_group_ps.iter().map(|&(_, p)| p).collect();
        assert_eq!(
            ps,
            [71_111_111, 71_111_111, 71_111_111, 71_111_111, 142_222_222, 142_222_222]
        );
        assert_eq!(a.alone_ps(), 142_222_222);
        assert_eq!(a.latency_hops, 2 + 2 + 4);
        // A 1x1x2 slice (v4, 2 chips): one dimension, its two directions.
        let two = SliceShape::for_chip(&v4, 2, None).unwrap();
        let g = link_groups(&two);
        assert_eq!(
            g,
            [
                LinkGroup {
                    axis: 2,
                    positive: true
                },
                LinkGroup {
                    axis: 2,
                    positive: false
                }
            ]
        );
        // All-reduce over a 2-chip line: V/2 each way at 1 GB/s for 1 MB: 1 ms on each direction.
        let r = all_reduce_loads(&two, 1_000_000, 1_000_000_000);
        assert_eq!(
            r.per_group_ps.iter().map(|&(_, p)| p).collect::<Vec<_>>(),
            [1_000_000_000; 2]
        );
    }
}
