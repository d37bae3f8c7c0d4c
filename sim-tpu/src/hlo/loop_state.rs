//! Which elements of a `while` loop's state the compiler keeps on chip (VMEM) for the whole loop, so the body's
//! kernels read and write them there and move no HBM bytes for them.
//!
//! The rule, read off the `while` result shapes of the compiler corpus's optimized modules
//! (`tools/corpus/loop_state.py` prints them for every record):
//! - on a megacore chip the state does not stay in VMEM: v5p (no CMEM) keeps scan.003's, scan.009's and
//!   scan.011's stacked arrays in HBM; v4 puts them in CMEM (`S(3)`), which its kernels reach by DMA as they
//!   reach HBM (counting CMEM state free moved every v4 scan record under the compiler: scan.018 from -0.39 to
//!   -0.98, scan.003 from +0.27 to -0.32);
//! - elsewhere the elements go on chip in tuple order while they fit half of the chip's VMEM (a larger one is
//!   left in HBM and the next ones still tried): scan.014 (two bf16[121,1024,119] of 31.8 MB) has both in VMEM
//!   on v5e and v6e (128 MiB), one on tpu7x (64 MiB); scan.008's two 950 MB arrays stay in HBM on every chip
//!   while its carry and weights go on chip;
//! - an element whose initial value is an entry parameter and which the body passes through unchanged stays
//!   where the parameter is, in HBM (scan.011's and scan.015's f32 inputs `xs`, scan.000's bf16 inputs and
//!   weights on v5e), unless it is f32 and reaches only matmuls: the compiler then writes a bf16 copy before the
//!   loop, an intermediate it places on chip (scan.003's and scan.001's inputs and weights, `S(1)`; the convert
//!   and v4's CMEM copy are [`super::loop_convert`]).
//!
//! What that saves (scan.003 on v5e, a fit record): the body's two 128x203x203 dots on on-chip operands cost
//! 360 cycles each in the compiler's estimate, where an MXU kernel streaming from HBM pays the op model's
//! launch (about 3,150 cycles): see [`onchip_mxu_launch`].

use std::collections::BTreeSet;

use sim_core::layout::Shape;

use super::bytes::Sizer;
use super::graph::Graph;
use super::loop_convert::{f32_only_into_matmuls, passed_through};
use super::HloError;
use crate::tensorcore::ChipModel;

/// Bytes of loop state the compiler keeps in VMEM: half of the chip's VMEM; none on a megacore chip.
pub(super) fn state_budget(chip: &ChipModel) -> u64 {
    if chip.megacore {
        0
    } else {
        chip.vmem_bytes / 2
    }
}

/// The state elements (tuple indices) of the loop whose initial tuple is node `init` of `outer` and whose body
/// is `body`, that the compiler keeps on chip within `budget` bytes.
pub(super) fn on_chip_elements(
    outer: &Graph<'_>,
    init: usize,
    body: &Graph<'_>,
    sizer: &Sizer,
    budget: u64,
) -> Result<BTreeSet<usize>, HloError> {
    let mut kept = BTreeSet::new();
    let init_node = &outer.nodes[init];
    if budget == 0 || init_node.ins.opcode != "tuple" {
        return Ok(kept);
    }
    let mut used = 0u64;
    for (i, &value) in init_node.operands.iter().enumerate() {
        let Shape::Array(_) = &outer.nodes[value].ins.shape else {
            continue;
        };
        let parameter = outer.nodes[value].ins.opcode == "parameter";
        if parameter && passed_through(body, i) && !f32_only_into_matmuls(body, i) {
            continue;
        }
        let bytes = sizer.shape(&outer.nodes[value].ins.shape)?.padded_bytes;
        if used.saturating_add(bytes) <= budget {
            used += bytes;
            kept.insert(i);
        }
    }
    Ok(kept)
}

/// The body's nodes holding on-chip state: its reads of those elements and the values it writes back to them.
pub(super) fn state_nodes(body: &Graph<'_>, elements: &BTreeSet<usize>) -> BTreeSet<usize> {
    let mut nodes: BTreeSet<usize> = (0..body.nodes.len())
        .filter(|&n| body.state_element(n).is_some_and(|e| elements.contains(&e)))
        .collect();
    let root = &body.nodes[body.root];
    if root.ins.opcode == "tuple" {
        nodes.extend(
            root.operands
                .iter()
                .enumerate()
                .filter(|(i, _)| elements.contains(i))
                .map(|(_, &n)| n),
        );
    }
    nodes
}

/// Fixed cycles of an MXU kernel whose operands and results are all on chip: the chip's
/// `onchip_mxu_launch_cycles` (the compiler's smallest MXU fusion estimate, read off the corpus), never more
/// than `hbm_launch`, the launch of one streaming from HBM. A product with fewer than a sublane tile (8) of
/// rows or columns (`rows`) pays the chip's `onchip_kernel_cycles` instead (`narrow`, the cost of an ordinary
/// on-chip kernel, read off the corpus too), or the loop launch (`loop_launch`) on a chip without one.
///
/// Evidence (compiler corpus, fit records): the smallest kOutput fusion estimates are v4 873, v5e 261, v5p
/// 2,370, v6e 1,038, tpu7x 1,040 cycles (moe_routing and scan bodies on `S(1)`/`S(3)` operands), where the op
/// model's MXU launch, fitted on kernels streaming from HBM, is 1,557, 3,153, 4,092, 1,999 and 2,049 in a
/// program; scan.003's body dots (128x203x203) on v5e cost 360 each. Narrow products cost otherwise, by chip:
/// the body dots of scan.006 (6x128x128, bf16) and scan.010 (9 rows: its backward [9,128] products) on `S(1)`
/// operands are kOutput fusions of 1,056 cycles on v6e (the on-chip launch, not v6e's loop launch 2,116), 2,072
/// and 2,080 on v5e, 3,338 and 3,340 on tpu7x (above its HBM launch): within 3% of the entry's on-chip kernels
/// ([`super::onchip_kernel`]: v6e 1,042, v5e 2,137, tpu7x 3,330), one constant for both.
pub(super) fn onchip_mxu_launch(
    onchip_launch: Option<f64>,
    narrow: Option<f64>,
    hbm_launch: u64,
    rows: u64,
    loop_launch: u64,
) -> u64 {
    if rows < 8 {
        return match narrow {
            Some(c) if c >= 0.0 => c.round() as u64,
            _ => loop_launch.min(hbm_launch),
        };
    }
    match onchip_launch {
        Some(c) if c >= 0.0 => (c.round() as u64).min(hbm_launch),
        _ => hbm_launch,
    }
}

/// Body cycles of an MXU kernel whose operands and results are all on chip, from its window plan's
/// (`plan_body` over `iterations` windows): without the plan's fixed cycles per window (`iter_cycles`, the
/// op model's `mxu_iter_cycles`: DMA issue and semaphore waits), as no window is fetched or written by DMA.
///
/// Evidence (compiler corpus, fit records' loop bodies, all operands `S(1)`): scan.003's 128x203x203 dots cost
/// 1,076 cycles each on v6e and on tpu7x, scan.002's 837x128x128 ones 1,234: the on-chip launch (1,038 and
/// 1,040) and about the MXU's own cycles (tpusim's 60 and 64 for the first, one window), where the window plan
/// adds its per-window 857 (v6e) and 1,980 (tpu7x) cycles, twice the compiler's kernel on tpu7x.
pub(super) fn onchip_window_body(plan_body: f64, iterations: u64, iter_cycles: f64) -> f64 {
    (plan_body - iterations as f64 * iter_cycles.max(0.0)).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::HloModule;

    /// A loop whose state is: 0 a counter; 1 a carry from a parameter, rewritten; 2 f32 weights from a
    /// parameter, passed through, read only by the dot; 3 f32 inputs from a parameter, passed through, read by
    /// an add; 4 a 40 MiB f32[80,128,1024] buffer (80 x 128 x 1024 x 4 bytes) from a broadcast, rewritten;
    /// 5 a 16 MiB f32[32,128,1024] one, rewritten.
    const LOOP: &str = r#"HloModule m

body {
  p = (s32[], f32[128,1024]{1,0}, f32[1024,1024]{1,0}, f32[128,1024]{1,0}, f32[80,128,1024]{2,1,0}, f32[32,128,1024]{2,1,0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  h = f32[128,1024]{1,0} get-tuple-element(p), index=1
  w = f32[1024,1024]{1,0} get-tuple-element(p), index=2
  x = f32[128,1024]{1,0} get-tuple-element(p), index=3
  big = f32[80,128,1024]{2,1,0} get-tuple-element(p), index=4
  mid = f32[32,128,1024]{2,1,0} get-tuple-element(p), index=5
  d = f32[128,1024]{1,0} dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[128,1024]{1,0} add(d, x)
  big2 = f32[80,128,1024]{2,1,0} negate(big)
  mid2 = f32[32,128,1024]{2,1,0} negate(mid)
  ROOT out = (s32[], f32[128,1024]{1,0}, f32[1024,1024]{1,0}, f32[128,1024]{1,0}, f32[80,128,1024]{2,1,0}, f32[32,128,1024]{2,1,0}) tuple(i, t, w, x, big2, mid2)
}

ENTRY main {
  s = s32[] constant(0)
  h0 = f32[128,1024]{1,0} parameter(0)
  w0 = f32[1024,1024]{1,0} parameter(1)
  x0 = f32[128,1024]{1,0} parameter(2)
  z = f32[] constant(0)
  b0 = f32[80,128,1024]{2,1,0} broadcast(z), dimensions={}
  m0 = f32[32,128,1024]{2,1,0} broadcast(z), dimensions={}
  ROOT init = (s32[], f32[128,1024]{1,0}, f32[1024,1024]{1,0}, f32[128,1024]{1,0}, f32[80,128,1024]{2,1,0}, f32[32,128,1024]{2,1,0}) tuple(s, h0, w0, x0, b0, m0)
}
"#;

    fn kept(chip: &str) -> Vec<usize> {
        let m = HloModule::parse(LOOP).unwrap();
        let outer = Graph::build(&m).unwrap();
        let body = Graph::build_computation(&m, m.computation_index("body").unwrap()).unwrap();
        let model = ChipModel::preset(chip).unwrap();
        let sizer = Sizer::new(chip).unwrap();
        on_chip_elements(&outer, outer.root, &body, &sizer, state_budget(&model))
            .unwrap()
            .into_iter()
            .collect()
    }

    #[test]
    fn state_goes_on_chip_in_tuple_order_within_half_the_vmem() {
        // v5e, 64 MiB: counter, carry (512 KiB), weights (4 MiB), the 40 MiB and the 16 MiB buffers: 60.5 MiB;
        // the f32 inputs passed through from a parameter stay in HBM.
        assert_eq!(kept("v5e"), vec![0, 1, 2, 4, 5]);
        // tpu7x, 32 MiB: the 40 MiB buffer is left in HBM, the 16 MiB one after it still fits.
        assert_eq!(kept("tpu7x"), vec![0, 1, 2, 5]);
    }

    #[test]
    fn megacore_chips_keep_loop_state_off_vmem() {
        assert!(kept("v5p").is_empty());
        assert!(kept("v4").is_empty());
    }

    #[test]
    fn a_kernel_all_on_chip_pays_no_window_overhead() {
        // Two windows of 400 cycles each, 857 fixed cycles per window: 2 x (400 + 857) = 2,514 in the plan,
        // 800 on chip.
        assert_eq!(onchip_window_body(2.0 * (400.0 + 857.0), 2, 857.0), 800.0);
        // Never negative.
        assert_eq!(onchip_window_body(100.0, 1, 857.0), 0.0);
    }

    #[test]
    fn a_kernel_all_on_chip_pays_the_on_chip_launch_unless_it_is_a_vector_product() {
        // v5e: on-chip launch 261, HBM launch 3,153, loop launch 1,813.
        assert_eq!(onchip_mxu_launch(Some(261.0), None, 3_153, 128, 1_813), 261);
        assert_eq!(onchip_mxu_launch(Some(5_000.0), None, 3_153, 128, 1_813), 3_153);
        assert_eq!(onchip_mxu_launch(None, None, 3_153, 128, 1_813), 3_153);
        // Two rows, no narrow figure for the chip: the loop launch.
        assert_eq!(onchip_mxu_launch(Some(261.0), None, 3_153, 2, 1_813), 1_813);
        // With one (v6e: 1,056; tpu7x: 3,338, above its HBM launch 2,596), that figure, for 7 rows but not 8.
        assert_eq!(onchip_mxu_launch(Some(1_038.0), Some(1_056.0), 2_277, 7, 2_116), 1_056);
        assert_eq!(onchip_mxu_launch(Some(1_038.0), Some(1_056.0), 2_277, 8, 2_116), 1_038);
        assert_eq!(onchip_mxu_launch(Some(1_040.0), Some(3_338.0), 2_596, 6, 2_289), 3_338);
    }
}
