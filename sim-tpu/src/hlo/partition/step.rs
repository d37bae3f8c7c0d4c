//! The walk over the entry computation: each instruction's operands moved to the layouts its rule needs, the
//! instruction written with per-device shapes, its result moved to its annotation.

use sim_core::layout::Shape;

use super::axes::Dist;
use super::build::{global_dims, with_dims, Builder, Rule, Val};
use super::layout::{is_identity, wanted, Layout};
use super::manual::{self, boundary, Boundary, MeshAxes};
use super::rules;
use crate::hlo::ir::{Computation, Instruction, Operands};

/// A value of the annotated computation: where it is in the per-device one, and its layout.
#[derive(Clone, Debug)]
struct Node {
    idx: usize,
    layout: Layout,
}

fn local_shape(b: &Builder<'_>, shape: &Shape, layout: &Layout) -> Shape {
    match (shape, layout) {
        (Shape::Array(_), Layout::Array(d)) => with_dims(shape, &d.local(b.base, &global_dims(shape))),
        (Shape::Tuple(ts), Layout::Tuple(ls)) => {
            Shape::Tuple(ts.iter().zip(ls).map(|(t, l)| local_shape(b, t, l)).collect())
        }
        _ => shape.clone(),
    }
}

struct Walk<'c, 'b, 'a> {
    comp: &'c Computation,
    b: &'b mut Builder<'a>,
    nodes: Vec<Node>,
    want: Vec<Option<Layout>>,
    warnings: &'b mut Vec<String>,
    mesh: &'b MeshAxes,
    /// How many dots read each instruction.
    dots_using: Vec<usize>,
}

/// An instruction the walk cannot partition: its name and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The instruction.
    pub name: String,
    /// Why, and what would be valid.
    pub message: String,
}

/// Writes the per-device entry into `b`; returns the index of its root. `mesh` names the axes `shard_map`
/// regions' specs use.
pub fn run(
    comp: &Computation,
    anns: &[Option<Layout>],
    b: &mut Builder<'_>,
    warnings: &mut Vec<String>,
    mesh: &MeshAxes,
) -> Result<usize, Refused> {
    let want = wanted(comp, anns);
    let mut dots_using = vec![0; comp.instructions.len()];
    for ins in comp.instructions.iter().filter(|i| i.opcode == "dot") {
        for &o in ins.operand_ids() {
            dots_using[o] += 1;
        }
    }
    let mut w = Walk {
        comp,
        b,
        nodes: Vec::with_capacity(comp.instructions.len()),
        want,
        warnings,
        mesh,
        dots_using,
    };
    for (i, ann) in anns.iter().enumerate().take(comp.instructions.len()) {
        let node = w.one(i, ann.as_ref()).map_err(|message| Refused {
            name: comp.instructions[i].name.clone(),
            message,
        })?;
        w.nodes.push(node);
    }
    Ok(w.nodes[comp.root].idx)
}

impl Walk<'_, '_, '_> {
    fn val(&self, o: usize) -> Option<Val> {
        let n = &self.nodes[o];
        n.layout.dist().map(|d| Val {
            idx: n.idx,
            dist: d.clone(),
            shape: self.comp.instructions[o].shape.clone(),
        })
    }

    /// Operand `o` moved to `to` (arrays only; others as they are).
    fn moved(&mut self, o: usize, to: &Dist, name: &str, rule: Rule) -> Node {
        match self.val(o) {
            Some(v) => {
                let v = self.b.reshard(&v, to, name, rule);
                Node {
                    idx: v.idx,
                    layout: Layout::Array(v.dist),
                }
            }
            None => self.nodes[o].clone(),
        }
    }

    /// Writes `ins` over new operands with a per-device shape for `layout`.
    fn write(&mut self, ins: &Instruction, operands: Vec<usize>, layout: Layout) -> Node {
        let shape = local_shape(self.b, &ins.shape, &layout);
        let mut copy = ins.clone();
        copy.shape = shape;
        if let Operands::Refs(_) = copy.operands {
            copy.operands = Operands::Refs(operands);
        }
        copy.attrs
            .retain(|a| a.key != "sharding" && a.key != "frontend_attributes" && a.key != "metadata");
        let idx = self.b.push(copy);
        Node { idx, layout }
    }

    fn one(&mut self, i: usize, ann: Option<&Layout>) -> Result<Node, String> {
        let ins = &self.comp.instructions[i];
        let ops: Vec<usize> = ins.operand_ids().to_vec();
        let target = ins.attr("custom_call_target").map(|t| t.trim_matches('"'));
        let op = ins.opcode.as_str();
        let node = match op {
            "parameter" => {
                let layout = ann.cloned().unwrap_or_else(|| Layout::replicated(&ins.shape));
                return Ok(self.write(ins, Vec::new(), layout));
            }
            _ if is_identity(op, target) && ops.len() == 1 => match (target, ann) {
                (Some("Sharding"), Some(Layout::Array(d))) => {
                    return Ok(self.moved(ops[0], d, &ins.name, Rule::GatherForUse))
                }
                _ => return Ok(self.nodes[ops[0]].clone()),
            },
            _ if boundary(ins).is_some() => return self.region_boundary(i, ann),
            // Inside a shard_map region (GSPMD's form, or the region's call): already per device.
            _ if ops.iter().any(|&o| self.nodes[o].layout == Layout::Manual) => {
                let from = ops.iter().map(|&o| self.nodes[o].idx).collect();
                return Ok(self.write(ins, from, Layout::Manual));
            }
            "constant" | "iota" | "partition-id" | "replica-id" | "after-all" => {
                self.write(ins, ops.clone(), Layout::replicated(&ins.shape))
            }
            "get-tuple-element" => {
                let layout = match (&self.nodes[ops[0]].layout, ins.tuple_index()) {
                    (Layout::Tuple(ls), Some(k)) if k < ls.len() => ls[k].clone(),
                    _ => Layout::replicated(&ins.shape),
                };
                let from = self.nodes[ops[0]].idx;
                self.write(ins, vec![from], layout)
            }
            "tuple" => {
                let elems: Vec<Node> = match ann {
                    Some(Layout::Tuple(ls)) if ls.len() == ops.len() => ops
                        .iter()
                        .zip(ls)
                        .map(|(&o, l)| match l {
                            Layout::Array(d) => self.moved(o, d, &ins.name, Rule::GatherForUse),
                            _ => self.nodes[o].clone(),
                        })
                        .collect(),
                    _ => ops.iter().map(|&o| self.nodes[o].clone()).collect(),
                };
                let layout = Layout::Tuple(elems.iter().map(|n| n.layout.clone()).collect());
                return Ok(self.write(ins, elems.iter().map(|n| n.idx).collect(), layout));
            }
            _ if rules::ELEMENTWISE.contains(&op) && ops.first().is_some_and(|&o| self.val(o).is_some()) => {
                self.elementwise(i, &ops)
            }
            "broadcast" | "transpose" | "reshape" | "dot" | "reduce" => self.shaped(i, &ops),
            _ => self.conservative(i, &ops),
        };
        // An annotated result is moved to its annotation.
        Ok(match (ann, node.layout.dist()) {
            (Some(Layout::Array(d)), Some(cur)) if cur != d => {
                let v = Val {
                    idx: node.idx,
                    dist: cur.clone(),
                    shape: ins.shape.clone(),
                };
                let v = self.b.reshard(&v, d, &ins.name, Rule::GatherForUse);
                Node {
                    idx: v.idx,
                    layout: Layout::Array(v.dist),
                }
            }
            _ => node,
        })
    }

    /// A `shard_map` boundary ([`manual`]): operands moved to the in-specs and the region's per-device blocks
    /// handed over as they are; or the blocks given the out-specs' layouts.
    fn region_boundary(&mut self, i: usize, ann: Option<&Layout>) -> Result<Node, String> {
        let ins = &self.comp.instructions[i];
        let ops: Vec<usize> = ins.operand_ids().to_vec();
        let side = boundary(ins);
        let key = match side {
            Some(Boundary::ToLocal) => "xla.sdy.in_shardings",
            _ => "xla.sdy.out_shardings",
        };
        let shardy = ins
            .attr("custom_call_target")
            .is_some_and(|t| t.trim_matches('"').starts_with("xla.sdy."));
        let specs = manual::frontend_attr(ins, key);
        if shardy && specs.is_none() {
            return Err(format!(
                "a shard_map boundary without its {key}; valid: frontend_attributes={{{key}=\"#sdy.sharding_per_value<[...]>\", \
                 xla.sdy.manual_axes=...}} as jax prints them"
            ));
        }
        let Some(specs) = specs else {
            // GSPMD's form: the operand was moved by its `Sharding` call (to-local), or the result's
            // layout is this instruction's `sharding=` (to-global).
            let from = self.nodes[ops[0]].idx;
            if let Some(Layout::Array(d)) = ann.filter(|_| side == Some(Boundary::ToGlobal)) {
                return self.handed_over(ins, vec![(from, d.clone(), d.clone())]);
            }
            if matches!(
                crate::hlo::sharding::Sharding::of(ins),
                Ok(Some(crate::hlo::sharding::Sharding::Tiled(_)))
            ) {
                self.partly_manual(ins);
            }
            return Ok(Node {
                idx: from,
                layout: Layout::Manual,
            });
        };
        let values = manual::sharding_per_value(&specs)?;
        if values.len() != ops.len() {
            return Err(format!(
                "{key} names {} values for {} operands; valid: one sharding per operand",
                values.len(),
                ops.len()
            ));
        }
        let all: Vec<String> = self.mesh_names();
        let man = manual::manual_axes(&manual::frontend_attr(ins, "xla.sdy.manual_axes").unwrap_or_default());
        let man = if man.is_empty() { all.clone() } else { man };
        if man.len() < all.len() && side == Some(Boundary::ToLocal) {
            self.partly_manual(ins);
        }
        let mut dists = Vec::new();
        for (v, &o) in values.iter().zip(&ops) {
            let local = manual::dist_of(v, self.mesh, &man)?;
            let full = manual::dist_of(v, self.mesh, &all)?;
            dists.push((o, local, full));
        }
        if side == Some(Boundary::ToGlobal) {
            let blocks = dists.into_iter().map(|(o, l, f)| (self.nodes[o].idx, l, f)).collect();
            return self.handed_over(ins, blocks);
        }
        let elems: Vec<Shape> = match &ins.shape {
            Shape::Tuple(ts) => ts.clone(),
            s => vec![s.clone()],
        };
        let mut idxs = Vec::new();
        for (k, (o, local, _)) in dists.iter().enumerate() {
            let n = self.moved(*o, local, &ins.name, Rule::ManualBoundary);
            let got = local_shape(self.b, &self.comp.instructions[*o].shape, &n.layout);
            if elems.get(k).map(global_dims) != Some(global_dims(&got)) {
                return Err(format!(
                    "value {k}: its in-spec gives per-device {got} but the region reads {}; valid: in-specs \
                     whose splits give the region's shapes",
                    elems.get(k).map_or("nothing".into(), ToString::to_string)
                ));
            }
            idxs.push(n.idx);
        }
        let idx = match &ins.shape {
            Shape::Tuple(_) => self.b.emit(&ins.name, "tuple", ins.shape.clone(), idxs, Vec::new()),
            _ => idxs[0],
        };
        Ok(Node {
            idx,
            layout: Layout::Manual,
        })
    }

    /// The to-global side: each per-device block `(idx, layout over the manual axes, layout the out-spec
    /// names)` becomes a value of the annotated module; over axes the region left whole, each device slices.
    fn handed_over(&mut self, ins: &Instruction, blocks: Vec<(usize, Dist, Dist)>) -> Result<Node, String> {
        let elems: Vec<Shape> = match &ins.shape {
            Shape::Tuple(ts) => ts.clone(),
            s => vec![s.clone()],
        };
        let mut out = Vec::new();
        for (k, ((idx, local, full), shape)) in blocks.into_iter().zip(&elems).enumerate() {
            let written = global_dims(&self.b.ins[idx].shape);
            let expect = local.local(self.b.base, &global_dims(shape));
            if written != expect {
                return Err(format!(
                    "value {k}: the region returns {:?} per device but its out-spec gives {:?} of {shape}; valid: \
                     out-specs whose splits give the region's shapes",
                    written, expect
                ));
            }
            let v = Val {
                idx,
                dist: local,
                shape: shape.clone(),
            };
            out.push(self.b.reshard(&v, &full, &ins.name, Rule::ManualBoundary));
        }
        if let [v] = out.as_slice() {
            return Ok(Node {
                idx: v.idx,
                layout: Layout::Array(v.dist.clone()),
            });
        }
        let shapes = out
            .iter()
            .map(|v| local_shape(self.b, &v.shape, &Layout::Array(v.dist.clone())))
            .collect();
        let idx = self.b.emit(
            &ins.name,
            "tuple",
            Shape::Tuple(shapes),
            out.iter().map(|v| v.idx).collect(),
            Vec::new(),
        );
        Ok(Node {
            idx,
            layout: Layout::Tuple(out.into_iter().map(|v| Layout::Array(v.dist)).collect()),
        })
    }

    fn mesh_names(&self) -> Vec<String> {
        self.mesh.names_list()
    }

    fn partly_manual(&mut self, ins: &Instruction) {
        self.warnings.push(format!(
            "instruction `{}`: a shard_map over some of the mesh axes; its body runs whole over the other axes on \
             every device (the conservative rule: the compiler may split it further)",
            ins.name
        ));
    }

    fn elementwise(&mut self, i: usize, ops: &[usize]) -> Node {
        let ins = &self.comp.instructions[i];
        let rank = global_dims(&ins.shape).len();
        let full: Vec<Dist> = ops
            .iter()
            .filter_map(|&o| self.val(o))
            .filter(|v| v.dist.dims.len() == rank)
            .map(|v| v.dist)
            .collect();
        let target = if full.is_empty() {
            Dist::replicated(rank)
        } else {
            rules::elementwise(&full.iter().collect::<Vec<_>>(), self.b.base)
        };
        let mut new_ops = Vec::new();
        for &o in ops {
            let n = match self.val(o) {
                Some(v) if v.dist.dims.len() == rank => self.moved(o, &target, &ins.name, Rule::GatherForUse),
                Some(v) if !v.dist.partial.is_empty() => {
                    let r = Dist::replicated(v.dist.dims.len());
                    self.moved(o, &r, &ins.name, Rule::PartialSums)
                }
                _ => self.nodes[o].clone(),
            };
            new_ops.push(n.idx);
        }
        self.write(ins, new_ops, Layout::Array(target))
    }

    /// Broadcast, transpose, reshape, dot and reduce (single result).
    fn shaped(&mut self, i: usize, ops: &[usize]) -> Node {
        let ins = &self.comp.instructions[i];
        let Some(mut v) = self.val(ops[0]) else {
            return self.conservative(i, ops);
        };
        if !v.dist.partial.is_empty() {
            let mut to = v.dist.clone();
            to.partial.clear();
            v = self.b.reshard(&v, &to, &ins.name, Rule::PartialSums);
        }
        let out_rank = global_dims(&ins.shape).len();
        match ins.opcode.as_str() {
            "broadcast" => {
                let map = ins.int_list("dimensions").unwrap_or_default();
                let out = rules::broadcast(&v.dist, &map, out_rank);
                self.write(ins, vec![v.idx], Layout::Array(out))
            }
            "transpose" => {
                let perm = ins.int_list("dimensions").unwrap_or_default();
                self.write(ins, vec![v.idx], Layout::Array(rules::transpose(&v.dist, &perm)))
            }
            "reshape" => {
                let (a, bdims) = (global_dims(&v.shape), global_dims(&ins.shape));
                let (target, out, clean) = rules::reshape(&v.dist, &a, &bdims, self.b.base);
                if !clean {
                    self.warnings.push(format!(
                        "instruction `{}` (reshape): a split dim does not map cleanly to {}; that split is \
                         all-gathered before the reshape",
                        ins.name, ins.shape
                    ));
                }
                let v = self.b.reshard(&v, &target, &ins.name, Rule::Conservative);
                self.write(ins, vec![v.idx], Layout::Array(out))
            }
            "dot" if ops.len() == 2 => self.dot(i, v, ops),
            "reduce" if ops.len() == 2 && matches!(ins.shape, Shape::Array(_)) => {
                let dims = ins.int_list("dimensions").unwrap_or_default();
                let out = rules::reduce(&v.dist, &dims);
                let init = self.nodes[ops[1]].idx;
                let node = self.write(ins, vec![v.idx, init], Layout::Array(out.clone()));
                let reducer = ins
                    .attr("to_apply")
                    .map(|s| s.trim().trim_start_matches('%').to_string());
                self.finish_partial(i, node, out, reducer.as_deref())
            }
            _ => self.conservative(i, ops),
        }
    }

    fn dot(&mut self, i: usize, l: Val, ops: &[usize]) -> Node {
        let ins = &self.comp.instructions[i];
        let Some(rv) = self.val(ops[1]) else {
            return self.conservative(i, ops);
        };
        let size = |v: &Val| global_dims(&v.shape).iter().product::<i64>();
        let plan = rules::dot(ins, &l.dist, &rv.dist, size(&l) >= size(&rv));
        if let Some(v) = self.windowed(i, &l, &rv, &plan, ops) {
            return Node {
                idx: v.idx,
                layout: Layout::Array(v.dist),
            };
        }
        let lv = self.b.reshard(&l, &plan.lhs, &ins.name, Rule::GatherForUse);
        let rv = self.b.reshard(&rv, &plan.rhs, &ins.name, Rule::GatherForUse);
        let node = self.write(ins, vec![lv.idx, rv.idx], Layout::Array(plan.out.clone()));
        self.finish_partial(i, node, plan.out, None)
    }

    /// The dot as a windowed einsum ([`super::windowed`]) when the compiler would run it so: a one-dot
    /// operand split on its (single) contracting dim and gathered for it, or partial sums wanted scattered.
    fn windowed(&mut self, i: usize, l: &Val, r: &Val, plan: &rules::DotPlan, ops: &[usize]) -> Option<Val> {
        let w = self.b.windowed?;
        let ins = &self.comp.instructions[i];
        let (lcs, rcs) = (
            ins.int_list("lhs_contracting_dims")?,
            ins.int_list("rhs_contracting_dims")?,
        );
        let (lb, rb) = (
            ins.int_list("lhs_batch_dims").unwrap_or_default(),
            ins.int_list("rhs_batch_dims").unwrap_or_default(),
        );
        // Rows per device of an operand: its local extent outside `skip` (contracting and batch dims).
        let rows = |v: &Val, d: &Dist, skip: &[i64], batch: &[i64]| -> u64 {
            let local = d.local(self.b.base, &global_dims(&v.shape));
            local
                .iter()
                .enumerate()
                .filter(|(j, _)| !skip.contains(&(*j as i64)) && !batch.contains(&(*j as i64)))
                .map(|(_, &n)| n as u64)
                .product()
        };
        // The contracting pair whose split a side gathers (the only split contracting dim of that side).
        let split_pair = |d: &Dist, cs: &[i64], os: &[i64]| -> Option<(usize, usize)> {
            let split: Vec<usize> = (0..cs.len()).filter(|&k| !d.dims[cs[k] as usize].is_empty()).collect();
            match split[..] {
                [k] => Some((cs[k] as usize, os[k] as usize)),
                _ => None,
            }
        };
        // All-gather side.
        let sides = [
            (true, r, &plan.rhs, &rcs, l, &plan.lhs, &lcs, ops[1], &lb),
            (false, l, &plan.lhs, &lcs, r, &plan.rhs, &rcs, ops[0], &rb),
        ];
        for (is_rhs, cur, planned, cs, other, other_plan, ocs, o, obatch) in sides {
            let Some((c, oc)) = split_pair(&cur.dist, cs, ocs) else {
                continue;
            };
            let axes = cur.dist.dims[c].clone();
            let only_c_gathered = planned.dims[c].is_empty()
                && cur.dist.partial.is_empty()
                && (0..cur.dist.dims.len()).all(|j| j == c || cur.dist.dims[j] == planned.dims[j]);
            if axes.is_empty() || !only_c_gathered || !other_plan.dims[oc].is_empty() || self.dots_using[o] != 1 {
                continue;
            }
            let other_rows = rows(other, other_plan, ocs, obatch);
            if !w.applies(self.b.base.size(&axes), other_rows) {
                continue;
            }
            let ov = self.b.reshard(other, other_plan, &ins.name, Rule::GatherForUse);
            return Some(self.b.windowed_gather(ins, &ov, oc, cur, is_rhs, &axes, &plan.out));
        }
        // Reduce-scatter side.
        let p = plan.out.partial.clone();
        let want = self.want[i].as_ref().and_then(Layout::dist)?.clone();
        let k = (0..plan.out.dims.len()).find(|&k| {
            let mut grown = plan.out.dims[k].clone();
            grown.extend(&p);
            want.dims.get(k) == Some(&grown)
        })?;
        let local = plan.lhs.local(self.b.base, &global_dims(&l.shape));
        let per_device_rows: u64 = lcs
            .iter()
            .map(|&c| local.get(c as usize).copied().unwrap_or(1) as u64)
            .product();
        if p.is_empty() || !w.applies(self.b.base.size(&p), per_device_rows) {
            return None;
        }
        let nb = lb.len();
        let free = |rank: usize, cs: &[i64], batch: &[i64]| -> Vec<usize> {
            (0..rank)
                .filter(|&j| !cs.contains(&(j as i64)) && !batch.contains(&(j as i64)))
                .collect()
        };
        let (lf, rf) = (free(l.dist.dims.len(), &lcs, &lb), free(r.dist.dims.len(), &rcs, &rb));
        let (free_is_rhs, free_dim) = match k.checked_sub(nb) {
            Some(x) if x < lf.len() => (false, lf[x]),
            Some(x) if x - lf.len() < rf.len() => (true, rf[x - lf.len()]),
            _ => return None,
        };
        let lv = self.b.reshard(l, &plan.lhs, &ins.name, Rule::GatherForUse);
        let rv = self.b.reshard(r, &plan.rhs, &ins.name, Rule::GatherForUse);
        let mut to = plan.out.clone();
        to.partial.clear();
        to.dims[k].extend(&p);
        Some(self.b.windowed_scatter(ins, &lv, &rv, free_is_rhs, free_dim, &p, &to))
    }

    /// Sums a result's partial sums (reduce-scatter when its users want it split so).
    fn finish_partial(&mut self, i: usize, node: Node, out: Dist, reducer: Option<&str>) -> Node {
        if out.partial.is_empty() {
            return node;
        }
        let ins = &self.comp.instructions[i];
        let want = self.want[i].as_ref().and_then(Layout::dist).cloned();
        let v = Val {
            idx: node.idx,
            dist: out,
            shape: ins.shape.clone(),
        };
        let v = self.b.resolve(&v, want.as_ref(), reducer, &ins.name);
        Node {
            idx: v.idx,
            layout: Layout::Array(v.dist),
        }
    }

    /// The conservative rule: split operands gathered whole, the instruction run on every device.
    fn conservative(&mut self, i: usize, ops: &[usize]) -> Node {
        let ins = &self.comp.instructions[i];
        let mut new_ops = Vec::new();
        let mut gathered = false;
        for &o in ops {
            let n = match self.val(o) {
                Some(v) if !v.dist.is_replicated() => {
                    gathered = true;
                    let r = Dist::replicated(v.dist.dims.len());
                    self.moved(o, &r, &ins.name, Rule::Conservative)
                }
                _ => self.nodes[o].clone(),
            };
            new_ops.push(n.idx);
        }
        if gathered {
            self.warnings.push(format!(
                "instruction `{}` ({}) is outside the partitioner's patterns: its split operands are all-gathered \
                 whole and it runs on every device",
                ins.name, ins.opcode
            ));
        }
        self.write(ins, new_ops, Layout::replicated(&ins.shape))
    }
}
