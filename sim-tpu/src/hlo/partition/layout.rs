//! A value's layout (an array's distribution, or a tuple's elements'), read from a `sharding={...}`
//! annotation, and the layouts its users want ([`wanted`], propagated backwards from annotations).

use sim_core::layout::Shape;

use super::axes::{from_tiled, Base, Dist};
use super::rules::ELEMENTWISE;
use crate::hlo::ir::Computation;
use crate::hlo::sharding::Sharding;

/// How a value lies on the devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// An array.
    Array(Dist),
    /// A tuple's elements.
    Tuple(Vec<Layout>),
    /// Inside a `shard_map` region: already per device, its shape as written.
    Manual,
    /// A token or other value with no extent.
    Other,
}

impl Layout {
    /// Everything whole on every device.
    pub fn replicated(shape: &Shape) -> Layout {
        match shape {
            Shape::Array(a) => Layout::Array(Dist::replicated(a.dims.len())),
            Shape::Tuple(t) => Layout::Tuple(t.iter().map(Layout::replicated).collect()),
            _ => Layout::Other,
        }
    }

    /// The array distribution, if an array.
    pub fn dist(&self) -> Option<&Dist> {
        match self {
            Layout::Array(d) => Some(d),
            _ => None,
        }
    }
}

/// The layout `sharding` states for a value of `shape`; `Err` says what is inconsistent. A maximal sharding
/// (one device holds it) is read as replicated and reported in `notes`.
pub fn of_sharding(s: &Sharding, shape: &Shape, base: &Base, notes: &mut Vec<String>) -> Result<Layout, String> {
    match (s, shape) {
        (Sharding::Replicated, _) => Ok(Layout::replicated(shape)),
        (Sharding::Maximal(d), _) => {
            notes.push(format!("maximal device={d} is read as replicated"));
            Ok(Layout::replicated(shape))
        }
        (Sharding::Manual, _) => Ok(Layout::Manual),
        (Sharding::Tiled(t), _) if t.manual => Ok(Layout::Manual),
        (Sharding::Tiled(t), Shape::Array(a)) => from_tiled(t, a.dims.len(), base).map(Layout::Array),
        (Sharding::Tiled(_), _) => Err("a tiled sharding on a tuple; valid: a tuple sharding {{...}, ...}".into()),
        (Sharding::Tuple(ss), Shape::Tuple(ts)) if ss.len() == ts.len() => ss
            .iter()
            .zip(ts)
            .map(|(s, t)| of_sharding(s, t, base, notes))
            .collect::<Result<_, _>>()
            .map(Layout::Tuple),
        (Sharding::Tuple(ss), Shape::Tuple(ts)) => Err(format!(
            "a tuple sharding of {} elements on a tuple of {}; valid: one sharding per element",
            ss.len(),
            ts.len()
        )),
        (Sharding::Tuple(ss), _) if ss.len() == 1 => of_sharding(&ss[0], shape, base, notes),
        (Sharding::Tuple(_), _) => Err("a tuple sharding on an array; valid: one sharding".into()),
    }
}

/// Whether `opcode` (with `target` for custom-calls) passes its operand through unchanged (a `shard_map`
/// region's boundaries change shapes, so they are not).
pub fn is_identity(opcode: &str, target: Option<&str>) -> bool {
    opcode == "custom-call"
        && target.is_some_and(|t| {
            t == "Sharding"
                || (t.starts_with("xla.sdy.") && !t.ends_with("ToLocalShape") && !t.ends_with("ToGlobalShape"))
        })
}

/// For each instruction, the layout its users want: its own annotation, else what an elementwise, identity,
/// transpose or tuple user wants of it (the first such user). Used to pick reduce-scatter over all-reduce.
pub fn wanted(comp: &Computation, anns: &[Option<Layout>]) -> Vec<Option<Layout>> {
    let n = comp.instructions.len();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ins) in comp.instructions.iter().enumerate() {
        for &o in ins.operand_ids() {
            if o < n {
                users[o].push(i);
            }
        }
    }
    let mut want: Vec<Option<Layout>> = anns.to_vec();
    for i in (0..n).rev() {
        if want[i].is_some() {
            continue;
        }
        let rank = match &comp.instructions[i].shape {
            Shape::Array(a) => a.dims.len(),
            _ => continue,
        };
        for &u in &users[i] {
            let ui = &comp.instructions[u];
            let got = match (&want[u], ui.opcode.as_str()) {
                (Some(Layout::Array(d)), op)
                    if (ELEMENTWISE.contains(&op)
                        || is_identity(op, ui.attr("custom_call_target").map(|t| t.trim_matches('"'))))
                        && d.dims.len() == rank =>
                {
                    Some(Layout::Array(d.clone()))
                }
                (Some(Layout::Array(d)), "transpose") => ui.int_list("dimensions").map(|perm| {
                    let mut dims = vec![Vec::new(); rank];
                    for (k, &p) in perm.iter().enumerate() {
                        if let (Some(slot), Some(ax)) = (dims.get_mut(p as usize), d.dims.get(k)) {
                            *slot = ax.clone();
                        }
                    }
                    Layout::Array(Dist {
                        dims,
                        partial: Vec::new(),
                    })
                }),
                (Some(Layout::Tuple(ls)), "tuple") => ui
                    .operand_ids()
                    .iter()
                    .position(|&o| o == i)
                    .and_then(|k| ls.get(k).cloned()),
                _ => None,
            };
            if got.is_some() {
                want[i] = got;
                break;
            }
        }
    }
    want
}
