//! `tpusim hlo` rules for dense layers read off the compiler's optimized modules (the reference sample's DLRM
//! MLPs, the corpus's mlp family): each module is written by hand here, with its expected kernels and cycles
//! worked out in the test.

use sim_tpu::hlo::KernelKind;

mod support;
use support::hlo::cost_on;

/// A narrow first layer `relu(x W0 + b0)`, f32[4096,8] x [8,2048], feeding `y = h W1` ([2048,128]): the layer's
/// result `h` (4096 x 2048 f32, 32 MiB) is 16 times its padded operands (x [4096,128] 2 MiB, W0 [8,2048] 64 KiB),
/// so it is recomputed in the kernel of `y`, as in the compiler's one kOutput fusion of dlrm_bottom_mlp's 13 ->
/// 512 -> 256 layers, whose `h` never leaves VMEM. The same second layer reading `h` from HBM (`p`, an entry
/// parameter of the same shape) streams 32 MiB: on v5e (819 GB/s at 1.5 GHz, about 550 bytes a cycle) some
/// 61,000 cycles, where both products on the MXU (2 x 4096 x 2048 x 128 multiply-adds with K padded to 128, at
/// 4 x 128 x 128 a cycle: 2 x 16,384 cycles) and x, W1 and the result (5 MiB) take far less. So the kernel making
/// `h` on chip costs less than the kernel streaming it, and both are one MXU kernel.
#[test]
fn a_layer_computed_in_the_next_layers_kernel_is_read_on_chip() {
    let head =
        "HloModule m\n\nENTRY main {\n  x = f32[4096,8]{1,0} parameter(0)\n  w0 = f32[8,2048]{1,0} parameter(1)\n  \
                b0 = f32[2048]{0} parameter(2)\n  w1 = f32[2048,128]{1,0} parameter(3)\n  \
                p = f32[4096,2048]{1,0} parameter(4)\n  \
                bb = f32[4096,2048]{1,0} broadcast(b0), dimensions={1}\n  \
                z = f32[] constant(0)\n  zb = f32[4096,2048]{1,0} broadcast(z), dimensions={}\n";
    let tail = "  h = f32[4096,2048]{1,0} maximum(a0, zb)\n  \
                ROOT y = f32[4096,128]{1,0} dot(h, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    let chained = format!(
        "{head}  d0 = f32[4096,2048]{{1,0}} dot(x, w0), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         a0 = f32[4096,2048]{{1,0}} add(d0, bb)\n{tail}"
    );
    let streamed = format!("{head}  a0 = f32[4096,2048]{{1,0}} add(p, bb)\n{tail}");
    let c = cost_on(&chained, "v5e");
    let s = cost_on(&streamed, "v5e");
    for m in [&c, &s] {
        assert_eq!(m.kernels.len(), 1, "{:#?}", m.kernels);
        assert_eq!(m.kernels[0].kind, KernelKind::Mxu);
    }
    assert!(
        c.kernels[0].instructions.iter().any(|i| i == "d0"),
        "{:?}",
        c.kernels[0].instructions
    );
    assert!(
        c.total_cycles < s.total_cycles,
        "making h on chip: {} cycles; streaming it: {}",
        c.total_cycles,
        s.total_cycles
    );
}
