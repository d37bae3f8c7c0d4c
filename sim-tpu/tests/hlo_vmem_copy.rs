//! Per-device memory of optimized modules: a value the compiler copied into VMEM (`copy-start`/`copy-done` with
//! an `S(1)` result) frees its HBM buffer once copied (`hlo::vmem_copy`). Worked by hand on a chain of four
//! bf16[1024,1024] matmuls (2 MiB each).

use sim_tpu::hlo::{cost_module, HloModule};
use sim_tpu::tensorcore::ChipModel;

const MIB2: u64 = 2 << 20;

/// `a = p0 x p1`, `b = a x p1`, `c = A x b`, `d = A x c` (the tuple's one output), where `A` is `a` read
/// directly or through an on-chip copy.
fn module(copied: bool) -> String {
    let dot = "lhs_contracting_dims={1}, rhs_contracting_dims={0}";
    let a_read = if copied { "cd" } else { "a" };
    let copy = if copied {
        "  cs = (bf16[1024,1024]{1,0:S(1)}, bf16[1024,1024]{1,0}, u32[]) copy-start(a)\n  \
         cd = bf16[1024,1024]{1,0:S(1)} copy-done(cs)\n"
    } else {
        ""
    };
    format!(
        "HloModule m\n\nENTRY main {{\n  p0 = bf16[1024,1024]{{1,0}} parameter(0)\n  \
         p1 = bf16[1024,1024]{{1,0}} parameter(1)\n  a = bf16[1024,1024]{{1,0}} dot(p0, p1), {dot}\n  \
         b = bf16[1024,1024]{{1,0}} dot(a, p1), {dot}\n{copy}  c = bf16[1024,1024]{{1,0}} dot({a_read}, b), {dot}\n  \
         d = bf16[1024,1024]{{1,0}} dot({a_read}, c), {dot}\n  ROOT t = (bf16[1024,1024]{{1,0}}) tuple(d)\n}}\n"
    )
}

#[test]
fn a_value_copied_on_chip_leaves_hbm_once_copied() {
    // Kernels a, b, c, d in that order (each reads the one before). Read directly, `a` lives in HBM until d:
    // while c runs, a, b and c are live (6 MiB). Copied on chip before c, its HBM buffer is free after b, the last
    // kernel reading it from HBM: while c runs only b and c are (4 MiB); d's result is the output. One buffer less.
    let chip = ChipModel::preset("v5p").unwrap();
    let cost = |copied| cost_module(&HloModule::parse(&module(copied)).unwrap(), &chip).unwrap();
    let (direct, copied) = (cost(false), cost(true));
    assert_eq!(direct.kernels.len(), 4, "{:?}", direct.kernels);
    assert_eq!(copied.kernels.len(), 4, "{:?}", copied.kernels);
    assert_eq!(direct.temp_bytes - copied.temp_bytes, MIB2);
}

#[test]
fn a_value_also_read_directly_after_its_copy_stays_in_hbm() {
    // If d reads `a` from HBM (not the copy), its buffer lives to d as before: the same temp as with no copy.
    let chip = ChipModel::preset("v5p").unwrap();
    let text = module(true).replace("dot(cd, c)", "dot(a, c)");
    let mixed = cost_module(&HloModule::parse(&text).unwrap(), &chip).unwrap();
    let direct = cost_module(&HloModule::parse(&module(false)).unwrap(), &chip).unwrap();
    assert_eq!(mixed.temp_bytes, direct.temp_bytes);
}
