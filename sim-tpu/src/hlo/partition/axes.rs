//! Devices as a row-major mesh of prime-sized sub-axes, and an array's distribution over them.
//!
//! A `jax.sharding.Mesh` over devices in id order lays ids row-major over its axes; splitting every axis into
//! its prime factors (major first) gives sub-axes fine enough to express each tile dim of a mesh sharding as a
//! list of sub-axes, so a collective's groups are "the devices that differ only along these sub-axes".

use std::collections::BTreeMap;

use super::super::sharding::Tiled;

/// The sub-axes: sizes and device-id strides, major first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    /// Size of each sub-axis (a prime).
    pub sizes: Vec<u64>,
    /// Device-id stride of each sub-axis.
    pub strides: Vec<u64>,
}

fn primes(mut n: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n.is_multiple_of(p) {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

impl Base {
    /// Sub-axes of a mesh with these axis sizes (outermost first).
    pub fn new(mesh_sizes: &[u64]) -> Base {
        let sizes: Vec<u64> = mesh_sizes.iter().flat_map(|&s| primes(s)).collect();
        let mut strides = vec![1u64; sizes.len()];
        for a in (0..sizes.len().saturating_sub(1)).rev() {
            strides[a] = strides[a + 1] * sizes[a + 1];
        }
        Base { sizes, strides }
    }

    /// Devices.
    pub fn devices(&self) -> u64 {
        self.sizes.iter().product()
    }

    /// Device `d`'s coordinate along sub-axis `a`.
    pub fn coord(&self, d: u64, a: usize) -> u64 {
        d / self.strides[a] % self.sizes[a]
    }

    /// Product of the sizes of `axes`.
    pub fn size(&self, axes: &[usize]) -> u64 {
        axes.iter().map(|&a| self.sizes[a]).product()
    }

    /// The groups of devices that differ only along `axes`, each ordered by its coordinate over `axes` (the
    /// first axis major); groups in the order of their first device.
    pub fn groups(&self, axes: &[usize]) -> Vec<Vec<u32>> {
        let mut by_key: BTreeMap<Vec<u64>, Vec<(u64, u32)>> = BTreeMap::new();
        for d in 0..self.devices() {
            let key: Vec<u64> = (0..self.sizes.len())
                .filter(|a| !axes.contains(a))
                .map(|a| self.coord(d, a))
                .collect();
            let pos = axes.iter().fold(0u64, |p, &a| p * self.sizes[a] + self.coord(d, a));
            by_key.entry(key).or_default().push((pos, d as u32));
        }
        let mut groups: Vec<Vec<u32>> = by_key
            .into_values()
            .map(|mut g| {
                g.sort_unstable();
                g.into_iter().map(|(_, d)| d).collect()
            })
            .collect();
        groups.sort_by_key(|g| g.iter().min().copied());
        groups
    }
}

/// How an array lies on the devices: the sub-axes splitting each dim (major first), and the sub-axes over
/// which devices hold partial sums still to be reduced. Sub-axes named nowhere replicate it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Dist {
    /// Sub-axes per array dim.
    pub dims: Vec<Vec<usize>>,
    /// Sub-axes of pending partial sums.
    pub partial: Vec<usize>,
}

impl Dist {
    /// Whole on every device.
    pub fn replicated(rank: usize) -> Dist {
        Dist {
            dims: vec![Vec::new(); rank],
            partial: Vec::new(),
        }
    }

    /// Whether no dim is split and nothing is partial.
    pub fn is_replicated(&self) -> bool {
        self.partial.is_empty() && self.dims.iter().all(Vec::is_empty)
    }

    /// Sub-axes used by any dim or the partial sums.
    pub fn used(&self) -> Vec<usize> {
        self.dims.iter().flatten().chain(&self.partial).copied().collect()
    }

    /// The per-device dims of an array with `global` dims (uneven splits padded up, as XLA pads them).
    pub fn local(&self, base: &Base, global: &[i64]) -> Vec<i64> {
        global
            .iter()
            .enumerate()
            .map(|(j, &n)| {
                let s = self.dims.get(j).map_or(1, |a| base.size(a)) as i64;
                (n + s - 1) / s.max(1)
            })
            .collect()
    }
}

/// The distribution a tiled sharding states, for an array of rank `rank`; `Err` says why it is not one.
pub fn from_tiled(t: &Tiled, rank: usize, base: &Base) -> Result<Dist, String> {
    let splits = t.array_splits();
    if splits.len() != rank {
        return Err(format!(
            "splits {} dims ({:?}) but the array has rank {rank}; valid: one tile dim per array dim, then any \
             replication dims",
            splits.len(),
            splits
        ));
    }
    let n: u64 = t.tile_dims.iter().product();
    if n != base.devices() {
        return Err(format!(
            "holds {n} devices but the slice (or mesh) has {}; valid: tile dims whose product is {}",
            base.devices(),
            base.devices()
        ));
    }
    let mut tstride = vec![1u64; t.tile_dims.len()];
    for j in (0..t.tile_dims.len().saturating_sub(1)).rev() {
        tstride[j] = tstride[j + 1] * t.tile_dims[j + 1];
    }
    let origin = t.devices[0] as i64;
    let mut taken = vec![false; base.sizes.len()];
    let mut per_dim: Vec<Vec<usize>> = Vec::new();
    let not_mesh = || "its device order is not a mesh layout of the device ids".to_string();
    for (j, &tj) in t.tile_dims.iter().enumerate() {
        let (mut step, mut left, mut minor_first) = (1u64, tj, Vec::new());
        while left > 1 {
            let dev = t.devices[(step * tstride[j]) as usize] as i64;
            let a = (0..base.sizes.len())
                .find(|&a| !taken[a] && dev - origin == base.strides[a] as i64 && left % base.sizes[a] == 0)
                .ok_or_else(not_mesh)?;
            taken[a] = true;
            minor_first.push(a);
            step *= base.sizes[a];
            left /= base.sizes[a];
        }
        minor_first.reverse();
        per_dim.push(minor_first);
    }
    // Every entry must be what the sub-axes say.
    for (idx, &d) in t.devices.iter().enumerate() {
        let mut dev = origin as u64;
        for (j, axes) in per_dim.iter().enumerate() {
            let mut c = idx as u64 / tstride[j] % t.tile_dims[j];
            for &a in axes.iter().rev() {
                dev += (c % base.sizes[a]) * base.strides[a];
                c /= base.sizes[a];
            }
        }
        if dev != d as u64 {
            return Err(not_mesh());
        }
    }
    per_dim.truncate(rank);
    Ok(Dist {
        dims: per_dim,
        partial: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::sharding::{parse, Sharding};

    fn tiled(text: &str) -> Tiled {
        match parse(text).unwrap() {
            Sharding::Tiled(t) => t,
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn mesh_shardings_become_sub_axes() {
        // Mesh data=2, model=2: sub-axis 0 is data (stride 2), 1 is model (stride 1).
        let b = Base::new(&[2, 2]);
        assert_eq!(b.strides, vec![2, 1]);
        let d = from_tiled(&tiled("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"), 2, &b).unwrap();
        assert_eq!(d.dims, vec![vec![0], vec![]]);
        let d = from_tiled(&tiled("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"), 2, &b).unwrap();
        assert_eq!(d.dims, vec![vec![], vec![1]]);
        let d = from_tiled(&tiled("{devices=[4,1]<=[4]}"), 2, &b).unwrap();
        assert_eq!(d.dims, vec![vec![0, 1], vec![]]);
        // Groups along model: {0,1},{2,3}; along data: {0,2},{1,3}.
        assert_eq!(b.groups(&[1]), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(b.groups(&[0]), vec![vec![0, 2], vec![1, 3]]);
        assert!(from_tiled(&tiled("{devices=[2,2]<=[4]}"), 3, &b).is_err());
        assert!(from_tiled(&tiled("{devices=[2,1]<=[2]}"), 2, &b).is_err());
        assert!(from_tiled(&tiled("{devices=[4]1,0,2,3}"), 1, &b).is_err());
        assert_eq!(Dist::replicated(2).local(&b, &[5, 3]), vec![5, 3]);
        assert_eq!(d.local(&b, &[10, 3]), vec![3, 3]);
    }
}
