//! `shard_map` regions. jax lowers `jax.jit(shard_map(f, mesh, in_specs, out_specs))` to a manual region: its
//! operands pass a to-local boundary (`xla.sdy.GlobalToLocalShape` with `xla.sdy.in_shardings`, or GSPMD's
//! `Sharding` + `SPMDFullToShardShape`), the body (a `call`) is already per device with its collectives
//! written out, and its results pass a to-global boundary (`xla.sdy.LocalToGlobalShape` with
//! `xla.sdy.out_shardings`, or `SPMDShardToFullShape` with `sharding=`). So the partitioner reshards operands
//! to the in-specs, keeps the body as it is, and gives the results the out-specs' layouts.

use super::axes::Dist;
use crate::hlo::ir::{Computation, Instruction, Operands};

/// Which side of a manual region a custom-call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// Global arrays in, per-device blocks out.
    ToLocal,
    /// Per-device blocks in, global arrays out.
    ToGlobal,
}

/// The boundary `ins` is, if it is one.
pub fn boundary(ins: &Instruction) -> Option<Boundary> {
    if ins.opcode != "custom-call" {
        return None;
    }
    match ins.attr("custom_call_target").map(|t| t.trim_matches('"')) {
        Some("xla.sdy.GlobalToLocalShape" | "SPMDFullToShardShape") => Some(Boundary::ToLocal),
        Some("xla.sdy.LocalToGlobalShape" | "SPMDShardToFullShape") => Some(Boundary::ToGlobal),
        _ => None,
    }
}

/// The mesh's named axes and the sub-axes ([`super::axes::Base`]) each one spans, major first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeshAxes {
    /// (name, size, its sub-axes).
    axes: Vec<(String, u64, Vec<usize>)>,
    /// Size of every sub-axis.
    sizes: Vec<u64>,
}

impl MeshAxes {
    /// The axes of `mesh` (outermost first), with sub-axes numbered as `Base::new` numbers them.
    pub fn new(mesh: &[(String, u64)], sub_sizes: &[u64]) -> MeshAxes {
        let mut next = 0;
        let mut axes = Vec::new();
        for (name, size) in mesh {
            let (mut p, mut subs) = (1u64, Vec::new());
            while p < *size && next < sub_sizes.len() {
                p *= sub_sizes[next];
                subs.push(next);
                next += 1;
            }
            axes.push((name.clone(), *size, subs));
        }
        MeshAxes {
            axes,
            sizes: sub_sizes.to_vec(),
        }
    }

    /// Names of the axes, outermost first.
    pub fn names_list(&self) -> Vec<String> {
        self.axes.iter().map(|a| a.0.clone()).collect()
    }

    /// Names of the axes, for messages.
    fn names(&self) -> String {
        self.axes
            .iter()
            .map(|a| format!("\"{}\"", a.0))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The sub-axes of `"name"` or of its part `"name":(pre)size` (the `size` ways after the first `pre`).
    pub fn sub_axes(&self, item: &str) -> Result<Vec<usize>, String> {
        let (name, part) = match item.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (item, None),
        };
        let name = name.trim().trim_matches('"');
        let (_, size, subs) = self
            .axes
            .iter()
            .find(|a| a.0 == name)
            .ok_or_else(|| format!("axis \"{name}\" is not in the mesh; valid: {}", self.names()))?;
        let Some(part) = part else { return Ok(subs.clone()) };
        let bad = || format!("axis part `{item}`; valid: \"{name}\":(pre)size with pre*size dividing {size}");
        let (pre, n) = part
            .trim()
            .strip_prefix('(')
            .and_then(|p| p.split_once(')'))
            .and_then(|(a, b)| Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?)))
            .ok_or_else(bad)?;
        let (mut p, mut out) = (1u64, Vec::new());
        for &a in subs {
            if p >= pre && p < pre * n {
                out.push(a);
            }
            p *= self.sizes[a];
        }
        let got: u64 = out.iter().map(|&a| self.sizes[a]).product();
        if got != n || pre == 0 || size % (pre * n) != 0 {
            return Err(bad());
        }
        Ok(out)
    }
}

/// The text of frontend attribute `key` of `ins` (`key="..."`, escapes removed).
pub fn frontend_attr(ins: &Instruction, key: &str) -> Option<String> {
    let fa = ins.attr("frontend_attributes")?;
    let start = fa.find(&format!("{key}=\""))? + key.len() + 2;
    let (mut out, mut esc) = (String::new(), false);
    for c in fa[start..].chars() {
        match (esc, c) {
            (true, _) => {
                out.push(c);
                esc = false;
            }
            (false, '\\') => esc = true,
            (false, '"') => return Some(out),
            _ => out.push(c),
        }
    }
    None
}

/// The axis names of `#sdy<manual_axes{"a", "b"}>`.
pub fn manual_axes(text: &str) -> Vec<String> {
    let inner = text
        .split_once('{')
        .and_then(|(_, r)| r.split_once('}'))
        .map_or("", |(i, _)| i);
    inner
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Per value, per dim, the axis items of `#sdy.sharding_per_value<[<@mesh, [{"d"}, {}]>, ...]>` (open dims
/// `?` dropped; `replicated=` and other trailers ignored).
pub fn sharding_per_value(text: &str) -> Result<Vec<Vec<Vec<String>>>, String> {
    let mut values = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("<@") {
        rest = &rest[i + 2..];
        let open = rest
            .find('[')
            .ok_or_else(|| format!("`{text}`: a value without its `[dims]`"))?;
        rest = &rest[open + 1..];
        let mut dims = Vec::new();
        loop {
            rest = rest.trim_start().trim_start_matches(',').trim_start();
            if let Some(r) = rest.strip_prefix(']') {
                rest = r;
                break;
            }
            let body = rest
                .strip_prefix('{')
                .and_then(|r| r.split_once('}'))
                .ok_or_else(|| format!("`{text}`: expected a dim `{{...}}`"))?;
            dims.push(
                body.0
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && *s != "?")
                    .map(str::to_string)
                    .collect(),
            );
            rest = body.1;
        }
        values.push(dims);
    }
    Ok(values)
}

/// The distribution of one value's dims, keeping only axes in `manual` (the others stay whole in the body).
pub fn dist_of(dims: &[Vec<String>], mesh: &MeshAxes, manual: &[String]) -> Result<Dist, String> {
    let mut d = Dist::replicated(dims.len());
    for (j, items) in dims.iter().enumerate() {
        for it in items {
            let subs = mesh.sub_axes(it)?;
            let name = it.split(':').next().unwrap_or("").trim().trim_matches('"');
            if manual.iter().any(|m| m == name) {
                d.dims[j].extend(subs);
            }
        }
    }
    Ok(d)
}

/// `comp` without its identity custom-calls (`Sharding`, `xla.sdy.*`): inside a manual body they only
/// restate shardings, and each use reads the operand instead.
pub fn strip_identities(comp: &Computation) -> Computation {
    let mut map = Vec::with_capacity(comp.instructions.len());
    let mut out: Vec<Instruction> = Vec::new();
    for ins in &comp.instructions {
        let target = ins.attr("custom_call_target").map(|t| t.trim_matches('"'));
        let ops = ins.operand_ids();
        if super::layout::is_identity(&ins.opcode, target) && ops.len() == 1 {
            map.push(map[ops[0]]);
            continue;
        }
        let mut copy = ins.clone();
        if let Operands::Refs(r) = &mut copy.operands {
            for o in r.iter_mut() {
                *o = map[*o];
            }
        }
        map.push(out.len());
        out.push(copy);
    }
    let mut c = comp.clone();
    c.root = map[comp.root];
    c.instructions = out;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdy_specs_by_hand() {
        let v =
            sharding_per_value(r#"#sdy.sharding_per_value<[<@mesh, [{"d"}, {}]>, <@mesh, [{"a", ?}, {?}]>]>"#).unwrap();
        assert_eq!(
            v,
            vec![
                vec![vec!["\"d\"".to_string()], vec![]],
                vec![vec!["\"a\"".into()], vec![]]
            ]
        );
        // Mesh a=2, b=4: sub-axes 0 (a), 1 and 2 (b's two factors of 2).
        let m = MeshAxes::new(&[("a".into(), 2), ("b".into(), 4)], &[2, 2, 2]);
        assert_eq!(m.sub_axes("\"b\"").unwrap(), vec![1, 2]);
        assert_eq!(m.sub_axes("\"b\":(2)2").unwrap(), vec![2]);
        assert_eq!(m.sub_axes("\"b\":(1)2").unwrap(), vec![1]);
        assert!(m.sub_axes("\"c\"").unwrap_err().contains("\"a\", \"b\""));
        assert!(m.sub_axes("\"b\":(3)2").is_err());
        let dims = vec![vec!["\"a\"".to_string(), "\"b\"".to_string()], vec![]];
        assert_eq!(
            dist_of(&dims, &m, &["b".into()]).unwrap().dims,
            vec![vec![1, 2], vec![]]
        );
        assert_eq!(manual_axes(r#"#sdy<manual_axes{"a", "b"}>"#), vec!["a", "b"]);
    }
}
