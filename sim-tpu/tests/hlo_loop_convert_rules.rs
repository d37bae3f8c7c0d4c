//! f32 loop inputs converted to bf16 once, before the loop (`hlo::loop_convert`): an entry parameter a `while`
//! body passes through and reads only as a default-precision matmul operand gets one `convert` kernel before
//! the loop, timed as the same convert written in the program; on v4 the bf16 copy sits in CMEM and the body
//! reads it with no HBM bytes.

use sim_tpu::hlo::{cost_module, HloModule, KernelCost, KernelKind, ModuleCost};
use sim_tpu::tensorcore::ChipModel;

/// A scan of 8 steps: state 0 the counter; 1 the carry h f32[128,256] (from a parameter, rewritten);
/// 2 weights w f32[256,256] (a parameter passed through, read only by a default-precision dot: converted);
/// 3 a bias b f32[128,256] (a parameter passed through, read by an add: kept f32); 4 weights v f32[256,256]
/// (a parameter passed through, read only by a dot at highest precision: kept f32).
const SCAN: &str = r#"HloModule scan

body {
  p = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  h = f32[128,256]{1,0} get-tuple-element(p), index=1
  w = f32[256,256]{1,0} get-tuple-element(p), index=2
  b = f32[128,256]{1,0} get-tuple-element(p), index=3
  v = f32[256,256]{1,0} get-tuple-element(p), index=4
  d = f32[128,256]{1,0} dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[128,256]{1,0} dot(h, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
  s = f32[128,256]{1,0} add(d, e)
  a = f32[128,256]{1,0} add(s, b)
  t = f32[128,256]{1,0} tanh(a)
  ROOT out = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) tuple(next, t, w, b, v)
}

cond {
  p = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(8)
  ROOT c = pred[] compare(i, n), direction=LT
}

ENTRY main {
  z = s32[] constant(0)
  h0 = f32[128,256]{1,0} parameter(0)
  w0 = f32[256,256]{1,0} parameter(1)
  b0 = f32[128,256]{1,0} parameter(2)
  v0 = f32[256,256]{1,0} parameter(3)
  init = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) tuple(z, h0, w0, b0, v0)
  loop = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) while(init), condition=cond, body=body
  ROOT r = f32[128,256]{1,0} get-tuple-element(loop), index=1
}
"#;

/// Two loops over the same weights: the second starts from the first's h.
fn two_loops() -> String {
    let entry = SCAN.find("ENTRY main").unwrap();
    format!(
        "{}{}",
        &SCAN[..entry],
        r#"ENTRY main {
  z = s32[] constant(0)
  h0 = f32[128,256]{1,0} parameter(0)
  w0 = f32[256,256]{1,0} parameter(1)
  b0 = f32[128,256]{1,0} parameter(2)
  v0 = f32[256,256]{1,0} parameter(3)
  init = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) tuple(z, h0, w0, b0, v0)
  loop = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) while(init), condition=cond, body=body
  h1 = f32[128,256]{1,0} get-tuple-element(loop), index=1
  init2 = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) tuple(z, h1, w0, b0, v0)
  loop2 = (s32[], f32[128,256]{1,0}, f32[256,256]{1,0}, f32[128,256]{1,0}, f32[256,256]{1,0}) while(init2), condition=cond, body=body
  ROOT r = f32[128,256]{1,0} get-tuple-element(loop2), index=1
}
"#
    )
}

/// The same convert written in a program of its own: the op model's unfused convert.
const CONVERT: &str = r#"HloModule convert

ENTRY main {
  w0 = f32[256,256]{1,0} parameter(0)
  ROOT c = bf16[256,256]{1,0} convert(w0)
}
"#;

fn cost(text: &str, chip: &str) -> ModuleCost {
    cost_module(&HloModule::parse(text).unwrap(), &ChipModel::preset(chip).unwrap()).unwrap()
}

fn while_kernel(c: &ModuleCost) -> &KernelCost {
    c.kernels
        .iter()
        .find(|k| k.kind == KernelKind::While)
        .expect("a while kernel")
}

/// The kernels before the loop.
fn before_loop(c: &ModuleCost) -> Vec<&KernelCost> {
    c.kernels.iter().take_while(|k| k.kind != KernelKind::While).collect()
}

/// f32[256,256] in (8,128) tiles: 256 x 256 x 4 bytes, no padding; its bf16 copy in (16,128) tiles: half.
const W_F32: u64 = 256 * 256 * 4;
const W_BF16: u64 = 256 * 256 * 2;
/// One f32[128,256] array.
const H: u64 = 128 * 256 * 4;

#[test]
fn only_the_weights_read_by_a_default_precision_dot_are_converted_before_the_loop() {
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let c = cost(SCAN, chip);
        let before = before_loop(&c);
        // One convert: w0 (b0 feeds an add, v0 a highest-precision dot, h0 is rewritten by the body).
        assert_eq!(
            before.len(),
            1,
            "{chip}: {:?}",
            before.iter().map(|k| &k.name).collect::<Vec<_>>()
        );
        let k = before[0];
        assert_eq!(k.name, "w0.convert", "{chip}");
        assert_eq!(k.kind, KernelKind::Loop, "{chip}");
        // It reads the f32 weights and writes their bf16 copy.
        assert_eq!(k.hbm_bytes, W_F32 + W_BF16, "{chip}");
        // Timed as the program's own convert of the same array.
        let alone = cost(CONVERT, chip);
        assert_eq!(alone.kernels.len(), 1, "{chip}");
        assert_eq!(k.cycles, alone.kernels[0].cycles, "{chip}");
        assert_eq!(k.hbm_bytes, alone.kernels[0].hbm_bytes, "{chip}");
        // The loop starts after it.
        assert_eq!(while_kernel(&c).start_cycle, k.cycles, "{chip}");
    }
}

#[test]
fn weights_two_loops_read_are_converted_once() {
    // The compiler converts a parameter once for every loop reading it (scan.002: four converts for its
    // two loops over the same inputs).
    for chip in ["v4", "v5e"] {
        let c = cost(&two_loops(), chip);
        let converts: Vec<&str> = c
            .kernels
            .iter()
            .filter(|k| k.name.ends_with(".convert"))
            .map(|k| k.name.as_str())
            .collect();
        assert_eq!(converts, ["w0.convert"], "{chip}");
        assert_eq!(
            c.kernels.iter().filter(|k| k.kind == KernelKind::While).count(),
            2,
            "{chip}"
        );
    }
}

#[test]
fn the_convert_costs_at_least_its_launch_and_its_hbm_traffic() {
    // v5e: the loop launch is 1,813 cycles (the op model's `launch_cycles`, the compiler's smallest kLoop
    // estimate), and 393,216 bytes at v5e's 819 GB/s and 1.5 GHz (546 bytes a cycle) take 720 cycles: the
    // convert is launch-bound or more, never free.
    let c = cost(SCAN, "v5e");
    let k = before_loop(&c)[0];
    assert!(k.cycles >= 1_813, "{}", k.cycles);
    assert!(k.cycles >= (W_F32 + W_BF16) / 546, "{}", k.cycles);
}

#[test]
fn on_v4_the_bf16_copy_is_read_from_cmem() {
    // v4 keeps no loop state in VMEM (a megacore chip), but the converted weights sit in CMEM. Each trip's
    // two dot kernels both read h; the second also reads the highest-precision weights v and the bias b and
    // writes the new h (d stays on chip between them); neither reads w from HBM.
    let v4 = cost(SCAN, "v4");
    let per_trip = while_kernel(&v4).hbm_bytes / 8;
    assert_eq!(per_trip, 2 * H + W_F32 + H + H, "v4 per trip");
    // v5p has no CMEM: w is read from HBM every trip as well.
    let v5p = cost(SCAN, "v5p");
    assert!(while_kernel(&v5p).hbm_bytes / 8 >= H + H + H + W_F32 + W_BF16);
}
