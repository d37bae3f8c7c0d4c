//! A named device mesh (`--mesh data=8,model=64`): device ids laid row-major over the axes, the last axis
//! fastest, as `jax.sharding.Mesh` lays devices given in id order.

use std::fmt;

/// Named mesh axes and their sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mesh {
    /// (name, size), outermost first.
    pub axes: Vec<(String, u64)>,
}

impl Mesh {
    /// Reads `name=size,...`.
    pub fn parse(text: &str) -> Result<Mesh, String> {
        let valid = "valid: NAME=SIZE,... with distinct names and positive sizes, e.g. data=8,model=64";
        let mut axes: Vec<(String, u64)> = Vec::new();
        for part in text.split(',') {
            let (name, size) = part
                .split_once('=')
                .ok_or_else(|| format!("--mesh {text}: `{part}` has no `=` ({valid})"))?;
            let name = name.trim();
            let size = size
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|&s| s > 0)
                .ok_or_else(|| format!("--mesh {text}: size `{}` of `{name}` ({valid})", size.trim()))?;
            if name.is_empty() || axes.iter().any(|(n, _)| n == name) {
                return Err(format!("--mesh {text}: axis name `{name}` ({valid})"));
            }
            axes.push((name.to_string(), size));
        }
        Ok(Mesh { axes })
    }

    /// Devices the mesh names.
    pub fn devices(&self) -> u64 {
        self.axes.iter().fold(1u64, |p, (_, s)| p.saturating_mul(*s))
    }

    /// A device's coordinate along each axis.
    fn coords(&self, device: u32) -> Vec<u64> {
        let mut d = device as u64;
        let mut out = vec![0; self.axes.len()];
        for (i, (_, s)) in self.axes.iter().enumerate().rev() {
            out[i] = d % s;
            d /= s;
        }
        out
    }

    /// The axes along which members of `group` differ.
    pub fn axes_spanned(&self, group: &[u32]) -> Vec<String> {
        let coords: Vec<Vec<u64>> = group.iter().map(|&d| self.coords(d)).collect();
        self.axes
            .iter()
            .enumerate()
            .filter(|(i, _)| coords.iter().any(|c| c[*i] != coords[0][*i]))
            .map(|(_, (n, _))| n.clone())
            .collect()
    }
}

impl fmt::Display for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.axes.iter().map(|(n, s)| format!("{n}={s}")).collect();
        write!(f, "{}", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_axes_by_hand() {
        let m = Mesh::parse("data=2,model=4").unwrap();
        assert_eq!(m.devices(), 8);
        // Device 5 = data 1, model 1; {4,5,6,7} differ only in model; {1,5} only in data.
        assert_eq!(m.axes_spanned(&[4, 5, 6, 7]), vec!["model"]);
        assert_eq!(m.axes_spanned(&[1, 5]), vec!["data"]);
        assert!(Mesh::parse("data=0").is_err() && Mesh::parse("a=2,a=2").is_err() && Mesh::parse("x").is_err());
    }
}
