//! `tpusim hlo`: a reduction computed twice over the same value (jax's `var(x)` recomputes `mean(x)`) is computed
//! once, as the compiler's common-subexpression pass does (`hlo::cse`; corpus resnet_block.010: one sum per
//! convolution result where the program sums it twice). The modules are written by hand here, their kernels and
//! bytes worked out in the test.

use sim_tpu::hlo::KernelKind;

mod support;
use support::hlo::cost_on;

/// `e = exp(x)` over f32[512,1024], summed over its rows in the entry (`s`) and again inside a called
/// computation (`s2`, with its own reducer `add2`, of the same opcodes), which negates it; `reducer` is `s2`'s
/// reducer's root opcode and `dims` its dimensions.
fn module(reducer: &str, dims: &str, out: &str) -> String {
    format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         add2 {{\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT r = f32[] {reducer}(p, q)\n}}\n\n\
         var {{\n  x = f32[512,1024]{{1,0}} parameter(0)\n  z2 = f32[] constant(0)\n  \
         s2 = {out} reduce(x, z2), dimensions={{{dims}}}, to_apply=add2\n  ROOT n2 = {out} negate(s2)\n}}\n\n\
         ENTRY main {{\n  x = f32[512,1024]{{1,0}} parameter(0)\n  e = f32[512,1024]{{1,0}} exponential(x)\n  \
         z = f32[] constant(0)\n  s = f32[1024]{{0}} reduce(e, z), dimensions={{0}}, to_apply=add\n  \
         c = {out} call(e), to_apply=var\n  ROOT o = (f32[1024]{{0}}, {out}) tuple(s, c)\n}}\n"
    )
}

/// x is 512 x 1,024 x 4 B = 2,097,152 B; a f32[1024] vector 4,096 B.
const X_BYTES: u64 = 2_097_152;
const V_BYTES: u64 = 4_096;

/// The repeated sum is merged into the first: one reduce kernel reading x and writing `s`, then the negation, a
/// loop over the 4 KiB sum only (read and written). Without the rule a second reduce kernel read x again.
#[test]
fn a_reduction_repeated_in_a_called_computation_is_computed_once() {
    for chip in ["v5e", "v6e", "v4", "v5p", "tpu7x"] {
        let c = cost_on(&module("add", "0", "f32[1024]{0}"), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["s", "n2"], "{chip}");
        assert_eq!(c.kernels[0].kind, KernelKind::Reduce, "{chip}");
        assert_eq!(c.kernels[0].hbm_bytes, X_BYTES + V_BYTES, "{chip}");
        assert_eq!(c.kernels[1].kind, KernelKind::Loop, "{chip}");
        assert_eq!(c.kernels[1].hbm_bytes, 2 * V_BYTES, "{chip}");
    }
}

/// A reduction with another reducer (`maximum`) or over other dimensions is another value: `s2` is still
/// computed (in a kernel of its own or beside `s`, which reads the same `e`), where the merged one is in none.
#[test]
fn reductions_with_another_reducer_or_dimensions_are_kept() {
    let computes = |text: &str, name: &str| {
        cost_on(text, "v5e")
            .kernels
            .iter()
            .any(|k| k.instructions.iter().any(|i| i == name))
    };
    assert!(!computes(&module("add", "0", "f32[1024]{0}"), "s2"));
    for (reducer, dims, out) in [("maximum", "0", "f32[1024]{0}"), ("add", "1", "f32[512]{0}")] {
        let text = module(reducer, dims, out);
        assert!(computes(&text, "s2"), "{reducer} over {dims}");
        assert!(computes(&text, "s"), "{reducer} over {dims}");
    }
}
