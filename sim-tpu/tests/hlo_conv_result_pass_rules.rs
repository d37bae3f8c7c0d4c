//! `tpusim hlo`: a pass over a convolution's result sweeps it in the compiler's batch-inside layout (the batch in
//! the sublanes, padded to 8 rows) at the loop pipeline's rate, in VMEM or in HBM (`hlo::conv_result_pass`;
//! corpus resnet_block.010's variance passes, bf16[10,56,56,96]: 92,191 cycles on v5e, 14.4 a padded block).
//! Each module is written by hand here, with its expected kernels and cycles worked out in the test.

use sim_tpu::hlo::{hlo_params, KernelKind};
use sim_tpu::tensorcore::ChipModel;

mod support;
use support::hlo::cost_on;

/// A 1x1 convolution f32[10,16,16,128] x f32[1,1,128,96] -> y = f32[10,16,16,96], followed by `tail`.
fn conv_then(tail: &str) -> String {
    format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         ENTRY main {{\n  x = f32[10,16,16,128]{{3,2,1,0}} parameter(0)\n  w = f32[1,1,128,96]{{3,2,1,0}} parameter(1)\n  \
         m = f32[96]{{0}} parameter(2)\n  \
         y = f32[10,16,16,96]{{3,2,1,0}} convolution(x, w), window={{size=1x1}}, dim_labels=b01f_01io->b01f\n  \
         z = f32[] constant(0)\n{tail}}}\n"
    )
}

/// y's blocks in the batch-inside layout: the batch 10 padded to 16 rows, 96 channels to 128 lanes, 16 x 16
/// positions: 16 x 128 x 256 = 524,288 elements, 512 blocks of 1,024 (tpusim's own layout, the width in the
/// sublanes, has 10 x 16 x 16 x 128 = 327,680: 320 blocks).
const Y_BLOCKS: f64 = 512.0;
/// y's bytes in tpusim's layout: 327,680 elements x 4 B.
const Y_BYTES: f64 = 1_310_720.0;

/// The loop pipeline with `streams` arrays over `blocks` blocks, or the transfer of `bytes`, whichever is longer,
/// after the loop launch.
fn pass(chip: &str, blocks: f64, streams: f64, bytes: f64) -> u64 {
    let model = ChipModel::preset(chip).unwrap();
    let hp = hlo_params().into_iter().find(|h| h.name == chip).unwrap();
    let compute = blocks * (hp.loop_block_cycles + hp.stream_block_cycles * streams);
    model.loop_launch_cycles() + compute.max(bytes / hp.hbm_bytes_per_cycle).round() as u64
}

/// A variance of `y` about a given mean (`m`, a parameter), `y` also returned: the reduce is a kernel of its own
/// reading `y` whole, so it sweeps y's 512 batch-inside blocks with one stream. Without the rule it counted
/// tpusim's 320 blocks (v5e 6,839 cycles instead of 9,855).
#[test]
fn a_reduce_over_a_convolution_result_sweeps_its_batch_inside_blocks() {
    let tail = "  mb = f32[10,16,16,96]{3,2,1,0} broadcast(m), dimensions={3}\n  \
        d = f32[10,16,16,96]{3,2,1,0} subtract(y, mb)\n  sq = f32[10,16,16,96]{3,2,1,0} multiply(d, d)\n  \
        v = f32[96]{0} reduce(sq, z), dimensions={0,1,2}, to_apply=add\n  \
        ROOT o = (f32[10,16,16,96]{3,2,1,0}, f32[96]{0}) tuple(y, v)\n";
    for chip in ["v5e", "v6e", "v4", "v5p", "tpu7x"] {
        let c = cost_on(&conv_then(tail), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        let v = c
            .kernels
            .iter()
            .find(|k| k.name == "v")
            .unwrap_or_else(|| panic!("{chip}: no v in {names:?}"));
        assert_eq!(v.kind, KernelKind::Reduce, "{chip}");
        assert!(v.hbm_bytes >= Y_BYTES as u64, "{chip}: {}", v.hbm_bytes);
        assert_eq!(v.cycles, pass(chip, Y_BLOCKS, 1.0, v.hbm_bytes as f64), "{chip}");
    }
}

/// Training-mode batch norm after the convolution: tpusim's passes after the MXU kernel (`hlo::batchnorm`) count
/// y's batch-inside blocks too: the variance pass 512 blocks with one stream (y), the normalise pass 512 blocks
/// with two (y and the output), each against its transfer (y's bytes; y's and the output's).
#[test]
fn batch_norm_passes_over_a_convolution_result_count_its_padded_batch() {
    let tail = "  s = f32[96]{0} reduce(y, z), dimensions={0,1,2}, to_apply=add\n  \
        inv = f32[] constant(0.00039)\n  invb = f32[96]{0} broadcast(inv), dimensions={}\n  \
        mean = f32[96]{0} multiply(s, invb)\n  mb = f32[10,16,16,96]{3,2,1,0} broadcast(mean), dimensions={3}\n  \
        d = f32[10,16,16,96]{3,2,1,0} subtract(y, mb)\n  sq = f32[10,16,16,96]{3,2,1,0} multiply(d, d)\n  \
        v = f32[96]{0} reduce(sq, z), dimensions={0,1,2}, to_apply=add\n  var = f32[96]{0} multiply(v, invb)\n  \
        r = f32[96]{0} rsqrt(var)\n  rb = f32[10,16,16,96]{3,2,1,0} broadcast(r), dimensions={3}\n  \
        ROOT o = f32[10,16,16,96]{3,2,1,0} multiply(d, rb)\n";
    for chip in ["v5e", "v6e", "v4"] {
        let c = cost_on(&conv_then(tail), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        let at = |n: &str| {
            c.kernels
                .iter()
                .find(|k| k.name == n)
                .unwrap_or_else(|| panic!("{chip}: no {n} in {names:?}"))
        };
        assert_eq!(at("v.pass").cycles, pass(chip, Y_BLOCKS, 1.0, Y_BYTES), "{chip}");
        assert_eq!(
            at("y.normalise").cycles,
            pass(chip, Y_BLOCKS, 2.0, 2.0 * Y_BYTES),
            "{chip}"
        );
    }
}
