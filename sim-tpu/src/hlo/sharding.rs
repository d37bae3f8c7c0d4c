//! `sharding={...}` annotations as `jax.jit(f, in_shardings=..., out_shardings=...).lower(...)` prints them:
//! `{replicated}`, `{maximal device=N}`, `{manual}`, `{devices=[4,1]<=[4]}` (iota device order, optionally
//! transposed), `{devices=[2,2]0,2,1,3}` (explicit order), `last_tile_dim_replicate`, `last_tile_dims={...}`,
//! and tuples of these.

use super::collective::{iota_transposed, MAX_DEVICES};
use super::ir::Instruction;

/// One array's sharding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sharding {
    /// Every device holds the whole array.
    Replicated,
    /// Inside `shard_map`: the program already is per device.
    Manual,
    /// One device holds it.
    Maximal(u32),
    /// Tiled over devices.
    Tiled(Tiled),
    /// A tuple's element shardings.
    Tuple(Vec<Sharding>),
}

/// A tiled sharding: the array's dims split into `tile_dims` (plus trailing replication or subgroup dims).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiled {
    /// Tiles along each dim of the tile assignment (array dims first, then any subgroup dims).
    pub tile_dims: Vec<u64>,
    /// Devices in tile-assignment order.
    pub devices: Vec<u32>,
    /// Subgroup dims after the array's: 1 with `last_tile_dim_replicate`, else those of `last_tile_dims`.
    pub subgroup_dims: usize,
    /// Whether a subgroup dim is `manual` (inside a `shard_map` over some of the mesh axes).
    pub manual: bool,
}

impl Tiled {
    /// Ways each array dim is split (the tile dims less the trailing subgroup dims).
    pub fn array_splits(&self) -> &[u64] {
        &self.tile_dims[..self.tile_dims.len() - self.subgroup_dims]
    }

    /// Devices holding one copy of each tile (the product of the subgroup dims).
    pub fn replication(&self) -> u64 {
        self.tile_dims[self.tile_dims.len() - self.subgroup_dims..]
            .iter()
            .product()
    }
}

const VALID: &str = "valid: {replicated}, {manual}, {maximal device=N}, {devices=[d1,...]<=[n...]} (optionally \
                     T(perm)), {devices=[d1,...]id,id,...}, with optional last_tile_dim_replicate or \
                     last_tile_dims={replicated|manual,...}, or a tuple {{...}, {...}}";

impl Sharding {
    /// The sharding an instruction carries, if any.
    pub fn of(ins: &Instruction) -> Result<Option<Sharding>, String> {
        match ins.attr("sharding") {
            Some(t) => parse(t).map(Some).map_err(|e| format!("sharding={t}: {e} ({VALID})")),
            None => Ok(None),
        }
    }
}

/// Checks an instruction's sharding (the parser calls it on every instruction).
pub fn validate(ins: &Instruction) -> Result<(), String> {
    Sharding::of(ins).map(|_| ())
}

/// Reads one sharding's text.
pub fn parse(text: &str) -> Result<Sharding, String> {
    let t = text.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or("expected a braced sharding")?
        .trim();
    if inner.starts_with('{') {
        return split_top(inner)?
            .into_iter()
            .map(parse)
            .collect::<Result<_, _>>()
            .map(Sharding::Tuple);
    }
    if inner.is_empty() {
        return Ok(Sharding::Tuple(Vec::new()));
    }
    let mut words = inner.split_whitespace();
    let first = words.next().unwrap_or("");
    match first {
        "replicated" => Ok(Sharding::Replicated),
        "manual" => Ok(Sharding::Manual),
        "maximal" => {
            let d = words
                .next()
                .and_then(|w| w.strip_prefix("device="))
                .and_then(|x| x.parse::<u32>().ok())
                .ok_or("maximal needs device=N")?;
            Ok(Sharding::Maximal(d))
        }
        _ if first.starts_with("devices=[") => parse_tiled(inner).map(Sharding::Tiled),
        _ => Err(format!("`{first}` is not a sharding")),
    }
}

/// Splits `{a}, {b}` at its top-level commas.
fn split_top(t: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in t.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(t[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err("unbalanced braces".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced braces".into());
    }
    out.push(t[start..].trim());
    Ok(out)
}

fn nums(t: &str) -> Result<Vec<u64>, String> {
    t.split(',')
        .map(|x| {
            x.trim()
                .parse::<u64>()
                .map_err(|_| format!("`{}` is not a non-negative integer", x.trim()))
        })
        .collect()
}

fn parse_tiled(inner: &str) -> Result<Tiled, String> {
    let rest = &inner["devices=[".len()..];
    let close = rest.find(']').ok_or("devices=[ without its `]`")?;
    let tile_dims = nums(&rest[..close])?;
    let n = tile_dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d).filter(|&p| p <= MAX_DEVICES && d > 0))
        .ok_or_else(|| format!("tile dims {tile_dims:?}: each positive, at most {MAX_DEVICES} devices"))?;
    let rest = rest[close + 1..].trim_start();
    // The device list ends where the options start.
    let (list, opts) = match rest.find("last_tile") {
        Some(i) => (rest[..i].trim(), rest[i..].trim()),
        None => (rest.trim(), ""),
    };
    let devices: Vec<u32> = if let Some(iota) = list.strip_prefix("<=") {
        let iota = iota.trim();
        let close = iota.find(']').ok_or("<=[ without its `]`")?;
        let dims = nums(
            iota.strip_prefix('[')
                .ok_or("expected <=[n,...]")?
                .get(..close - 1)
                .unwrap_or(""),
        )?;
        let perm_text = iota[close + 1..].trim();
        let perm = if perm_text.is_empty() {
            (0..dims.len() as u64).collect()
        } else {
            nums(
                perm_text
                    .strip_prefix("T(")
                    .and_then(|p| p.strip_suffix(')'))
                    .ok_or("expected T(permutation)")?,
            )?
        };
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if sorted != (0..dims.len() as u64).collect::<Vec<_>>() {
            return Err(format!("T{perm:?} is not a permutation of {} dims", dims.len()));
        }
        if dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) != Some(n) {
            return Err(format!("<={dims:?} does not hold the {n} devices of the tile dims"));
        }
        iota_transposed(&dims, &perm)
    } else {
        let ids = nums(list)?;
        if ids.len() as u64 != n || ids.iter().any(|&d| d >= MAX_DEVICES) {
            return Err(format!("{} device ids for tile dims holding {n}", ids.len()));
        }
        ids.into_iter().map(|d| d as u32).collect()
    };
    let mut s = devices.clone();
    s.sort_unstable();
    if let Some(w) = s.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("device {} named twice", w[0]));
    }
    let mut manual = false;
    let subgroup_dims = if opts.is_empty() {
        0
    } else if opts == "last_tile_dim_replicate" {
        1
    } else if let Some(l) = opts.strip_prefix("last_tile_dims={").and_then(|x| x.strip_suffix('}')) {
        let kinds: Vec<&str> = l.split(',').map(str::trim).collect();
        if kinds.iter().any(|k| !matches!(*k, "replicated" | "manual")) {
            return Err(format!("last_tile_dims={{{l}}}: each must be replicated or manual"));
        }
        manual = kinds.contains(&"manual");
        kinds.len()
    } else {
        return Err(format!("`{opts}` after the devices"));
    };
    if subgroup_dims > tile_dims.len() {
        return Err("more subgroup dims than tile dims".into());
    }
    Ok(Tiled {
        tile_dims,
        devices,
        subgroup_dims,
        manual,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shardings_by_hand() {
        assert_eq!(parse("{replicated}").unwrap(), Sharding::Replicated);
        let Sharding::Tiled(t) = parse("{devices=[4,1]<=[4]}").unwrap() else {
            panic!()
        };
        assert_eq!((t.array_splits(), t.replication()), (&[4u64, 1][..], 1));
        assert_eq!(t.devices, vec![0, 1, 2, 3]);
        let Sharding::Tiled(t) = parse("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}").unwrap() else {
            panic!()
        };
        assert_eq!((t.array_splits(), t.replication()), (&[2u64, 1][..], 2));
        assert_eq!(t.devices, vec![0, 2, 1, 3]);
        let Sharding::Tiled(t) = parse("{devices=[2,2]0,2,1,3}").unwrap() else {
            panic!()
        };
        assert_eq!(t.devices, vec![0, 2, 1, 3]);
        assert_eq!(
            parse("{{replicated}, {maximal device=1}}").unwrap(),
            Sharding::Tuple(vec![Sharding::Replicated, Sharding::Maximal(1)])
        );
    }

    #[test]
    fn malformed_shardings_fail() {
        for bad in [
            "{devices=[2,2]<=[3]}",
            "{devices=[2,2]0,1,2}",
            "{devices=[2]0,0}",
            "{tiled}",
            "{devices=[2,1]<=[2] last_tile_dims={bogus}}",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
