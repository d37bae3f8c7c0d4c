//! A kernel that only stores a value into a buffer (`dynamic-update-slice`s, and the reshapes before them) is
//! more outputs of the matmul kernel that computes the value: the compiler's output fusion writes the updates
//! from the result tiles (a multi-output `bitcast_dynamic-update-slice_fusion`), where tpusim's grouping gives
//! every update but the first a loop kernel of its own, each paying the whole loop launch.
//!
//! Evidence (compiler corpus, fit records' optimized modules): scan.003's forward body (the RNN step saving
//! `tanh(h W + x U)` and `1 - tanh^2` for the backward pass, four stacked f32[13,128,203] buffers) has on v6e
//! one kOutput fusion of 1,076 cycles computing the step's matmul and writing two stacked buffers and the
//! carry, and one kLoop fusion (2,251 cycles) storing the step's input carry, which no kernel of the body
//! computes; tpusim had three update kernels of 2,335 cycles each beside the matmul. The same on tpu7x (1,076
//! and 2,372) and in scan.002 (837x128: 1,234 and 2,666 on v6e).
//!
//! The stored value may be computed in the update kernel by cheap elementwise ops from the matmul kernel's
//! results: the compiler's output fusion computes `1 - tanh` beside the tanh and stores both (scan.003@v5e,
//! `fused_computation.clone.1`: convolution, tanh, `subtract(1, tanh)`, two dynamic-update-slices). tpusim had
//! that kernel merged only while the `1 - tanh` was mistaken for a consumer of the tuple's other elements
//! (`super::fusion`'s tuple-element reads); scan.001's held-out ratio on tpu7x went 1.26 -> 1.40 without it.
//!
//! Not merged: an update of a value no matmul kernel before it computes, or a kernel also reading a value
//! written after that matmul kernel.

use super::fusion::{merge_groups, Group, KernelKind, Producers};
use super::graph::Graph;
use super::ops::OpClass;

/// `groups` (in execution order) with every update kernel ([`target`]) merged into the matmul kernel that
/// computes what it stores, at the matmul kernel's place in the order.
pub(super) fn merge_updates(g: &Graph<'_>, groups: Vec<Group>) -> Vec<Group> {
    merge_groups(groups, |k, at, producer, kernels| target(g, k, at, producer, kernels)).0
}

/// The matmul kernel update kernel `k` (at `at`) joins, if any: `k` is a loop kernel of dynamic-update-slices
/// and pass-through ops only, and every value it reads that a kernel writes (what it stores) comes from one
/// matmul kernel before it; its other inputs (the buffers, the indices) are parameters or loop state.
fn target(g: &Graph<'_>, k: &Group, at: usize, producer: &Producers, kernels: &[Option<Group>]) -> Option<usize> {
    let is_update = |m: &usize| g.nodes[*m].ins.opcode == "dynamic-update-slice";
    // The stored value may be computed elementwise from the matmul kernel's results (`1 - tanh`).
    let moves = |m: &usize| {
        let n = &g.nodes[*m];
        matches!(n.class, OpClass::Free | OpClass::Elementwise)
            || matches!(n.ins.opcode.as_str(), "reshape" | "bitcast" | "broadcast")
    };
    if k.kind != KernelKind::Loop
        || !k.members.iter().any(is_update)
        || !k.members.iter().all(|m| is_update(m) || moves(m))
    {
        return None;
    }
    let mut mxu: Option<usize> = None;
    for i in &k.inputs {
        let Some(&p) = producer.get(i) else { continue };
        let is_mxu = kernels[p].as_ref().is_some_and(|x| x.kind == KernelKind::Mxu);
        if p >= at || !is_mxu || mxu.is_some_and(|m| m != p) {
            return None;
        }
        mxu = Some(p);
    }
    mxu
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::fusion::group;
    use crate::hlo::HloModule;

    /// A scan step: the carry `h` times `w`, tanh, stored into stacked buffer `a`, and `second` (`t`, the
    /// tanh again, as a scan saving residuals does; or `h`, the step's input carry) stored into `b`.
    fn step(second: &str) -> String {
        format!(
            r#"HloModule m

body {{
  p = (s32[], f32[128,256]{{1,0}}, f32[256,256]{{1,0}}, f32[8,128,256]{{2,1,0}}, f32[8,128,256]{{2,1,0}}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  h = f32[128,256]{{1,0}} get-tuple-element(p), index=1
  w = f32[256,256]{{1,0}} get-tuple-element(p), index=2
  a = f32[8,128,256]{{2,1,0}} get-tuple-element(p), index=3
  b = f32[8,128,256]{{2,1,0}} get-tuple-element(p), index=4
  one = s32[] constant(1)
  next = s32[] add(i, one)
  zero = s32[] constant(0)
  d = f32[128,256]{{1,0}} dot(h, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t = f32[128,256]{{1,0}} tanh(d)
  t1 = f32[1,128,256]{{2,1,0}} reshape(t)
  a2 = f32[8,128,256]{{2,1,0}} dynamic-update-slice(a, t1, i, zero, zero)
  t2 = f32[1,128,256]{{2,1,0}} reshape({second})
  b2 = f32[8,128,256]{{2,1,0}} dynamic-update-slice(b, t2, i, zero, zero)
  ROOT out = (s32[], f32[128,256]{{1,0}}, f32[256,256]{{1,0}}, f32[8,128,256]{{2,1,0}}, f32[8,128,256]{{2,1,0}}) tuple(next, t, w, a2, b2)
}}

ENTRY main {{
  ROOT x = f32[] constant(0)
}}
"#
        )
    }

    /// The kernels (kind and non-free members' names, sorted) of `text`'s body, before and after the merge.
    fn kernels(text: &str) -> [Vec<(KernelKind, Vec<String>)>; 2] {
        let m = HloModule::parse(text).unwrap();
        let g = Graph::build_computation(&m, m.computation_index("body").unwrap()).unwrap();
        let before = group(&g, &|_| 1 << 20).unwrap();
        let after = merge_updates(&g, before.clone());
        [before, after].map(|groups| {
            groups
                .iter()
                .map(|k| {
                    let mut names: Vec<String> = k
                        .members
                        .iter()
                        .filter(|&&n| g.nodes[n].class != OpClass::Free)
                        .map(|&n| g.nodes[n].ins.name.clone())
                        .collect();
                    names.sort();
                    (k.kind, names)
                })
                .filter(|(_, names)| !names.is_empty())
                .collect()
        })
    }

    /// The kind of the kernel computing node `name`.
    fn kind_of(ks: &[(KernelKind, Vec<String>)], name: &str) -> Option<KernelKind> {
        ks.iter().find(|(_, m)| m.iter().any(|x| x == name)).map(|(k, _)| *k)
    }

    #[test]
    fn a_second_store_of_a_matmul_result_joins_the_matmul_kernel() {
        let [before, after] = kernels(&step("t"));
        // tpusim's grouping stores the second copy in a loop kernel of its own.
        assert_eq!(kind_of(&before, "b2"), Some(KernelKind::Loop), "{before:?}");
        // Merged: one kernel computes the dot, the tanh and both stores; the counter's add is the other.
        assert_eq!(kind_of(&after, "b2"), Some(KernelKind::Mxu), "{after:?}");
        assert_eq!(after.len(), 2, "{after:?}");
        let mxu = after.iter().find(|(k, _)| *k == KernelKind::Mxu).unwrap();
        assert_eq!(mxu.1, ["a2", "b2", "d", "t", "t1", "t2"], "{after:?}");
    }

    #[test]
    fn a_store_of_a_value_computed_elementwise_from_a_matmul_result_joins_it() {
        // The second store writes `u = 1 - t` (a scan saving `1 - tanh` for its backward pass).
        let text = step("u").replace(
            "  t2 =",
            "  c1 = f32[] constant(1)\n  c1b = f32[128,256]{1,0} broadcast(c1), dimensions={}\n  \
             u = f32[128,256]{1,0} subtract(c1b, t)\n  t2 =",
        );
        let [before, after] = kernels(&text);
        // tpusim's grouping computes `u` and stores it in a loop kernel of its own.
        assert_eq!(kind_of(&before, "u"), Some(KernelKind::Loop), "{before:?}");
        // Merged: the matmul kernel computes `u` beside the tanh and stores both; the counter's add is the other.
        assert_eq!(after.len(), 2, "{after:?}");
        let mxu = after.iter().find(|(k, _)| *k == KernelKind::Mxu).unwrap();
        assert_eq!(mxu.1, ["a2", "b2", "c1b", "d", "t", "t1", "t2", "u"], "{after:?}");
    }

    #[test]
    fn a_store_of_a_value_no_kernel_computes_stays_its_own_kernel() {
        // The second store writes the input carry `h` (loop state): no matmul kernel computes it.
        let [before, after] = kernels(&step("h"));
        assert_eq!(kind_of(&before, "b2"), Some(KernelKind::Loop), "{before:?}");
        assert_eq!(after, before);
    }
}
