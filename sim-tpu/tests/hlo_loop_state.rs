//! Loop state the compiler keeps on chip (`hlo::loop_state`): on a chip that keeps it in VMEM the body's
//! kernels move no HBM bytes for it, and a body MXU kernel all of whose operands and results are on chip pays
//! the compiler's on-chip launch, not the launch of a kernel streaming from HBM; on v5p the state stays in HBM.

use sim_tpu::hlo::{cost_module, HloModule, KernelKind, ModuleCost};
use sim_tpu::tensorcore::ChipModel;

/// An RNN-like scan of 8 steps: carried h f32[128,256] (from a parameter, rewritten each trip), weights
/// w f32[256,256] (a parameter passed through, read only by the dot), inputs xs f32[8,128,256] (a parameter
/// passed through, read one step at a time by an add). With `with_xs` false the step is tanh(h w) alone.
fn rnn(with_xs: bool) -> String {
    let (x_read, pre) = if with_xs {
        (
            "  zero = s32[] constant(0)\n  xs = f32[8,128,256]{2,1,0} get-tuple-element(p), index=3\n  \
             xt3 = f32[1,128,256]{2,1,0} dynamic-slice(xs, i, zero, zero), dynamic_slice_sizes={1,128,256}\n  \
             xt = f32[128,256]{1,0} reshape(xt3)\n  a = f32[128,256]{1,0} add(d, xt)\n",
            "a",
        )
    } else {
        ("", "d")
    };
    format!(
        r#"HloModule rnn

body {{
  p = (s32[], f32[128,256]{{1,0}}, f32[256,256]{{1,0}}, f32[8,128,256]{{2,1,0}}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  h = f32[128,256]{{1,0}} get-tuple-element(p), index=1
  w = f32[256,256]{{1,0}} get-tuple-element(p), index=2
  d = f32[128,256]{{1,0}} dot(h, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
{x_read}  t = f32[128,256]{{1,0}} tanh({pre})
  xs_out = f32[8,128,256]{{2,1,0}} get-tuple-element(p), index=3
  ROOT out = (s32[], f32[128,256]{{1,0}}, f32[256,256]{{1,0}}, f32[8,128,256]{{2,1,0}}) tuple(next, t, w, xs_out)
}}

cond {{
  p = (s32[], f32[128,256]{{1,0}}, f32[256,256]{{1,0}}, f32[8,128,256]{{2,1,0}}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(8)
  ROOT c = pred[] compare(i, n), direction=LT
}}

ENTRY main {{
  s = s32[] constant(0)
  h0 = f32[128,256]{{1,0}} parameter(0)
  w0 = f32[256,256]{{1,0}} parameter(1)
  x0 = f32[8,128,256]{{2,1,0}} parameter(2)
  init = (s32[], f32[128,256]{{1,0}}, f32[256,256]{{1,0}}, f32[8,128,256]{{2,1,0}}) tuple(s, h0, w0, x0)
  loop = (s32[], f32[128,256]{{1,0}}, f32[256,256]{{1,0}}, f32[8,128,256]{{2,1,0}}) while(init), condition=cond, body=body
  ROOT r = f32[128,256]{{1,0}} get-tuple-element(loop), index=1
}}
"#
    )
}

fn cost(text: &str, chip: &str) -> ModuleCost {
    cost_module(&HloModule::parse(text).unwrap(), &ChipModel::preset(chip).unwrap()).unwrap()
}

fn while_kernel(c: &ModuleCost) -> &sim_tpu::hlo::KernelCost {
    c.kernels
        .iter()
        .find(|k| k.kind == KernelKind::While)
        .expect("a while kernel")
}

/// Bytes of one f32[128,256] array (tiles of 8x128 fit it exactly).
const H: u64 = 128 * 256 * 4;

#[test]
fn state_kept_in_vmem_moves_no_hbm_bytes_and_v5p_streams_it() {
    // v5e keeps h (rewritten by the body) and w (f32, read only by the dot: the compiler's bf16 copy is an
    // intermediate) in VMEM; xs, a parameter passed through and read by an add, stays in HBM: each trip
    // reads one [128,256] window of it.
    let v5e = cost(&rnn(true), "v5e");
    assert_eq!(while_kernel(&v5e).hbm_bytes, 8 * H);
    // v5p keeps no state on chip: each trip reads h, w (twice h's bytes), the xs window and the counter
    // (the slice's index: one s32 in a 128-element tile, 512 bytes), and writes h.
    let v5p = cost(&rnn(true), "v5p");
    assert_eq!(while_kernel(&v5p).hbm_bytes, 8 * (H + 2 * H + H + 512 + H));
}

#[test]
fn a_body_matmul_all_on_chip_pays_the_on_chip_launch() {
    // tanh(h w) with h, w and the result in VMEM on v5e: per trip the on-chip launch (261 cycles, the
    // compiler's smallest MXU fusion on v5e) plus the MXU work: 128 rows through 2x2 weight tiles of 128x128
    // on 4 MXUs is at least 128 cycles. The launch of a kernel streaming from HBM alone would be
    // 3,836 x 0.822 = 3,153 cycles per trip.
    let v5e = cost(&rnn(false), "v5e");
    let per_trip = while_kernel(&v5e).cycles / 8;
    assert!(per_trip >= 261 + 128, "{per_trip}");
    assert!(per_trip < 1_000, "{per_trip} cycles per trip: the HBM launch was paid");
    // On v5p the same kernel streams its state from HBM and pays its launch: 4,271 x 0.958 = 4,092.
    let v5p = cost(&rnn(false), "v5p");
    assert!(while_kernel(&v5p).cycles / 8 >= 4_092);
}
