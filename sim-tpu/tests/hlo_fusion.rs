//! Kernel grouping rules checked on small hand-written modules, with the expected kernels worked out by hand.

use sim_tpu::hlo::{cost_module, HloModule};
use sim_tpu::tensorcore::ChipModel;

fn kernels(text: &str) -> Vec<Vec<String>> {
    let m = HloModule::parse(text).unwrap();
    let c = cost_module(&m, &ChipModel::preset("v5p").unwrap()).unwrap();
    c.kernels.iter().map(|k| k.instructions.clone()).collect()
}

const ADD: &str = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n";

/// A normalisation gradient's row sums and column sums of one [4096,768] input: neither needs the other, both
/// walk the same 4096x768 elements, so the compiler emits one multi-output reduce kernel reading x once.
#[test]
fn sibling_reductions_of_one_buffer_share_a_kernel() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[4096,768]{{1,0}} parameter(0)\n  z = f32[] constant(0)\n  \
         rows = f32[4096]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add\n  \
         cols = f32[768]{{0}} reduce(x, z), dimensions={{0}}, to_apply=add\n  \
         ROOT t = (f32[4096]{{0}}, f32[768]{{0}}) tuple(rows, cols)\n}}\n"
    );
    let ks = kernels(&text);
    assert_eq!(ks.len(), 1, "{ks:?}");
    assert!(ks[0].contains(&"rows".to_string()) && ks[0].contains(&"cols".to_string()));
}

/// The second reduction reads the first one's result (mean, then variance around it): it depends on it, so
/// the two stay separate kernels.
#[test]
fn dependent_reductions_stay_apart() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[4096,768]{{1,0}} parameter(0)\n  z = f32[] constant(0)\n  \
         s = f32[4096]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add\n  \
         b = f32[4096,768]{{1,0}} broadcast(s), dimensions={{0}}\n  \
         d = f32[4096,768]{{1,0}} subtract(x, b)\n  \
         q = f32[4096,768]{{1,0}} multiply(d, d)\n  \
         ROOT v = f32[4096]{{0}} reduce(q, z), dimensions={{1}}, to_apply=add\n}}\n"
    );
    assert_eq!(kernels(&text).len(), 2);
}

/// Reductions of the same buffer over different iteration spaces (a slice of it) are not merged.
#[test]
fn reductions_over_different_spaces_stay_apart() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[4096,768]{{1,0}} parameter(0)\n  z = f32[] constant(0)\n  \
         rows = f32[4096]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add\n  \
         h = f32[2048,768]{{1,0}} slice(x), slice={{[0:2048], [0:768]}}\n  \
         e = f32[2048,768]{{1,0}} exponential(h)\n  \
         ROOT t = (f32[4096]{{0}}, f32[2048,768]{{1,0}}) tuple(rows, e)\n}}\n"
    );
    assert_eq!(kernels(&text).len(), 2);
}
