//! The per-device computation being written: instructions with per-device shapes, and the collectives (or
//! local slices) that move an array from one distribution to another ([`Builder::reshard`]).

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::Serialize;
use sim_core::layout::{Dim, Shape};

use super::axes::{Base, Dist};
use crate::hlo::collective::CollectiveKind;
use crate::hlo::ir::{Attr, Instruction, Operands};

/// Why the partitioner inserted a collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A dot or reduce over a split dim leaves partial sums: all-reduce, or reduce-scatter when the result is
    /// wanted split.
    PartialSums,
    /// An operand split where its use needs it whole along that dim (FSDP weights, a conflicting split).
    GatherForUse,
    /// A split moved from one dim to another (all-to-all).
    MoveSplit,
    /// The same splits on other devices (collective-permute).
    PermuteDevices,
    /// An instruction outside the patterns: its operands gathered whole, computed on every device.
    Conservative,
    /// An operand of a `shard_map` region moved to the region's in-specs, or a result to its out-specs.
    ManualBoundary,
    /// One block of a windowed einsum passed round the ring ([`super::windowed`]).
    WindowedEinsum,
}

/// One collective the partitioner inserted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Inserted {
    /// Its instruction name in the per-device module.
    pub name: String,
    /// Kind.
    pub kind: CollectiveKind,
    /// The instruction of the annotated module it serves.
    pub for_instruction: String,
    /// Why.
    pub rule: Rule,
    /// Bytes per device as the slice prices them: the operand, or the gathered result of an all-gather.
    pub bytes: u64,
    /// Devices per group.
    pub group_size: u64,
}

/// An array value of the per-device computation: where it is, its distribution and its global shape.
#[derive(Clone, Debug)]
pub struct Val {
    /// Index in the per-device computation.
    pub idx: usize,
    /// Distribution.
    pub dist: Dist,
    /// Global (unpartitioned) shape.
    pub shape: Shape,
}

/// Global dims of an array shape (bounded dims at their bound; non-arrays none).
pub fn global_dims(shape: &Shape) -> Vec<i64> {
    match shape {
        Shape::Array(a) => a.dims.iter().map(|d| d.upper_bound().unwrap_or(1)).collect(),
        _ => Vec::new(),
    }
}

/// `shape` with its array dims replaced.
pub fn with_dims(shape: &Shape, dims: &[i64]) -> Shape {
    match shape {
        Shape::Array(a) => {
            let mut a = a.clone();
            a.dims = dims.iter().map(|&d| Dim::Static(d)).collect();
            Shape::Array(a)
        }
        s => s.clone(),
    }
}

fn bytes_of(shape: &Shape) -> u64 {
    match shape {
        Shape::Array(a) => a.unpadded_bytes().unwrap_or(0),
        Shape::Tuple(t) => t.iter().map(bytes_of).sum(),
        _ => 0,
    }
}

fn groups_text(groups: &[Vec<u32>]) -> String {
    let inner: Vec<String> = groups
        .iter()
        .map(|g| format!("{{{}}}", g.iter().map(u32::to_string).collect::<Vec<_>>().join(",")))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// `slice={[0:n],...}` taking a block of `shape`'s dims.
fn slice_attr(shape: &Shape) -> Attr {
    let limits: Vec<String> = global_dims(shape).iter().map(|n| format!("[0:{n}]")).collect();
    attr("slice", format!("{{{}}}", limits.join(", ")))
}

fn attr(key: &str, value: String) -> Attr {
    Attr { key: key.into(), value }
}

/// The per-device entry computation under construction.
pub struct Builder<'a> {
    /// The device sub-axes.
    pub base: &'a Base,
    /// Instructions written so far.
    pub ins: Vec<Instruction>,
    names: HashSet<String>,
    /// Collectives inserted.
    pub inserted: Vec<Inserted>,
    /// Element types whose `add` computation all-reduces of partial sums use.
    pub adders: BTreeSet<String>,
    channel: u64,
    /// Values already moved: (value, layout) -> the moved value (a weight gathered once serves every use).
    moved: HashMap<(usize, Dist), Val>,
    /// When set, FSDP dots over large groups run as windowed einsums (`super::windowed`).
    pub windowed: Option<super::choice::WindowedEinsum>,
}

/// The name of the scalar add computation of an element type.
pub fn adder_name(ty: &str) -> String {
    format!("partition.add.{ty}")
}

impl<'a> Builder<'a> {
    /// An empty computation; `names` are those the module already uses.
    pub fn new(base: &'a Base, names: HashSet<String>) -> Builder<'a> {
        Builder {
            base,
            ins: Vec::new(),
            names,
            inserted: Vec::new(),
            adders: BTreeSet::new(),
            channel: 0,
            moved: HashMap::new(),
            windowed: None,
        }
    }

    /// A fresh channel id.
    pub fn next_channel(&mut self) -> u64 {
        self.channel += 1;
        self.channel
    }

    /// Records instruction `idx` as an inserted collective.
    pub fn record(&mut self, idx: usize, kind: CollectiveKind, for_ins: &str, rule: Rule, bytes: u64, group_size: u64) {
        self.inserted.push(Inserted {
            name: self.ins[idx].name.clone(),
            kind,
            for_instruction: for_ins.to_string(),
            rule,
            bytes,
            group_size,
        });
    }

    /// A name not used yet, from `hint`.
    fn fresh(&mut self, hint: &str) -> String {
        let mut name = hint.to_string();
        let mut k = 1;
        while self.names.contains(&name) {
            name = format!("{hint}.{k}");
            k += 1;
        }
        self.names.insert(name.clone());
        name
    }

    /// Appends an instruction; returns its index.
    pub fn push(&mut self, mut ins: Instruction) -> usize {
        self.names.insert(ins.name.clone());
        if ins.name.is_empty() {
            ins.name = self.fresh("partition");
        }
        self.ins.push(ins);
        self.ins.len() - 1
    }

    /// Appends a new instruction named from `hint`.
    pub fn emit(&mut self, hint: &str, opcode: &str, shape: Shape, operands: Vec<usize>, attrs: Vec<Attr>) -> usize {
        let name = self.fresh(hint);
        self.push(Instruction {
            name,
            shape,
            opcode: opcode.into(),
            operands: Operands::Refs(operands),
            attrs,
        })
    }

    fn local(&self, v: &Val, dist: &Dist) -> Shape {
        with_dims(&v.shape, &dist.local(self.base, &global_dims(&v.shape)))
    }

    fn element_type(v: &Val) -> String {
        match &v.shape {
            Shape::Array(a) => a.element_type.name().to_string(),
            _ => "f32".into(),
        }
    }

    /// Appends a collective over the groups along `axes` and records it.
    #[allow(clippy::too_many_arguments)]
    fn collective(
        &mut self,
        kind: CollectiveKind,
        v: &Val,
        to: &Dist,
        axes: &[usize],
        mut attrs: Vec<Attr>,
        for_ins: &str,
        rule: Rule,
    ) -> usize {
        self.channel += 1;
        let groups = self.base.groups(axes);
        let operand = self.local(v, &v.dist);
        let mut result = self.local(v, to);
        if kind == CollectiveKind::AllGather {
            // Every member sends its whole (padded) block.
            let mut dims = global_dims(&operand);
            let j = attrs
                .iter()
                .find(|a| a.key == "dimensions")
                .and_then(|a| a.value.trim_matches(|c| c == '{' || c == '}').parse::<usize>().ok());
            if let Some(d) = j.and_then(|j| dims.get_mut(j)) {
                *d *= self.base.size(axes) as i64;
            }
            result = with_dims(&operand, &dims);
        }
        let bytes = if kind == CollectiveKind::AllGather {
            bytes_of(&result)
        } else {
            bytes_of(&operand)
        };
        let mut all = vec![
            attr("channel_id", self.channel.to_string()),
            attr("replica_groups", groups_text(&groups)),
        ];
        all.append(&mut attrs);
        if kind != CollectiveKind::AllToAll {
            all.push(attr("use_global_device_ids", "true".into()));
        }
        let idx = self.emit(
            &format!("{for_ins}.{}", kind.name()),
            kind.name(),
            result,
            vec![v.idx],
            all,
        );
        let group_size = self.base.size(axes);
        self.record(idx, kind, for_ins, rule, bytes, group_size);
        idx
    }

    /// Sums the partial sums of `v`: a reduce-scatter into the dim where `want` splits further by exactly the
    /// partial axes, else an all-reduce. `reducer` names the reduction computation (an `add` when `None`).
    pub fn resolve(&mut self, v: &Val, want: Option<&Dist>, reducer: Option<&str>, for_ins: &str) -> Val {
        if v.dist.partial.is_empty() {
            return v.clone();
        }
        let p = v.dist.partial.clone();
        let apply = match reducer {
            Some(r) => r.to_string(),
            None => {
                let ty = Self::element_type(v);
                self.adders.insert(ty.clone());
                adder_name(&ty)
            }
        };
        let scatter_dim = want.and_then(|w| {
            (0..v.dist.dims.len()).find(|&k| {
                let mut grown = v.dist.dims[k].clone();
                grown.extend(&p);
                w.dims.get(k) == Some(&grown)
            })
        });
        let mut to = v.dist.clone();
        to.partial.clear();
        let (kind, mut attrs) = match scatter_dim {
            Some(k) => {
                to.dims[k].extend(&p);
                (
                    CollectiveKind::ReduceScatter,
                    vec![attr("dimensions", format!("{{{k}}}"))],
                )
            }
            None => (CollectiveKind::AllReduce, Vec::new()),
        };
        attrs.push(attr("to_apply", apply));
        let idx = self.collective(kind, v, &to, &p, attrs, for_ins, Rule::PartialSums);
        Val {
            idx,
            dist: to,
            shape: v.shape.clone(),
        }
    }

    /// Moves `v` to distribution `to`: partial sums summed, splits moved between dims (all-to-all), dropped
    /// (all-gather) and added (a local slice), or the same splits on other devices (collective-permute).
    pub fn reshard(&mut self, v: &Val, to: &Dist, for_ins: &str, rule: Rule) -> Val {
        if v.dist == *to {
            return v.clone();
        }
        if let Some(done) = self.moved.get(&(v.idx, to.clone())) {
            return done.clone();
        }
        let out = self.reshard_new(v, to, for_ins, rule);
        self.moved.insert((v.idx, to.clone()), out.clone());
        out
    }

    fn reshard_new(&mut self, v: &Val, to: &Dist, for_ins: &str, rule: Rule) -> Val {
        let mut cur = self.resolve(v, Some(to), None, for_ins);
        if cur.dist == *to {
            return cur;
        }
        // The same number of tiles along every dim on other devices: each device fetches its tile.
        let same_tiles = cur.dist.partial.is_empty()
            && cur.dist.dims.len() == to.dims.len()
            && cur
                .dist
                .dims
                .iter()
                .zip(&to.dims)
                .all(|(a, b)| self.base.size(a) == self.base.size(b));
        if same_tiles {
            return self.permute(&cur, to, for_ins);
        }
        let rank = to.dims.len();
        let prefix: Vec<usize> = (0..rank)
            .map(|j| {
                cur.dist.dims[j]
                    .iter()
                    .zip(&to.dims[j])
                    .take_while(|(a, b)| a == b)
                    .count()
            })
            .collect();
        // Splits that leave one dim for another: all-to-all.
        for j in 0..rank {
            for k in (0..rank).filter(|&k| k != j) {
                let moving: Vec<usize> = cur.dist.dims[j][prefix[j].min(cur.dist.dims[j].len())..]
                    .iter()
                    .filter(|a| to.dims[k][prefix[k]..].contains(a) && !cur.dist.dims[k].contains(a))
                    .copied()
                    .collect();
                if moving.is_empty() {
                    continue;
                }
                let mut next = cur.dist.clone();
                next.dims[j].retain(|a| !moving.contains(a));
                next.dims[k].extend(&moving);
                let attrs = vec![attr("dimensions", format!("{{{k}}}"))];
                let idx = self.collective(
                    CollectiveKind::AllToAll,
                    &cur,
                    &next,
                    &moving,
                    attrs,
                    for_ins,
                    Rule::MoveSplit,
                );
                cur = Val {
                    idx,
                    dist: next,
                    shape: cur.shape.clone(),
                };
            }
        }
        // Splits `to` does not have: all-gather.
        for (j, &p) in prefix.iter().enumerate() {
            let keep = p.min(cur.dist.dims[j].len());
            let extra: Vec<usize> = cur.dist.dims[j][keep..]
                .iter()
                .filter(|a| !to.dims[j].contains(a))
                .copied()
                .collect();
            let misplaced = cur.dist.dims[j].iter().zip(&to.dims[j]).any(|(a, b)| a != b);
            let drop: Vec<usize> = if misplaced {
                cur.dist.dims[j][keep..].to_vec()
            } else {
                extra
            };
            if drop.is_empty() {
                continue;
            }
            let mut next = cur.dist.clone();
            next.dims[j].retain(|a| !drop.contains(a));
            let attrs = vec![attr("dimensions", format!("{{{j}}}"))];
            let mut idx = self.collective(CollectiveKind::AllGather, &cur, &next, &drop, attrs, for_ins, rule);
            // An uneven split was padded: the gathered rows beyond the array are sliced off.
            let want = self.local(&cur, &next);
            if self.ins[idx].shape != want {
                idx = self.emit(
                    &format!("{for_ins}.unpad"),
                    "slice",
                    want.clone(),
                    vec![idx],
                    vec![slice_attr(&want)],
                );
            }
            cur = Val {
                idx,
                dist: next,
                shape: cur.shape.clone(),
            };
        }
        // Splits `to` adds over replicated axes: each device slices its part locally.
        if cur.dist != *to {
            let shape = self.local(&cur, to);
            let attrs = vec![slice_attr(&shape)];
            let idx = self.emit(&format!("{for_ins}.slice"), "slice", shape, vec![cur.idx], attrs);
            cur = Val {
                idx,
                dist: to.clone(),
                shape: cur.shape.clone(),
            };
        }
        cur
    }

    /// The tile each device holds under `d`: its coordinate along each dim.
    fn tile(&self, d: &Dist, device: u64) -> Vec<u64> {
        d.dims
            .iter()
            .map(|axes| {
                axes.iter()
                    .fold(0, |c, &a| c * self.base.sizes[a] + self.base.coord(device, a))
            })
            .collect()
    }

    /// Same splits, other devices: each device receives its tile from a device holding it.
    fn permute(&mut self, v: &Val, to: &Dist, for_ins: &str) -> Val {
        let n = self.base.devices();
        let mut used = HashSet::new();
        let mut pairs = Vec::new();
        for d in 0..n {
            let want = self.tile(to, d);
            if self.tile(&v.dist, d) == want {
                continue;
            }
            if let Some(s) = (0..n).find(|&s| !used.contains(&s) && self.tile(&v.dist, s) == want) {
                used.insert(s);
                pairs.push(format!("{{{s},{d}}}"));
            }
        }
        self.channel += 1;
        let shape = self.local(v, to);
        let bytes = bytes_of(&shape);
        let attrs = vec![
            attr("channel_id", self.channel.to_string()),
            attr("source_target_pairs", format!("{{{}}}", pairs.join(","))),
        ];
        let idx = self.emit(
            &format!("{for_ins}.collective-permute"),
            "collective-permute",
            shape,
            vec![v.idx],
            attrs,
        );
        self.inserted.push(Inserted {
            name: self.ins[idx].name.clone(),
            kind: CollectiveKind::CollectivePermute,
            for_instruction: for_ins.to_string(),
            rule: Rule::PermuteDevices,
            bytes,
            group_size: 2,
        });
        Val {
            idx,
            dist: to.clone(),
            shape: v.shape.clone(),
        }
    }
}
