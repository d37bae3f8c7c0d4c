//! Windowed einsums: where the XLA TPU compiler loops a dot over the devices' blocks, passing the blocks round
//! a ring with collective-permutes, instead of one all-gather before the dot (`windowed_dot_general_body_ag`)
//! or one reduce-scatter after it (`..._rs`). Written out unrolled: n partial dots and n-1 permutes of one
//! block each, so the schedule overlaps each permute with the dot before it.
//!
//! When the compiler chooses it (read off its optimized modules, `tools/partition-probe/windowed.py` and the
//! FSDP records): the group has more than 4 devices (never on 4 devices, at any size), the operand gathered
//! feeds one dot only (a weight read by two dots, forward and backward, is all-gathered once for both), and
//! each block's dot covers the block's transfer: a block of K rows of an [K, H] operand costs `2 T K H` FLOPs
//! for `T` rows per device and moves `2 K H` bytes, so it pays when `T >= peak / (links x link rate)`
//! (v5p: 850 rows, windowed at 1024 and 4096, not at 256; v6e: 2550, windowed at 4096, not at 1024).

use sim_core::layout::Shape;

use super::axes::Dist;
use super::build::{global_dims, with_dims, Builder, Rule, Val};
use crate::hlo::collective::CollectiveKind;
use crate::hlo::ir::{Attr, Instruction};

pub use super::choice::{WindowedEinsum, MAX_PLAIN_GROUP};

/// `source_target_pairs` passing each device's block to the next device of its group along `axes`.
fn ring_pairs(b: &Builder<'_>, axes: &[usize]) -> String {
    let mut pairs = Vec::new();
    for g in b.base.groups(axes) {
        for (j, &d) in g.iter().enumerate() {
            pairs.push(format!("{{{d},{}}}", g[(j + 1) % g.len()]));
        }
    }
    format!("{{{}}}", pairs.join(","))
}

fn attr(key: &str, value: String) -> Attr {
    Attr { key: key.into(), value }
}

/// `shape` with dim `j` divided by `n`.
fn block(shape: &Shape, j: usize, n: u64) -> Shape {
    let mut d = global_dims(shape);
    if let Some(x) = d.get_mut(j) {
        *x = (*x + n as i64 - 1) / n as i64;
    }
    with_dims(shape, &d)
}

impl Builder<'_> {
    /// One hop of the ring: `v`'s block to the next device, recorded as a windowed einsum's permute.
    fn ring_permute(&mut self, idx: usize, axes: &[usize], for_ins: &str) -> usize {
        let shape = self.ins[idx].shape.clone();
        let bytes = match &shape {
            Shape::Array(a) => a.unpadded_bytes().unwrap_or(0),
            _ => 0,
        };
        let attrs = vec![
            attr("channel_id", self.next_channel().to_string()),
            attr("source_target_pairs", ring_pairs(self, axes)),
        ];
        let i = self.emit(
            &format!("{for_ins}.window"),
            "collective-permute",
            shape,
            vec![idx],
            attrs,
        );
        self.record(
            i,
            CollectiveKind::CollectivePermute,
            for_ins,
            Rule::WindowedEinsum,
            bytes,
            self.base.size(axes),
        );
        i
    }

    /// A local block of `idx` along dim `j` (one of `n`).
    fn block_of(&mut self, idx: usize, j: usize, n: u64, for_ins: &str) -> usize {
        let shape = block(&self.ins[idx].shape, j, n);
        let limits: Vec<String> = global_dims(&shape).iter().map(|k| format!("[0:{k}]")).collect();
        let attrs = vec![attr("slice", format!("{{{}}}", limits.join(", ")))];
        self.emit(&format!("{for_ins}.block"), "slice", shape, vec![idx], attrs)
    }

    /// The all-gather side: `dot` of `other` (whole along its contracting dim `oc`) and `split`'s block
    /// (its contracting dim split over `axes`), as n partial dots over the blocks arriving round the ring,
    /// summed. `split_is_rhs` says which operand of `dot` the block is; `out` is the result's layout.
    #[allow(clippy::too_many_arguments)]
    pub fn windowed_gather(
        &mut self,
        dot: &Instruction,
        other: &Val,
        oc: usize,
        split: &Val,
        split_is_rhs: bool,
        axes: &[usize],
        out: &Dist,
    ) -> Val {
        let n = self.base.size(axes);
        let out_shape = with_dims(&dot.shape, &out.local(self.base, &global_dims(&dot.shape)));
        let mut blk = split.idx;
        let mut acc = None;
        for i in 0..n {
            if i > 0 {
                blk = self.ring_permute(blk, axes, &dot.name);
            }
            let part = self.block_of(other.idx, oc, n, &dot.name);
            let ops = if split_is_rhs { vec![part, blk] } else { vec![blk, part] };
            let p = self.emit(
                &format!("{}.part", dot.name),
                "dot",
                out_shape.clone(),
                ops,
                dot_attrs(dot),
            );
            acc = Some(match acc {
                None => p,
                Some(a) => self.emit(
                    &format!("{}.acc", dot.name),
                    "add",
                    out_shape.clone(),
                    vec![a, p],
                    Vec::new(),
                ),
            });
        }
        Val {
            idx: acc.unwrap_or(split.idx),
            dist: out.clone(),
            shape: dot.shape.clone(),
        }
    }

    /// The reduce-scatter side: `dot` of `lhs` and `rhs` (local blocks of its split contracting dim, partial
    /// over `axes`) whose result is wanted split over `axes` (as `to` says): n partial dots of one output block
    /// each (the operand `free_is_rhs` names, sliced along its dim `free_dim`), each added to the running sum arriving round
    /// the ring. `to` is the result's layout.
    #[allow(clippy::too_many_arguments)]
    pub fn windowed_scatter(
        &mut self,
        dot: &Instruction,
        lhs: &Val,
        rhs: &Val,
        free_is_rhs: bool,
        free_dim: usize,
        axes: &[usize],
        to: &Dist,
    ) -> Val {
        let n = self.base.size(axes);
        let out_shape = with_dims(&dot.shape, &to.local(self.base, &global_dims(&dot.shape)));
        let mut acc: Option<usize> = None;
        for _ in 0..n {
            let src = if free_is_rhs { rhs.idx } else { lhs.idx };
            let part = self.block_of(src, free_dim, n, &dot.name);
            let ops = if free_is_rhs {
                vec![lhs.idx, part]
            } else {
                vec![part, rhs.idx]
            };
            let p = self.emit(
                &format!("{}.part", dot.name),
                "dot",
                out_shape.clone(),
                ops,
                dot_attrs(dot),
            );
            acc = Some(match acc {
                None => p,
                Some(a) => {
                    let moved = self.ring_permute(a, axes, &dot.name);
                    self.emit(
                        &format!("{}.acc", dot.name),
                        "add",
                        out_shape.clone(),
                        vec![moved, p],
                        Vec::new(),
                    )
                }
            });
        }
        Val {
            idx: acc.unwrap_or(lhs.idx),
            dist: to.clone(),
            shape: dot.shape.clone(),
        }
    }
}

/// A dot's dimension attributes.
fn dot_attrs(dot: &Instruction) -> Vec<Attr> {
    dot.attrs
        .iter()
        .filter(|a| a.key.ends_with("_dims") || a.key == "precision_config")
        .cloned()
        .collect()
}
