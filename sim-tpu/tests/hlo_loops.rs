//! `while` loops: a counted loop costs its body times the trip count read from the loop, state passed
//! through unchanged costs nothing, and a loop whose count cannot be read is one trip, listed as unmodelled.

use sim_tpu::hlo::{cost_module, HloModule, KernelKind, ModuleCost};
use sim_tpu::tensorcore::ChipModel;

/// A scan-like loop: counter `i` from `start`, `i DIR limit` in the condition, `i + step` in the body; each
/// trip multiplies the carried [128,512] activations by a [512,512] weight and applies tanh; a [4096,512]
/// array rides along untouched.
fn scan(start: &str, limit: &str, direction: &str, step: &str) -> String {
    format!(
        r#"HloModule scan

body {{
  p = (s32[], f32[128,512]{{1,0}}, f32[512,512]{{1,0}}, f32[4096,512]{{1,0}}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  step = s32[] constant({step})
  next = s32[] add(i, step)
  h = f32[128,512]{{1,0}} get-tuple-element(p), index=1
  w = f32[512,512]{{1,0}} get-tuple-element(p), index=2
  big = f32[4096,512]{{1,0}} get-tuple-element(p), index=3
  d = f32[128,512]{{1,0}} dot(h, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t = f32[128,512]{{1,0}} tanh(d)
  ROOT out = (s32[], f32[128,512]{{1,0}}, f32[512,512]{{1,0}}, f32[4096,512]{{1,0}}) tuple(next, t, w, big)
}}

cond {{
  p = (s32[], f32[128,512]{{1,0}}, f32[512,512]{{1,0}}, f32[4096,512]{{1,0}}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({limit})
  ROOT c = pred[] compare(i, n), direction={direction}
}}

ENTRY main {{
  s = s32[] constant({start})
  h0 = f32[128,512]{{1,0}} parameter(0)
  w0 = f32[512,512]{{1,0}} parameter(1)
  b0 = f32[4096,512]{{1,0}} parameter(2)
  init = (s32[], f32[128,512]{{1,0}}, f32[512,512]{{1,0}}, f32[4096,512]{{1,0}}) tuple(s, h0, w0, b0)
  loop = (s32[], f32[128,512]{{1,0}}, f32[512,512]{{1,0}}, f32[4096,512]{{1,0}}) while(init), condition=cond, body=body
  ROOT r = f32[128,512]{{1,0}} get-tuple-element(loop), index=1
}}
"#
    )
}

fn cost(text: &str) -> ModuleCost {
    cost_module(&HloModule::parse(text).unwrap(), &ChipModel::preset("v5e").unwrap()).unwrap()
}

/// The loop's kernel.
fn while_kernel(c: &ModuleCost) -> &sim_tpu::hlo::KernelCost {
    c.kernels
        .iter()
        .find(|k| k.kind == KernelKind::While)
        .expect("a while kernel")
}

#[test]
fn a_counted_loop_costs_its_body_times_the_trip_count() {
    let one = cost(&scan("0", "1", "LT", "1"));
    let per_trip = while_kernel(&one).cycles;
    assert!(per_trip > 0);
    assert!(one.unmodelled.is_empty(), "{:?}", one.unmodelled);
    // Trip counts worked by hand: [0, 16) by 1, [0, 16] by 1, [4, 16) by 1, [0, 16) by 3 (0, 3, ..., 15),
    // 16 down to 0 (exclusive) by -2, and a loop that never runs.
    for (start, limit, dir, step, trips) in [
        ("0", "16", "LT", "1", 16),
        ("0", "16", "LE", "1", 17),
        ("4", "16", "LT", "1", 12),
        ("0", "16", "LT", "3", 6),
        ("16", "0", "GT", "-2", 8),
        ("0", "16", "NE", "2", 8),
        ("5", "5", "LT", "1", 0),
    ] {
        let c = cost(&scan(start, limit, dir, step));
        let k = while_kernel(&c);
        assert_eq!(k.cycles, per_trip * trips, "{start} {dir} {limit} step {step}");
        assert_eq!(k.flops, while_kernel(&one).flops * trips);
        assert!(c.unmodelled.is_empty());
    }
    // Each trip is at least the dot's FLOPs: 2 x 128 x 512 x 512.
    assert!(while_kernel(&one).flops >= 2 * 128 * 512 * 512);
}

#[test]
fn state_passed_through_is_not_moved() {
    let c = cost(&scan("0", "1", "LT", "1"));
    // One trip reads h and w and writes t: about 0.25 + 1 + 0.25 MiB, never the 8 MiB array riding along.
    let k = while_kernel(&c);
    assert!(k.hbm_bytes < 4 << 20, "{} bytes", k.hbm_bytes);
}

#[test]
fn a_loop_whose_count_cannot_be_read_is_one_trip_and_unmodelled() {
    let one = cost(&scan("0", "1", "LT", "1"));
    // The limit is a parameter: unknown before the program runs.
    let text = scan("0", "1", "LT", "1")
        .replace("n = s32[] constant(1)", "n = s32[] get-tuple-element(p), index=0")
        .replace("direction=LT", "direction=NE");
    let c = cost(&text);
    assert_eq!(c.unmodelled.get("while"), Some(&1));
    assert_eq!(while_kernel(&c).cycles, while_kernel(&one).cycles);
}

/// A two-branch conditional (`lax.cond`): a [256,512] x [512,512] matmul with tanh, or a doubling.
fn cond(branches: &str) -> String {
    format!(
        r#"HloModule cond

heavy {{
  p = (f32[256,512]{{1,0}}, f32[512,512]{{1,0}}) parameter(0)
  x = f32[256,512]{{1,0}} get-tuple-element(p), index=0
  w = f32[512,512]{{1,0}} get-tuple-element(p), index=1
  d = f32[256,512]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT t = f32[256,512]{{1,0}} tanh(d)
}}

light {{
  p = (f32[256,512]{{1,0}}, f32[512,512]{{1,0}}) parameter(0)
  x = f32[256,512]{{1,0}} get-tuple-element(p), index=0
  two = f32[] constant(2)
  b = f32[256,512]{{1,0}} broadcast(two), dimensions={{}}
  ROOT m = f32[256,512]{{1,0}} multiply(x, b)
}}

ENTRY main {{
  x0 = f32[256,512]{{1,0}} parameter(0)
  w0 = f32[512,512]{{1,0}} parameter(1)
  i = s32[] parameter(2)
  ops = (f32[256,512]{{1,0}}, f32[512,512]{{1,0}}) tuple(x0, w0)
  ROOT c = f32[256,512]{{1,0}} conditional(i, ops, ops), branch_computations={{{branches}}}
}}
"#
    )
}

/// The heavy branch as a program of its own, its operands in one tuple parameter as the branch gets them (so no
/// entry parameter feeds the dot directly and none is prefetched across programs, which a branch never is).
const HEAVY_ALONE: &str = r#"HloModule heavy

ENTRY main {
  p = (f32[256,512]{1,0}, f32[512,512]{1,0}) parameter(0)
  x = f32[256,512]{1,0} get-tuple-element(p), index=0
  w = f32[512,512]{1,0} get-tuple-element(p), index=1
  d = f32[256,512]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[256,512]{1,0} tanh(d)
}
"#;

#[test]
fn a_conditional_costs_its_most_expensive_branch_whatever_the_order() {
    let alone = cost(HEAVY_ALONE).total_cycles;
    for order in ["heavy, light", "light, heavy", "%light, %heavy, %light"] {
        let c = cost(&cond(order));
        let k = c
            .kernels
            .iter()
            .find(|k| k.kind == KernelKind::Conditional)
            .expect("a conditional kernel");
        assert_eq!(k.cycles, alone, "{order}");
        // The matmul's FLOPs: 2 x 256 x 512 x 512 (plus the tanh's elements).
        assert!(k.flops >= 2 * 256 * 512 * 512, "{}", k.flops);
        assert_eq!(c.unmodelled.get("conditional"), Some(&1));
    }
    // The older spelling: a predicate with true and false computations.
    let text = cond("light, heavy")
        .replace("i = s32[] parameter(2)", "i = pred[] parameter(2)")
        .replace(
            "branch_computations={light, heavy}",
            "true_computation=light, false_computation=heavy",
        );
    let c = cost(&text);
    assert_eq!(c.kernels.iter().map(|k| k.cycles).max(), Some(alone));
}

/// Loops nested 12 deep, each body running the next level's loop twice: each computation is costed once, so
/// this is quick, and the count multiplies out: 4 trips x 2 loops per level.
#[test]
fn nested_loops_are_costed_once_per_computation() {
    let st = "(s32[], f32[128,128]{1,0})";
    let cond = format!(
        "cnd {{\n  p = {st} parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(4)\n  \
         ROOT c = pred[] compare(i, n), direction=LT\n}}\n"
    );
    let head = |l: usize| {
        format!(
            "b{l} {{\n  p = {st} parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  one = s32[] constant(1)\n  \
             j = s32[] add(i, one)\n  x = f32[128,128]{{1,0}} get-tuple-element(p), index=1\n"
        )
    };
    let levels = 12;
    let mut text = format!("HloModule nest\n\n{cond}\n");
    text += &format!(
        "{}  y = f32[128,128]{{1,0}} dot(x, x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  ROOT r = {st} tuple(j, y)\n}}\n\n",
        head(levels)
    );
    for l in (0..levels).rev() {
        text += &format!(
            "{}  z = s32[] constant(0)\n  t0 = {st} tuple(z, x)\n  w0 = {st} while(t0), condition=cnd, body=b{n}\n  \
             x1 = f32[128,128]{{1,0}} get-tuple-element(w0), index=1\n  t1 = {st} tuple(z, x1)\n  \
             w1 = {st} while(t1), condition=cnd, body=b{n}\n  x2 = f32[128,128]{{1,0}} get-tuple-element(w1), index=1\n  \
             ROOT r = {st} tuple(j, x2)\n}}\n\n",
            head(l),
            n = l + 1
        );
    }
    text += &format!(
        "ENTRY main {{\n  x = f32[128,128]{{1,0}} parameter(0)\n  z = s32[] constant(0)\n  t = {st} tuple(z, x)\n  \
         w = {st} while(t), condition=cnd, body=b0\n  ROOT o = f32[128,128]{{1,0}} get-tuple-element(w), index=1\n}}\n"
    );
    let c = cost(&text);
    // Innermost dots: 4 trips at the entry, then (2 loops x 4 trips) per level, 12 levels.
    let dots = 4u64 * 8u64.pow(levels as u32);
    assert_eq!(c.kernels.len(), 1);
    assert!(
        c.kernels[0].flops >= dots * 2 * 128 * 128 * 128,
        "{}",
        c.kernels[0].flops
    );
    // A body that runs a loop over itself never ends: refused, not costed for ever.
    let recursive = text.replace("body=b1\n", "body=b0\n");
    let e = cost_module(
        &HloModule::parse(&recursive).unwrap(),
        &ChipModel::preset("v5e").unwrap(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("nested deeper"), "{e}");
}

/// A function called twice is inlined twice: its kernels keep their instruction's name, the second copy's
/// marked `#2`, so the op profile never lists two kernels under one name.
#[test]
fn kernels_of_a_function_called_twice_have_distinct_names() {
    let text = r#"HloModule twice

scale {
  x = f32[256,512]{1,0} parameter(0)
  e = f32[256,512]{1,0} exponential(x)
  zero = f32[] constant(0)
  ROOT s = f32[256]{0} reduce(e, zero), dimensions={1}, to_apply=add
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  x = f32[256,512]{1,0} parameter(0)
  y = f32[256,512]{1,0} parameter(1)
  s1 = f32[256]{0} call(x), to_apply=scale
  s2 = f32[256]{0} call(y), to_apply=scale
  ROOT t = (f32[256]{0}, f32[256]{0}) tuple(s1, s2)
}
"#;
    let c = cost(text);
    let mut names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["s", "s#2"]);
}
