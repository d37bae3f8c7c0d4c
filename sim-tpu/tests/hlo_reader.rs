//! The HLO reader and the kernel model on hand-written modules: errors with line and column, no panic on any
//! input, sizes and FLOPs derived by hand, and the fusion rule on small graphs.

use proptest::prelude::*;
use sim_tpu::hlo::{cost_module, HloError, HloModule, KernelKind};
use sim_tpu::tensorcore::ChipModel;

fn v5e() -> ChipModel {
    ChipModel::preset("v5e").unwrap()
}

fn module(body: &str) -> String {
    format!("HloModule m, entry_computation_layout={{()->f32[]}}\n\nENTRY main {{\n{body}}}\n")
}

fn err(text: &str) -> HloError {
    HloModule::parse(text).unwrap_err()
}

#[test]
fn malformed_text_names_line_and_column() {
    // Missing `=` after the name on line 4.
    let e = err(&module("  a = f32[2]{0} parameter(0)\n  b f32[2]{0} negate(a)\n"));
    assert_eq!(e.position(), Some((5, 5)), "{e}");
    // Unknown operand, pointed at where it is written.
    let e = err(&module(
        "  a = f32[2]{0} parameter(0)\n  ROOT b = f32[2]{0} negate(zz)\n",
    ));
    assert_eq!(e.position(), Some((5, 29)), "{e}");
    assert!(e.to_string().contains("zz"), "{e}");
    // Bad shape: a dimension that is not a number.
    let e = err(&module("  a = f32[2,x]{1,0} parameter(0)\n"));
    assert_eq!(e.position().map(|p| p.0), Some(4), "{e}");
    // Not HLO at all.
    assert_eq!(err("hello").position(), Some((1, 1)));
    // Unterminated computation.
    assert!(matches!(
        err("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n"),
        HloError::Parse { .. }
    ));
    // A call to a computation that does not exist.
    let e = err(&module(
        "  a = f32[] parameter(0)\n  ROOT c = f32[] call(a), to_apply=nowhere\n",
    ));
    assert!(e.to_string().contains("nowhere") && e.position().is_some(), "{e}");
    // Duplicate names.
    let e = err(&module("  a = f32[] parameter(0)\n  a = f32[] parameter(1)\n"));
    assert!(e.to_string().contains("twice"), "{e}");
}

#[test]
fn comments_strings_and_large_literals_are_read() {
    let text = module(concat!(
        "  p = (f32[2]{0}, /*index=1*/s32[]) parameter(0), metadata={op_name=\"a /* not a comment */ b\"}\n",
        "  c = f32[2,3]{1,0} constant({ {1, 2, 3}, {4, 5, 6} })\n",
        "  ROOT t = (f32[2,3]{1,0}, f32[]) tuple(c, /*index=1*/c), backend_config={\"x\":{\"y\":[1,2]}}\n",
    ));
    let m = HloModule::parse(&text).unwrap();
    let e = m.entry_computation();
    assert_eq!(e.instructions.len(), 3);
    assert_eq!(
        e.instructions[0].attr("metadata"),
        Some("{op_name=\"a /* not a comment */ b\"}")
    );
    assert_eq!(e.root, 2);
    assert_eq!(HloModule::parse(&m.to_string()).unwrap(), m);
}

#[test]
fn sizes_follow_tpu_layouts() {
    // f32[3,5] -> {1,0:T(4,128)}: 4 x 128 x 4 B = 2048 B. bf16[1000] -> T(1024): 2048 B.
    // Result f32[3,5] alone (no tuple table).
    let text = module(
        "  a = f32[3,5]{1,0} parameter(0)\n  b = bf16[1000]{0} parameter(1)\n  ROOT n = f32[3,5]{1,0} negate(a)\n",
    );
    let c = cost_module(&HloModule::parse(&text).unwrap(), &v5e()).unwrap();
    assert_eq!(c.argument_bytes, 2048 + 2048);
    assert_eq!(c.output_bytes, 2048);
    // A tuple result adds its index table: 512 B on v5e; 4 B x 2 -> 32 B on v6e.
    let t = module("  a = f32[3,5]{1,0} parameter(0)\n  ROOT t = (f32[3,5]{1,0}, f32[3,5]{1,0}) tuple(a, a)\n");
    let m = HloModule::parse(&t).unwrap();
    assert_eq!(cost_module(&m, &v5e()).unwrap().output_bytes, 2 * 2048 + 512);
    assert_eq!(
        cost_module(&m, &ChipModel::preset("v6e").unwrap())
            .unwrap()
            .output_bytes,
        2 * 2048 + 32
    );
}

#[test]
fn elementwise_chains_fuse_and_dots_take_their_epilogue() {
    // relu(x @ w + b): one MXU kernel with the bias add and max; then exp over the result: a loop kernel.
    let text = module(concat!(
        "  x = bf16[512,256]{1,0} parameter(0)\n",
        "  w = bf16[256,1024]{1,0} parameter(1)\n",
        "  b = bf16[1024]{0} parameter(2)\n",
        "  d = bf16[512,1024]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n",
        "  bb = bf16[512,1024]{1,0} broadcast(b), dimensions={1}\n",
        "  s = bf16[512,1024]{1,0} add(d, bb)\n",
        "  z = bf16[] constant(0)\n",
        "  zb = bf16[512,1024]{1,0} broadcast(z), dimensions={}\n",
        "  r = bf16[512,1024]{1,0} maximum(s, zb)\n",
        "  y = f32[512,1024]{1,0} convert(r)\n",
        "  zero = f32[] constant(0)\n",
        "  ROOT red = f32[512]{0} reduce(y, zero), dimensions={1}, to_apply=add\n",
        "}\n\nadd {\n  p0 = f32[] parameter(0)\n  p1 = f32[] parameter(1)\n  ROOT s = f32[] add(p0, p1)\n",
    ));
    let m = HloModule::parse(&text).unwrap();
    let c = cost_module(&m, &v5e()).unwrap();
    // The dot's only consumer chain ends in the reduction: one kernel (as the compiler's output fusions).
    assert_eq!(c.kernels.len(), 1, "{:?}", c.kernels);
    assert_eq!(c.kernels[0].kind, KernelKind::Mxu);
    assert_eq!(c.kernels[0].flops, 2 * 512 * 256 * 1024 + 3 * 512 * 1024 + 512 * 1024);
    assert_eq!(c.temp_bytes, 0);
}

#[test]
fn shared_operands_and_unmodelled_ops() {
    // exp(x) used by two reductions is computed once, by one of them (a multi-output fusion), and read by the
    // other. The sort is unmodelled: listed, and costed above zero.
    let text = module(concat!(
        "  x = f32[1024,1024]{1,0} parameter(0)\n",
        "  e = f32[1024,1024]{1,0} exponential(x)\n",
        "  zero = f32[] constant(0)\n",
        "  s1 = f32[1024]{0} reduce(e, zero), dimensions={1}, to_apply=add\n",
        "  s2 = f32[1024]{0} reduce(e, zero), dimensions={0}, to_apply=add\n",
        "  so = f32[1024]{0} sort(s1), dimensions={0}, to_apply=add\n",
        "  ROOT t = (f32[1024]{0}, f32[1024]{0}) tuple(so, s2)\n",
        "}\n\nadd {\n  p0 = f32[] parameter(0)\n  p1 = f32[] parameter(1)\n  ROOT s = f32[] add(p0, p1)\n",
    ));
    let c = cost_module(&HloModule::parse(&text).unwrap(), &v5e()).unwrap();
    let with_exp: Vec<_> = c
        .kernels
        .iter()
        .filter(|k| k.instructions.contains(&"e".to_string()))
        .collect();
    assert_eq!(with_exp.len(), 1, "{:?}", c.kernels);
    assert_eq!(c.unmodelled.get("sort"), Some(&1));
    let sort = c.kernels.iter().find(|k| k.kind == KernelKind::Unmodelled).unwrap();
    assert!(sort.cycles > 0);
    // exp's 4 MiB result lives between the two reductions: it is a temporary unless kept in VMEM.
    assert!(c.temp_bytes <= 4 << 20);
}

#[test]
fn calls_are_inlined() {
    let text = "HloModule m\n\nf {\n  a = f32[8,128]{1,0} parameter(0)\n  ROOT n = f32[8,128]{1,0} negate(a)\n}\n\n\
                ENTRY main {\n  x = f32[8,128]{1,0} parameter(0)\n  c = f32[8,128]{1,0} call(x), to_apply=f\n  \
                ROOT e = f32[8,128]{1,0} exponential(c)\n}\n";
    let c = cost_module(&HloModule::parse(text).unwrap(), &v5e()).unwrap();
    assert_eq!(c.kernels.len(), 1);
    assert_eq!(c.kernels[0].instructions, vec!["n".to_string(), "e".to_string()]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_text_gives_a_module_or_an_error(s in "\\PC{0,200}") {
        let _ = HloModule::parse(&s);
    }

    #[test]
    fn hlo_like_text_gives_a_module_or_an_error(
        parts in proptest::collection::vec(prop_oneof![
            Just("HloModule m\n"), Just("ENTRY e {\n"), Just("}\n"), Just("  a = f32[2]{0} parameter(0)\n"),
            Just("  ROOT b = f32[2]{0} add(a, a)\n"), Just("/*"), Just("*/"), Just("\""), Just("{"), Just("("),
            Just("f32[99999999999,99999999999]"), Just(", to_apply=e"), Just("  c = (f32[], s32[]) tuple(a)\n"),
            Just("  d = f32[2]{0} call(a), to_apply=e\n"), Just("constant({1,2})"), Just("=")], 0..24)
    ) {
        let text: String = parts.concat();
        if let Ok(m) = HloModule::parse(&text) {
            let _ = cost_module(&m, &v5e());
        }
    }
}

#[test]
fn recursive_and_exploding_calls_are_refused() {
    let rec = "HloModule m\n\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT c = f32[] call(a), to_apply=e\n}\n";
    let e = cost_module(&HloModule::parse(rec).unwrap(), &v5e()).unwrap_err();
    assert!(e.to_string().contains("calls itself"), "{e}");
    // 40 levels of two calls each would be 2^40 inlined instructions.
    let mut text = String::from("HloModule m\n\nf0 {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a)\n}\n");
    for i in 1..40 {
        text += &format!(
            "\nf{i} {{\n  a = f32[] parameter(0)\n  b = f32[] call(a), to_apply=f{p}\n  ROOT c = f32[] call(b), to_apply=f{p}\n}}\n",
            p = i - 1
        );
    }
    text += "\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT c = f32[] call(a), to_apply=f39\n}\n";
    let e = cost_module(&HloModule::parse(&text).unwrap(), &v5e()).unwrap_err();
    assert!(e.to_string().contains("instructions after inlining"), "{e}");
}

#[test]
fn what_if_chips_scale_the_right_rates() {
    use sim_tpu::chips::Chip;
    let chip_model = ChipModel::for_chip;
    let base = Chip::preset("v5e").unwrap();
    let m0 = chip_model(&base).unwrap();
    assert_eq!(m0, ChipModel::preset("v5e").unwrap());
    let hbm = base.spec.hbm_bytes_per_s * 2;
    let fast = base
        .clone()
        .with_overrides(&serde_json::json!({ "hbm_bytes_per_s": hbm }))
        .unwrap();
    let m1 = chip_model(&fast).unwrap();
    assert!((m1.hbm.op_stream_bytes_per_cycle / m0.hbm.op_stream_bytes_per_cycle - 2.0).abs() < 1e-9);
    assert!((m1.hbm.hlo_stream_bytes_per_cycle / m0.hbm.hlo_stream_bytes_per_cycle - 2.0).abs() < 1e-9);
    assert_eq!(m1.mxu, m0.mxu);
    let wide = base
        .clone()
        .with_overrides(&serde_json::json!({ "mxus_per_tensorcore": 8 }))
        .unwrap();
    assert_eq!(chip_model(&wide).unwrap().mxu.count, 2 * m0.mxu.count);
    // A zero rate is refused where the chip file is read, naming the field.
    let zero = base.with_overrides(&serde_json::json!({ "hbm_bytes_per_s": 0 }));
    assert!(zero.is_err_and(|e| e.to_string().contains("hbm_bytes_per_s")));
}
