//! The compiler's memory-space assignment prefetches matmul weights into on-chip memory: beside the one
//! cross-program prefetch ([`super::prefetch`]), an entry parameter only matmuls read is copied to VMEM (CMEM on
//! v4) by a `copy-start`/`copy-done` pair overlapping the kernels before its first reader; the copy carries no
//! estimate and the matmul reads the operand on chip. It does so when the parameter takes at most half of the
//! prefetch budget the cross-program prefetch leaves, and not for the program's first kernel (no kernel runs
//! before it to hide the copy).
//!
//! Evidence (compiler corpus, optimized modules of the mlp, dcn_cross, decode_matmul, softmax_xent and
//! moe_routing families, entry parameters of 1 MiB and more besides the cross-program one): of those only
//! matmuls read, within half the budget left and not read by the first kernel, 114 of 143 are copy-started on
//! chip; read by the first kernel, 53 of 114; over half the budget left, 13 of 34; over the whole budget left,
//! 2 of 126. mlp.008 on v5e (f32, batch 7, widths 1011-5941-896-91-66, fwd+bwd): the 21 MB second weight is
//! copied to `S(1)` and the kernel computing `dH1 = dH2 W2^T` reads it in 5,598 cycles, where streaming it from
//! HBM alone takes 52,000 (tpusim streamed it: 57,344 cycles). mlp.002 on v6e: the 40.7 MB second weight, over
//! half of the 55 MiB the 43 MB cross-program prefetch leaves, stays in HBM (its kernel: 106,624 cycles).

use std::collections::BTreeMap;

use super::bytes::Sizer;
use super::fusion::Group;
use super::graph::Graph;
use super::ops::OpClass;
use super::HloError;
use crate::tensorcore::ChipModel;

/// The entry parameters, besides the cross-program prefetch `cross`, that the compiler prefetches on chip: read only
/// by dots and convolutions (directly or through a transpose or reshape), not by the first of `kernels` (in
/// execution order), and of at most half the prefetch budget `cross` leaves.
pub(super) fn prefetched_operands(
    g: &Graph<'_>,
    kernels: &[Group],
    cross: Option<usize>,
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<Vec<usize>, HloError> {
    let cross_bytes = match cross {
        Some(c) => sizer.shape(&g.nodes[c].ins.shape)?.padded_bytes,
        None => 0,
    };
    let left = chip.prefetch_budget_bytes.saturating_sub(cross_bytes);
    let first: &[usize] = kernels.first().map_or(&[], |k| &k.inputs);
    let mut out = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if n.ins.opcode != "parameter" || n.param.is_none() || Some(i) == cross || first.contains(&i) {
            continue;
        }
        let bytes = sizer.shape(&n.ins.shape)?.padded_bytes;
        // A large convolution activation is streamed ([`super::conv_prefetch`]).
        if read_by_matmuls_only(g, i)
            && bytes.saturating_mul(2) <= left
            && !super::conv_prefetch::activation_too_large(g, i, bytes)
        {
            out.push(i);
        }
    }
    Ok(out)
}

/// The entry parameters besides `cross` that a matmul reads and other ops read too (a cross layer's input `x`,
/// multiplied and added in the epilogue), within half the prefetch budget `cross` leaves, with the index of the
/// first of `kernels` reading them: that kernel streams such a parameter from HBM while the compiler copies it on
/// chip (`copy-start`) for every later reader. Evidence (dcn_cross.016 on tpu7x and v5e, dcn_cross.003 on v6e,
/// dcn_cross.001 on v5e, fit records): the input `args_6_` (f32[17408,102]) is read from HBM by the first cross
/// layer's fusion and through `copy-done.2` (`S(1)`) by the five later fusions reading it.
pub(super) fn streamed_once(
    g: &Graph<'_>,
    kernels: &[Group],
    cross: Option<usize>,
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<BTreeMap<usize, usize>, HloError> {
    let cross_bytes = match cross {
        Some(c) => sizer.shape(&g.nodes[c].ins.shape)?.padded_bytes,
        None => 0,
    };
    let left = chip.prefetch_budget_bytes.saturating_sub(cross_bytes);
    let mut out = BTreeMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let mixed = n.ins.opcode == "parameter"
            && n.param.is_some()
            && Some(i) != cross
            && g.users[i]
                .iter()
                .any(|&u| matches!(g.nodes[u].class, OpClass::Dot | OpClass::Convolution))
            && !read_by_matmuls_only(g, i);
        if !mixed || sizer.shape(&n.ins.shape)?.padded_bytes.saturating_mul(2) > left {
            continue;
        }
        if let Some(first) = kernels.iter().position(|k| k.inputs.contains(&i)) {
            out.insert(i, first);
        }
    }
    Ok(out)
}

/// Whether every reader of node `i` is a dot or convolution, directly or through one transpose, reshape or
/// bitcast whose readers all are.
pub(super) fn read_by_matmuls_only(g: &Graph<'_>, i: usize) -> bool {
    let mxu = |u: usize| matches!(g.nodes[u].class, OpClass::Dot | OpClass::Convolution);
    let through = |u: usize| {
        matches!(g.nodes[u].ins.opcode.as_str(), "transpose" | "reshape" | "bitcast")
            && !g.users[u].is_empty()
            && g.users[u].iter().all(|&v| mxu(v))
    };
    !g.users[i].is_empty() && g.users[i].iter().all(|&u| mxu(u) || through(u))
}
