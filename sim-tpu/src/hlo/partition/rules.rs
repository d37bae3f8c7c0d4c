//! How each instruction the partitioner understands lays its operands and result on the devices: the
//! distributions its operands must have (reached by [`super::build::Builder::reshard`]) and its result's.

use super::axes::{Base, Dist};
use crate::hlo::ir::Instruction;

/// Opcodes applied element by element (operands of the result's shape, or scalars).
pub const ELEMENTWISE: &[&str] = &[
    "abs",
    "add",
    "and",
    "atan2",
    "cbrt",
    "ceil",
    "clamp",
    "compare",
    "complex",
    "convert",
    "copy",
    "cosine",
    "divide",
    "erf",
    "exponential",
    "exponential-minus-one",
    "floor",
    "imag",
    "is-finite",
    "log",
    "log-plus-one",
    "logistic",
    "maximum",
    "minimum",
    "multiply",
    "negate",
    "not",
    "or",
    "popcnt",
    "power",
    "real",
    "reduce-precision",
    "remainder",
    "round-nearest-afz",
    "round-nearest-even",
    "rsqrt",
    "select",
    "shift-left",
    "shift-right-arithmetic",
    "shift-right-logical",
    "sign",
    "sine",
    "sqrt",
    "stochastic-convert",
    "subtract",
    "tan",
    "tanh",
    "xor",
];

/// The layout every full-rank operand of an elementwise op takes: the most finely split one (the first on a
/// tie), partial sums dropped (they are summed first).
pub fn elementwise(operands: &[&Dist], base: &Base) -> Dist {
    let tiles = |d: &Dist| d.dims.iter().map(|a| base.size(a)).product::<u64>();
    let mut best = operands[0];
    for d in &operands[1..] {
        if tiles(d) > tiles(best) {
            best = d;
        }
    }
    Dist {
        dims: best.dims.clone(),
        partial: Vec::new(),
    }
}

/// A broadcast keeps the operand's splits on the dims it maps them to (`dimensions={...}`).
pub fn broadcast(op: &Dist, map: &[i64], out_rank: usize) -> Dist {
    let mut out = Dist::replicated(out_rank);
    for (j, &k) in map.iter().enumerate() {
        if let (Some(axes), Some(slot)) = (op.dims.get(j), out.dims.get_mut(k as usize)) {
            *slot = axes.clone();
        }
    }
    out
}

/// A transpose moves each split with its dim.
pub fn transpose(op: &Dist, perm: &[i64]) -> Dist {
    Dist {
        dims: perm
            .iter()
            .map(|&p| op.dims.get(p as usize).cloned().unwrap_or_default())
            .collect(),
        partial: Vec::new(),
    }
}

/// Groups of consecutive dims of `a` and `b` with equal products (XLA's reshape dim correspondence).
fn dim_groups(a: &[i64], b: &[i64]) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        let (si, sj) = (i, j);
        let (mut pa, mut pb) = (1i64, 1i64);
        if i < a.len() {
            pa *= a[i];
            i += 1;
        }
        if j < b.len() {
            pb *= b[j];
            j += 1;
        }
        while pa != pb {
            if pa < pb && i < a.len() {
                pa *= a[i];
                i += 1;
            } else if pb < pa && j < b.len() {
                pb *= b[j];
                j += 1;
            } else {
                break;
            }
        }
        out.push((si..i, sj..j));
    }
    out
}

/// A reshape from dims `a` to `b`: a split stays where its dim maps cleanly (it is the major dim of its group
/// and the group's major result dim divides by it); other splits are gathered first. Returns the operand's
/// layout before the reshape, the result's, and whether everything mapped cleanly.
pub fn reshape(op: &Dist, a: &[i64], b: &[i64], base: &Base) -> (Dist, Dist, bool) {
    let mut target = Dist {
        dims: op.dims.clone(),
        partial: Vec::new(),
    };
    let mut out = Dist::replicated(b.len());
    let mut clean = true;
    for (ra, rb) in dim_groups(a, b) {
        let major_in = ra.clone().find(|&j| a[j] != 1);
        let major_out = rb.clone().find(|&k| b[k] != 1);
        for j in ra {
            if op.dims[j].is_empty() {
                continue;
            }
            let s = base.size(&op.dims[j]) as i64;
            match major_out {
                Some(k) if Some(j) == major_in && b[k] % s == 0 && a[j] % s == 0 => out.dims[k] = op.dims[j].clone(),
                _ => {
                    target.dims[j].clear();
                    clean = false;
                }
            }
        }
    }
    (target, out, clean)
}

/// A reduce over `dims`: the kept dims keep their splits; the splits of reduced dims become partial sums.
pub fn reduce(op: &Dist, dims: &[i64]) -> Dist {
    let reduced = |j: usize| dims.contains(&(j as i64));
    Dist {
        dims: (0..op.dims.len())
            .filter(|&j| !reduced(j))
            .map(|j| op.dims[j].clone())
            .collect(),
        partial: (0..op.dims.len())
            .filter(|&j| reduced(j))
            .flat_map(|j| op.dims[j].clone())
            .collect(),
    }
}

/// The operand layouts a dot computes from and its result's (batch dims, lhs free dims, rhs free dims; the
/// contracting dims' splits become partial sums).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DotPlan {
    /// Lhs layout.
    pub lhs: Dist,
    /// Rhs layout.
    pub rhs: Dist,
    /// Result layout (partial over the contracting splits).
    pub out: Dist,
}

fn list(ins: &Instruction, key: &str) -> Vec<usize> {
    ins.int_list(key)
        .unwrap_or_default()
        .into_iter()
        .map(|d| d as usize)
        .collect()
}

/// Plans a dot. Paired dims (batch, contracting) take the split of whichever side has one (the other side
/// slices locally). A sub-axis may serve one role only: a contracting split that clashes with a batch or free
/// split is gathered (FSDP: the weight is all-gathered); a free split on both sides is gathered on the smaller
/// operand (`lhs_bigger` says which: true on a tie, the rhs being the weight in `x @ w`); a free split clashing with a batch split is gathered.
pub fn dot(ins: &Instruction, l: &Dist, r: &Dist, lhs_bigger: bool) -> DotPlan {
    let (lb, rb) = (list(ins, "lhs_batch_dims"), list(ins, "rhs_batch_dims"));
    let (lc, rc) = (list(ins, "lhs_contracting_dims"), list(ins, "rhs_contracting_dims"));
    let free = |rank: usize, b: &[usize], c: &[usize]| -> Vec<usize> {
        (0..rank).filter(|j| !b.contains(j) && !c.contains(j)).collect()
    };
    let (lf, rf) = (free(l.dims.len(), &lb, &lc), free(r.dims.len(), &rb, &rc));
    let (mut ld, mut rd) = (Dist::replicated(l.dims.len()), Dist::replicated(r.dims.len()));
    ld.dims.clone_from(&l.dims);
    rd.dims.clone_from(&r.dims);
    let pairs: Vec<(usize, usize)> = lb
        .iter()
        .copied()
        .zip(rb.iter().copied())
        .chain(lc.iter().copied().zip(rc.iter().copied()))
        .collect();
    for &(x, y) in &pairs {
        if ld.dims.get(x) != rd.dims.get(y) && x < ld.dims.len() && y < rd.dims.len() {
            if ld.dims[x].is_empty() {
                ld.dims[x] = rd.dims[y].clone();
            } else {
                rd.dims[y] = ld.dims[x].clone();
            }
        }
    }
    let axes = |d: &Dist, js: &[usize]| -> Vec<usize> {
        js.iter()
            .flat_map(|&j| d.dims.get(j).cloned().unwrap_or_default())
            .collect()
    };
    let batch = axes(&ld, &lb);
    let (lfree, rfree) = (axes(&ld, &lf), axes(&rd, &rf));
    let drop = |d: &mut Dist, js: &[usize], bad: &dyn Fn(usize) -> bool| {
        for &j in js {
            if let Some(v) = d.dims.get_mut(j) {
                v.retain(|&a| !bad(a));
            }
        }
    };
    let clash_c = |a: usize| batch.contains(&a) || lfree.contains(&a) || rfree.contains(&a);
    drop(&mut ld, &lc, &clash_c);
    drop(&mut rd, &rc, &clash_c);
    drop(&mut ld, &lf, &|a| batch.contains(&a));
    drop(&mut rd, &rf, &|a| batch.contains(&a));
    if lhs_bigger {
        drop(&mut rd, &rf, &|a| lfree.contains(&a));
    } else {
        drop(&mut ld, &lf, &|a| rfree.contains(&a));
    }
    let mut out = Dist::replicated(0);
    out.dims = lb
        .iter()
        .map(|&j| ld.dims[j].clone())
        .chain(lf.iter().map(|&j| ld.dims[j].clone()))
        .chain(rf.iter().map(|&j| rd.dims[j].clone()))
        .collect();
    out.partial = axes(&ld, &lc);
    DotPlan { lhs: ld, rhs: rd, out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_groups_by_hand() {
        // [8,4,16] -> [32,16]: dims 0,1 merge into 0; dim 2 stays.
        assert_eq!(dim_groups(&[8, 4, 16], &[32, 16]), vec![(0..2, 0..1), (2..3, 1..2)]);
        let b = Base::new(&[4]);
        let split0 = Dist {
            dims: vec![vec![0, 1], vec![], vec![]],
            partial: vec![],
        };
        // Batch split of 4 on the major merged dim: clean.
        let (t, o, clean) = reshape(&split0, &[8, 4, 16], &[32, 16], &b);
        assert!(clean && t == split0);
        assert_eq!(o.dims, vec![vec![0, 1], vec![]]);
        // A split on the minor merged dim is not clean: gathered.
        let split1 = Dist {
            dims: vec![vec![], vec![0, 1], vec![]],
            partial: vec![],
        };
        let (t, o, clean) = reshape(&split1, &[8, 4, 16], &[32, 16], &b);
        assert!(!clean && t.is_replicated() && o.is_replicated());
    }
}
