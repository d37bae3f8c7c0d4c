//! ICI slice shapes and collective times on them.
//!
//! Chips of a slice sit on a 3D torus (v4, v5p, tpu7x) or a 2D torus (v5e, v6e). A slice has a shape
//! such as 4x4x8; a dimension has wraparound links only where the slice has them (assumed from the Cloud
//! TPU slice shapes: 3D slices made of whole 4x4x4 cubes are tori, smaller ones are meshes; 2D slices
//! wrap only along a full 16-chip pod dimension). Messages take shortest paths, dimension by dimension.
//!
//! Collective times are closed forms on that shape: the busiest link's bytes over the link bandwidth,
//! plus a number of hops that the caller prices with a per-hop latency.

use crate::chips::ChipSpec;

pub mod groups;

/// Errors of slice shapes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    /// The text is not a shape like `4x4x8`.
    #[error("topology '{text}': {why} (valid: {dims} positive integers joined by 'x', e.g. {example})")]
    Malformed {
        /// The text given.
        text: String,
        /// What is wrong.
        why: String,
        /// Dimensions the chip's torus has.
        dims: usize,
        /// An example shape.
        example: String,
    },
    /// The shape's chips differ from the workload's.
    #[error("topology '{text}' holds {product} chips, but the workload has {chips}")]
    Mismatch {
        /// The text given.
        text: String,
        /// Chips the shape holds.
        product: u64,
        /// Chips of the workload.
        chips: u64,
    },
    /// No Cloud slice shape of that many chips is known.
    #[error("no default {dims}D slice shape for {chips} chips: give `topology` (e.g. {example})")]
    NoDefault {
        /// Chips asked for.
        chips: u64,
        /// Torus dimensions.
        dims: usize,
        /// An example shape.
        example: String,
    },
}

/// A slice: its size along each torus dimension and whether that dimension wraps around.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceShape {
    /// Chips along each dimension.
    pub dims: Vec<u32>,
    /// Wraparound links along each dimension.
    pub wraparound: Vec<bool>,
}

/// Time of one collective on a slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollectiveTime {
    /// Bytes over bandwidth on the busiest link, ps.
    pub bandwidth_ps: u64,
    /// Hops paid one after another (priced by the caller's per-hop latency).
    pub latency_hops: u64,
}

/// Torus dimensions of a chip (3 for a 3D torus, else 2).
pub fn torus_dims(chip: &ChipSpec) -> usize {
    if chip.ici_topology.starts_with("3D") {
        3
    } else {
        2
    }
}

/// Cloud slice shapes for powers of two (3D: v4/v5p/tpu7x; 2D: v5e/v6e).
fn default_dims(dims: usize, chips: u64) -> Option<Vec<u32>> {
    let table3: &[(u64, [u32; 3])] = &[
        (1, [1, 1, 1]),
        (2, [1, 1, 2]),
        (4, [2, 2, 1]),
        (8, [2, 2, 2]),
        (16, [2, 2, 4]),
        (32, [2, 4, 4]),
        (64, [4, 4, 4]),
        (128, [4, 4, 8]),
        (256, [4, 8, 8]),
        (512, [8, 8, 8]),
        (1024, [8, 8, 16]),
        (2048, [8, 16, 16]),
        (4096, [16, 16, 16]),
        (8192, [16, 16, 32]),
    ];
    let table2: &[(u64, [u32; 2])] = &[
        (1, [1, 1]),
        (2, [1, 2]),
        (4, [2, 2]),
        (8, [2, 4]),
        (16, [4, 4]),
        (32, [4, 8]),
        (64, [8, 8]),
        (128, [8, 16]),
        (256, [16, 16]),
    ];
    if dims == 3 {
        table3.iter().find(|(n, _)| *n == chips).map(|(_, d)| d.to_vec())
    } else {
        table2.iter().find(|(n, _)| *n == chips).map(|(_, d)| d.to_vec())
    }
}

fn join_dims(d: &[u32]) -> String {
    d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x")
}

/// Every shape of `chips` chips on a `dims`-dimensional torus, sizes in non-decreasing order (any
/// order of them is the same shape turned), at most 16 of them.
pub fn valid_shapes(dims: usize, chips: u64) -> Vec<String> {
    fn go(dims: usize, chips: u64, min: u64, acc: &mut Vec<u64>, out: &mut Vec<String>) {
        if out.len() >= 16 {
            return;
        }
        if dims == 1 {
            if chips >= min && chips <= u32::MAX as u64 {
                acc.push(chips);
                out.push(acc.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x"));
                acc.pop();
            }
            return;
        }
        let mut d = min.max(1);
        while d.saturating_pow(dims as u32) <= chips {
            if chips.is_multiple_of(d) {
                acc.push(d);
                go(dims - 1, chips / d, d, acc, out);
                acc.pop();
            }
            d += 1;
        }
    }
    let mut out = Vec::new();
    if chips > 0 && dims > 0 {
        go(dims, chips, 1, &mut Vec::new(), &mut out);
    }
    out
}

fn example(dims: usize) -> String {
    if dims == 3 { "4x4x8" } else { "8x16" }.to_string()
}

impl SliceShape {
    /// The slice of `chips` chips for this chip: the shape given as text (`4x4x8`), or the Cloud
    /// default for that many chips.
    pub fn for_chip(chip: &ChipSpec, chips: u64, text: Option<&str>) -> Result<SliceShape, TopologyError> {
        let n = torus_dims(chip);
        let dims = match text {
            Some(t) => {
                // The example is this chip count's default shape where there is one.
                let example = default_dims(n, chips).map_or_else(|| example(n), |d| join_dims(&d));
                let bad = |why: &str| TopologyError::Malformed {
                    text: t.to_string(),
                    why: why.to_string(),
                    dims: n,
                    example: example.clone(),
                };
                let dims: Vec<u32> = t
                    .split('x')
                    .map(|d| d.trim().parse::<u32>().ok().filter(|&v| v > 0))
                    .collect::<Option<_>>()
                    .ok_or_else(|| bad("every dimension must be a positive integer"))?;
                if dims.len() != n {
                    return Err(bad(&format!(
                        "{} has a {n}D torus, this has {} dimensions; the shapes of {chips} {} chips are {} (in any order; without `topology`, the default {example})",
                        chip.name,
                        dims.len(),
                        chip.name,
                        valid_shapes(n, chips).join(", ")
                    )));
                }
                let product = dims.iter().try_fold(1u64, |p, &d| p.checked_mul(d as u64));
                match product {
                    Some(p) if p == chips => dims,
                    Some(p) => {
                        return Err(TopologyError::Mismatch {
                            text: t.to_string(),
                            product: p,
                            chips,
                        })
                    }
                    None => return Err(bad("too many chips")),
                }
            }
            None => default_dims(n, chips).ok_or(TopologyError::NoDefault {
                chips,
                dims: n,
                example: example(n),
            })?,
        };
        let wraparound = if n == 3 {
            let cubes = dims.iter().all(|d| d % 4 == 0);
            dims.iter().map(|_| cubes).collect()
        } else {
            dims.iter().map(|&d| d == 16).collect()
        };
        Ok(SliceShape { dims, wraparound })
    }

    /// The slice a shape's text names for this chip (`8x8x8`: its chips are the product).
    pub fn from_text(chip: &ChipSpec, text: &str) -> Result<SliceShape, TopologyError> {
        let chips = text
            .split('x')
            .map(|d| d.trim().parse::<u64>().ok().filter(|&v| v > 0))
            .try_fold(1u64, |p, d| d.and_then(|d| p.checked_mul(d)))
            .unwrap_or(0);
        SliceShape::for_chip(chip, chips, Some(text))
    }

    /// Chips in the slice.
    pub fn chips(&self) -> u64 {
        self.dims.iter().map(|&d| d as u64).product()
    }

    /// Dimensions longer than one chip.
    fn axes(&self) -> impl Iterator<Item = (u64, bool)> + '_ {
        self.dims
            .iter()
            .zip(&self.wraparound)
            .filter(|(d, _)| **d > 1)
            .map(|(&d, &w)| (d as u64, w))
    }

    /// Largest number of hops between two chips.
    pub fn diameter(&self) -> u64 {
        self.axes().map(|(k, w)| if w { k / 2 } else { k - 1 }).sum()
    }

    /// A uniform all-to-all where every chip sends `bytes_per_chip` bytes spread evenly over all
    /// chips (itself included). Along a dimension of k chips every ordered pair of positions carries
    /// bytes/k (dimension-ordered routing), so the busiest link there moves bytes/k times the most
    /// pairs routed over one link; dimensions work at once, so the slowest one sets the time.
    pub fn all_to_all(&self, bytes_per_chip: u64, link_bytes_per_s: u64) -> CollectiveTime {
        let axes: Vec<Ring> = self.axes().map(|(k, wrap)| Ring { k, wrap, stride: 1 }).collect();
        all_to_all_on(&axes, bytes_per_chip, link_bytes_per_s)
    }

    /// Per dimension longer than one chip (its index), the time in ps the busiest link of each
    /// direction along it takes for `all_to_all` (both directions carry the same).
    pub fn all_to_all_per_axis(&self, bytes_per_chip: u64, link_bytes_per_s: u64) -> Vec<(usize, u64)> {
        self.indexed_axes()
            .map(|(axis, k, wrap)| {
                let ring = Ring { k, wrap, stride: 1 };
                (
                    axis,
                    all_to_all_on(&[ring], bytes_per_chip, link_bytes_per_s).bandwidth_ps,
                )
            })
            .collect()
    }

    /// Dimensions longer than one chip with their index.
    fn indexed_axes(&self) -> impl Iterator<Item = (usize, u64, bool)> + '_ {
        self.dims
            .iter()
            .zip(&self.wraparound)
            .enumerate()
            .filter(|(_, (d, _))| **d > 1)
            .map(|(i, (&d, &w))| (i, d as u64, w))
    }

    /// An all-reduce of `bytes` on every chip: reduce-scatter then all-gather along each dimension
    /// (a bidirectional ring where the dimension wraps, a line at half that rate where it does not),
    /// the data split into one chunk per dimension, each chunk taking the dimensions in its own
    /// rotated order so every dimension works at once; the slowest dimension sets the time. Hops: the
    /// ring steps of every dimension, one after another. Every device of every chip takes part (a
    /// data-parallel gradient all-reduce), which the compiler runs on every dimension at once even where
    /// a group of one device per chip runs as one ring (`groups::DeviceMap::cost`).
    pub fn all_reduce(&self, bytes: u64, link_bytes_per_s: u64) -> CollectiveTime {
        let axes: Vec<Ring> = self.axes().map(|(k, wrap)| Ring { k, wrap, stride: 1 }).collect();
        all_reduce_on(&axes, bytes, link_bytes_per_s)
    }

    /// Per dimension longer than one chip (its index), the time in ps the busiest link of each
    /// direction along it takes for `all_reduce` (a ring's two directions, or a line's, carry the same).
    pub fn all_reduce_per_axis(&self, bytes: u64, link_bytes_per_s: u64) -> Vec<(usize, u64)> {
        let rings: Vec<Ring> = self
            .indexed_axes()
            .map(|(_, k, wrap)| Ring { k, wrap, stride: 1 })
            .collect();
        let times = all_reduce_lanes_per_axis(&rings, bytes, link_bytes_per_s, &|r: &Ring| if r.wrap { 2 } else { 1 });
        self.indexed_axes().map(|(i, _, _)| i).zip(times).collect()
    }
}

/// One torus dimension a collective runs along: `k` chips spaced `stride` apart, a ring where the group
/// closes the slice's wraparound, else a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Ring {
    /// Chips of the group along this dimension.
    pub k: u64,
    /// Whether they form a ring (wraparound links close it).
    pub wrap: bool,
    /// Positions between neighbours of the group (1: adjacent chips). Groups interleaved with a stride
    /// share the links between their members, so each link carries `stride` groups' traffic.
    pub stride: u64,
}

fn ps(numerator: u128, denominator: u128) -> u64 {
    u64::try_from(numerator * 1_000_000_000_000 / denominator.max(1)).unwrap_or(u64::MAX)
}

/// A uniform all-to-all over the grid `axes` (each chip sends `bytes_per_chip` spread evenly over the
/// group, itself included): dimension-ordered routing, the busiest dimension's busiest link.
pub fn all_to_all_on(axes: &[Ring], bytes_per_chip: u64, link_bytes_per_s: u64) -> CollectiveTime {
    all_to_all_routed(axes, bytes_per_chip, link_bytes_per_s, false)
}

/// [`all_to_all_on`] with every message sent the same way round each ring when `one_way` (the XLA TPU
/// compiler's all-to-all emitter, as its scheduler prices it): a link of a k-ring then carries k(k-1)/2 of the
/// ordered pairs, on a line as on a ring.
pub fn all_to_all_routed(axes: &[Ring], bytes_per_chip: u64, link_bytes_per_s: u64, one_way: bool) -> CollectiveTime {
    let worst = axes
        .iter()
        .filter(|r| r.k > 1)
        .map(|r| {
            let pairs = if one_way {
                r.k * (r.k - 1)
            } else {
                max_link_half_pairs(r.k, r.wrap)
            };
            let half_pairs = pairs as u128 * r.stride as u128;
            // bytes/k x pairs / rate, in ps; pairs are counted in halves (ties split both ways).
            ps(
                bytes_per_chip as u128 * half_pairs,
                2 * r.k as u128 * link_bytes_per_s.max(1) as u128,
            )
        })
        .max()
        .unwrap_or(0);
    CollectiveTime {
        bandwidth_ps: worst,
        latency_hops: axes
            .iter()
            .filter(|r| r.k > 1)
            .map(|r| r.stride * if r.wrap { r.k / 2 } else { r.k - 1 })
            .sum(),
    }
}

/// An all-reduce of `bytes` on every chip of the grid `axes`: reduce-scatter then all-gather along each
/// dimension (a bidirectional ring where it wraps, a line, i.e. a folded ring at half that rate, where it
/// does not), the data split into one chunk per dimension, each chunk taking the dimensions in its own
/// rotated order so every dimension works at once; the slowest dimension sets the time. Hops: the ring
/// steps of every dimension, one after another.
pub fn all_reduce_on(axes: &[Ring], bytes: u64, link_bytes_per_s: u64) -> CollectiveTime {
    all_reduce_lanes(axes, bytes, link_bytes_per_s, &|r: &Ring| if r.wrap { 2 } else { 1 })
}

/// [`all_reduce_on`] with the rings' directions given per dimension (`lanes`: 2 for a bidirectional ring,
/// 1 for a unidirectional one or a line).
pub fn all_reduce_lanes(
    axes: &[Ring],
    bytes: u64,
    link_bytes_per_s: u64,
    lanes: &dyn Fn(&Ring) -> u128,
) -> CollectiveTime {
    let worst = all_reduce_lanes_per_axis(axes, bytes, link_bytes_per_s, lanes);
    CollectiveTime {
        bandwidth_ps: worst.into_iter().max().unwrap_or(0),
        latency_hops: axes.iter().filter(|r| r.k > 1).map(|r| 2 * (r.k - 1) * r.stride).sum(),
    }
}

/// [`all_reduce_lanes`]' time in ps on the busiest link of each dimension longer than one chip, in order
/// (the step's per-link groups load each dimension by its own time).
pub fn all_reduce_lanes_per_axis(
    axes: &[Ring],
    bytes: u64,
    link_bytes_per_s: u64,
    lanes: &dyn Fn(&Ring) -> u128,
) -> Vec<u64> {
    let axes: Vec<&Ring> = axes.iter().filter(|r| r.k > 1).collect();
    let n = axes.len() as u128;
    let prod_all: u128 = axes.iter().map(|x| x.k as u128).product();
    let mut out = Vec::with_capacity(axes.len());
    for (a, r) in axes.iter().enumerate() {
        // Volume reaching dimension a, summed over chunks, in units of bytes / (n x product).
        let mut vol_units = 0u128;
        for j in 0..axes.len() {
            let pos = (a + axes.len() - j) % axes.len();
            let before: u128 = (0..pos).map(|q| axes[(j + q) % axes.len()].k as u128).product();
            vol_units += prod_all / before;
        }
        out.push(ps(
            2 * bytes as u128 * vol_units * (r.k as u128 - 1) * r.stride as u128,
            n * prod_all * r.k as u128 * lanes(r) * link_bytes_per_s.max(1) as u128,
        ));
    }
    out
}

impl std::fmt::Display for SliceShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        write!(f, "{}", s.join("x"))?;
        if self.dims.iter().any(|&d| d > 1) {
            let wrapped = self
                .wraparound
                .iter()
                .zip(&self.dims)
                .filter(|(w, &d)| **w && d > 1)
                .count();
            let long = self.dims.iter().filter(|&&d| d > 1).count();
            write!(
                f,
                " ({})",
                match wrapped {
                    0 => "mesh".to_string(),
                    x if x == long => "torus".to_string(),
                    x => format!("wraparound on {x} of {long} dimensions"),
                }
            )?;
        }
        Ok(())
    }
}

/// The most ordered pairs (i, j) of a k-chip ring (`wrap`) or line routed over one directed link, in
/// halves: on a ring a pair exactly opposite splits its bytes over both directions.
fn max_link_half_pairs(k: u64, wrap: bool) -> u64 {
    let k = k as usize;
    // load[2*l] : link l -> l+1; load[2*l+1] : link l+1 -> l (indices mod k on a ring).
    let mut load = vec![0u64; 2 * k];
    for i in 0..k {
        for j in 0..k {
            if i == j {
                continue;
            }
            let forward = (j + k - i) % k;
            let mut walk = |dir_plus: bool, hops: usize, w: u64| {
                let mut at = i;
                for _ in 0..hops {
                    if dir_plus {
                        load[2 * at] += w;
                        at = (at + 1) % k;
                    } else {
                        let next = (at + k - 1) % k;
                        load[2 * next + 1] += w;
                        at = next;
                    }
                }
            };
            if !wrap {
                if j > i {
                    walk(true, j - i, 2);
                } else {
                    walk(false, i - j, 2);
                }
            } else if 2 * forward < k {
                walk(true, forward, 2);
            } else if 2 * forward > k {
                walk(false, k - forward, 2);
            } else {
                walk(true, forward, 1);
                walk(false, forward, 1);
            }
        }
    }
    load.into_iter().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chips::Chip;

    fn v4() -> ChipSpec {
        Chip::preset("v4").unwrap().spec
    }

    #[test]
    fn link_loads_by_hand() {
        // Ring of 4: from each chip 1 hop to two neighbours, the opposite chip split 1/2 + 1/2 over two
        // hops each way: per direction 4 x (1 + 1/2 x 2) = 8 link-pairs over 4 links = 2 pairs each.
        assert_eq!(max_link_half_pairs(4, true), 4);
        // Ring of 8: distances 1,2,3,4(split),3,2,1 sum 16 per source, 128 over 16 links = 8.
        assert_eq!(max_link_half_pairs(8, true), 16);
        // Line of 4: the middle link carries 2 x 2 = 4 pairs one way.
        assert_eq!(max_link_half_pairs(4, false), 8);
        // Two chips: one pair each way.
        assert_eq!(max_link_half_pairs(2, false), 2);
    }

    #[test]
    fn shapes_and_wraparound() {
        let s = SliceShape::for_chip(&v4(), 64, None).unwrap();
        assert_eq!((s.dims.clone(), s.wraparound.clone()), (vec![4, 4, 4], vec![true; 3]));
        assert_eq!(s.diameter(), 6);
        let m = SliceShape::for_chip(&v4(), 32, None).unwrap();
        assert_eq!(m.wraparound, vec![false; 3]);
        assert_eq!(m.diameter(), 1 + 3 + 3);
        assert_eq!(m.to_string(), "2x4x4 (mesh)");
        let t = SliceShape::for_chip(&v4(), 128, Some("4x4x8")).unwrap();
        assert_eq!(t.to_string(), "4x4x8 (torus)");
        assert!(matches!(
            SliceShape::for_chip(&v4(), 64, Some("4x4x8")),
            Err(TopologyError::Mismatch { product: 128, .. })
        ));
        let e = SliceShape::for_chip(&v4(), 64, Some("8x8")).unwrap_err().to_string();
        assert!(e.contains("3D torus") && e.contains("4x4x4"), "{e}");
        let v6e = Chip::preset("v6e").unwrap().spec;
        // A 3D shape on v6e's 2D torus names every shape 64 chips can take there, by hand:
        // 64 = 1 x 64 = 2 x 32 = 4 x 16 = 8 x 8.
        let e = SliceShape::for_chip(&v6e, 64, Some("4x4x4")).unwrap_err().to_string();
        assert!(
            e.contains(
                "v6e has a 2D torus, this has 3 dimensions; the shapes of 64 v6e chips are 1x64, 2x32, 4x16, 8x8"
            ),
            "{e}"
        );
        assert!(e.contains("the default 8x8"), "{e}");
        // 64 on a 3D torus: 1x1x64, 1x2x32, 1x4x16, 1x8x8, 2x2x16, 2x4x8, 4x4x4.
        assert_eq!(valid_shapes(3, 64).len(), 7);
        let p = SliceShape::for_chip(&v6e, 256, None).unwrap();
        assert_eq!(p.wraparound, vec![true, true]);
        assert_eq!(
            SliceShape::for_chip(&v6e, 64, None).unwrap().wraparound,
            vec![false, false]
        );
    }

    #[test]
    fn all_to_all_by_hand() {
        // 4x4x4 torus, 6.4 MB per chip, 45 GB/s links: bytes/4 x 2 pairs / 45e9 = 71.11 us per axis.
        let s = SliceShape::for_chip(&v4(), 64, None).unwrap();
        let t = s.all_to_all(6_400_000, 45_000_000_000);
        assert_eq!(t.bandwidth_ps, 71_111_111);
        assert_eq!(t.latency_hops, 6);
        // 4x4x8: the 8-ring's links carry bytes/8 x 8 pairs = all the bytes: 142.2 us.
        let s = SliceShape::for_chip(&v4(), 128, None).unwrap();
        assert_eq!(s.all_to_all(6_400_000, 45_000_000_000).bandwidth_ps, 142_222_222);
        // One chip: nothing crosses ICI.
        let one = SliceShape::for_chip(&v4(), 1, None).unwrap();
        assert_eq!(one.all_to_all(1 << 20, 1).bandwidth_ps, 0);
    }

    #[test]
    fn v4_all_reduce_over_one_device_per_chip_is_one_ring() {
        // v4 2x2x2, two devices per chip. Devices 0, 2, .., 14 take one device of each of the 8 chips: one
        // bidirectional ring through them moves 2 x V x 7/8 over 2 lanes of each link: 7/8 x 8 MB / 45 GB/s
        // = 155.555 us; 2 phases x 7 ring steps.
        let map = groups::DeviceMap {
            slice: SliceShape::for_chip(&v4(), 8, None).unwrap(),
            devices_per_chip: 2,
        };
        let one_per_chip: Vec<u32> = (0..8).map(|c| 2 * c).collect();
        let cost = |p: groups::Pattern, g: &[u32]| map.cost(&p, &[g.to_vec()], 45_000_000_000).unwrap();
        let ar = cost(groups::Pattern::AllReduce { bytes: 8_000_000 }, &one_per_chip);
        assert_eq!(ar.algorithm, groups::Algorithm::OneRing);
        assert_eq!((ar.time.bandwidth_ps, ar.time.latency_hops), (155_555_555, 14));
        // Every device of the 8 chips: rings along the three dimensions at once. Each is a 2-chip ring (two
        // links each way) whose axis sees V/3 (1 + 1/2 + 1/4) = 7/12 V moved 2 x 1/2 over 2 lanes: 7/24 V / B
        // = 51.851 us; 2 phases x 1 step on each of the 3 dimensions.
        let all: Vec<u32> = (0..16).collect();
        let nd = cost(groups::Pattern::AllReduce { bytes: 8_000_000 }, &all);
        assert_eq!(nd.algorithm, groups::Algorithm::ThreeD);
        assert_eq!((nd.time.bandwidth_ps, nd.time.latency_hops), (51_851_851, 6));
        // The run's whole-slice all-reduce is the latter.
        assert_eq!(map.slice.all_reduce(8_000_000, 45_000_000_000).latency_hops, 6);
        // An all-gather of 8 MB over the 8 chips is half the one ring: 77.777 us, 7 steps.
        let ag = cost(groups::Pattern::Gather { bytes: 8_000_000 }, &one_per_chip);
        assert_eq!((ag.time.bandwidth_ps, ag.time.latency_hops), (77_777_777, 7));
    }

    #[test]
    fn all_reduce_by_hand() {
        // Two chips on a line: reduce-scatter + all-gather move 2 x V x 1/2 over one 1-lane link:
        // 1 MB at 1 GB/s = 1 ms.
        let v5p = Chip::preset("v5p").unwrap().spec;
        let s = SliceShape::for_chip(&v5p, 2, None).unwrap();
        let t = s.all_reduce(1_000_000, 1_000_000_000);
        assert_eq!(t.bandwidth_ps, 1_000_000_000);
        assert_eq!(t.latency_hops, 2);
        // 4x4x4 torus: each axis sees V/3 (1 + 1/4 + 1/16) = 0.4375 V, moved 2 x 3/4 over 2 lanes:
        // 0.328125 V / link rate. 6.4 MB at 45 GB/s: 46.666 us.
        let s = SliceShape::for_chip(&v4(), 64, None).unwrap();
        let t = s.all_reduce(6_400_000, 45_000_000_000);
        assert_eq!(t.bandwidth_ps, 46_666_666);
        assert_eq!(t.latency_hops, 18);
    }
}
