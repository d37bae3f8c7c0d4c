//! A `dynamic-slice` taking one row of its input's sublane tiles (`hlo::sublane_slice`): a stacked input laid out
//! steps-in-sublanes (`{2,0,1}`, as the compiler lays out a scan's `xs` when that pads least) is sliced by a
//! kernel of its own reading every (8,128) tile the window crosses, four tile transfers each at the compiler's
//! HBM rate after the loop launch; its consumer reads the slice on chip. A steps-major input, or an array the
//! program computes itself, is sliced inside its consumer.

use sim_tpu::hlo::{cost_module, HloModule, KernelKind, ModuleCost};
use sim_tpu::tensorcore::ChipModel;

/// `x[i]` of a bf16[64,256,1024] stack, then `tanh`. `LAYOUT` is the stack's layout.
const PROGRAM: &str = r#"HloModule slice

ENTRY main {
  x = bf16[64,256,1024]LAYOUT parameter(0)
  i = s32[] parameter(1)
  z = s32[] constant(0)
  ds = bf16[1,256,1024]{2,1,0} dynamic-slice(x, i, z, z), dynamic_slice_sizes={1,256,1024}
  ROOT t = bf16[1,256,1024]{2,1,0} tanh(ds)
}
"#;

/// The same slice of a stack the program computes (`x + x`).
const COMPUTED: &str = r#"HloModule slice

ENTRY main {
  p = bf16[64,256,1024]{2,0,1:T(8,128)(2,1)} parameter(0)
  x = bf16[64,256,1024]{2,0,1:T(8,128)(2,1)} add(p, p)
  i = s32[] parameter(1)
  z = s32[] constant(0)
  ds = bf16[1,256,1024]{2,1,0} dynamic-slice(x, i, z, z), dynamic_slice_sizes={1,256,1024}
  ROOT t = bf16[1,256,1024]{2,1,0} tanh(ds)
}
"#;

/// The slice's index, an s32 scalar, as the kernels read it: one 128-element tile of 4 bytes.
const INDEX: u64 = 128 * 4;

const CHIPS: [&str; 5] = ["v4", "v5e", "v5p", "v6e", "tpu7x"];

fn cost(text: &str, chip: &str) -> (ModuleCost, ChipModel) {
    let c = ChipModel::preset(chip).unwrap();
    (cost_module(&HloModule::parse(text).unwrap(), &c).unwrap(), c)
}

fn names(c: &ModuleCost) -> Vec<&str> {
    c.kernels.iter().map(|k| k.name.as_str()).collect()
}

#[test]
fn a_slice_of_one_sublane_row_is_a_kernel_of_its_own_over_the_tiles_it_crosses() {
    let text = PROGRAM.replace("LAYOUT", "{2,0,1:T(8,128)(2,1)}");
    for chip in CHIPS {
        let (c, model) = cost(&text, chip);
        assert_eq!(names(&c), ["ds", "t"], "{chip}");
        let s = &c.kernels[0];
        assert_eq!(s.kind, KernelKind::Loop, "{chip}");
        // Step i's rows: one row in each (8,128) tile of dims 1 (256, major) x 2 (1024 lanes = 8 tiles):
        // 2,048 tiles of 8 x 128 x 2 bytes.
        let tiles = 256 * 8;
        let touched = tiles * 8 * 128 * 2;
        assert_eq!(s.hbm_bytes, touched, "{chip}");
        let transfers = 4.0 * touched as f64 / model.hbm.hlo_stream_bytes_per_cycle;
        assert_eq!(
            s.cycles,
            model.loop_launch_cycles() + transfers.round() as u64,
            "{chip}"
        );
        // The consumer reads the slice on chip: HBM bytes are its result's (256 x 1024 x 2, in whole tiles) and
        // the index's (an s32 scalar in a 128-element tile).
        assert_eq!(c.kernels[1].hbm_bytes, 256 * 1024 * 2 + INDEX, "{chip}");
    }
}

#[test]
fn a_steps_major_stack_or_a_computed_one_is_sliced_inside_its_consumer() {
    let major = PROGRAM.replace("LAYOUT", "{2,1,0:T(8,128)(2,1)}");
    for chip in CHIPS {
        let (c, _) = cost(&major, chip);
        assert_eq!(names(&c), ["t"], "{chip}");
        // It reads the window (256 x 1024 x 2) and the index, and writes the result.
        assert_eq!(c.kernels[0].hbm_bytes, 2 * 256 * 1024 * 2 + INDEX, "{chip}");
        let (c, _) = cost(COMPUTED, chip);
        assert!(!names(&c).contains(&"ds"), "{chip}: {:?}", names(&c));
    }
}
