//! `tpusim hlo`'s on-chip entry kernel rule (`hlo::onchip_kernel`): an entry MXU kernel whose operands and result
//! are all in VMEM pays the chip's on-chip launch, not the launch of a kernel streaming from HBM. Each module is
//! written by hand here, with its expected kernels and cycles worked out in the test.

use sim_tpu::hlo::{cost_module_with, hlo_params, HloModule, HloParams, KernelKind, ModuleCost};
use sim_tpu::tensorcore::ChipModel;

/// Three chained bf16 layers of a batch of 64 (mlp.019's shape of program, 256 wide): `h1 = x w1` reads
/// parameters only (the program's first kernel: x and w1 stream from HBM); `h2 = h1 w2` reads the intermediate
/// `h1` (64 x 256 x 2 B = 32 KiB, in VMEM) and `w2` (copied on chip while `h1`'s kernel runs) and writes `h2`, an
/// intermediate, to VMEM; `y = h2 w3` writes the program's result to HBM.
const THREE_LAYERS: &str = "HloModule three_layers\n\nENTRY main {\n  \
x = bf16[64,256]{1,0} parameter(0)\n  w1 = bf16[256,256]{1,0} parameter(1)\n  \
w2 = bf16[256,256]{1,0} parameter(2)\n  w3 = bf16[256,256]{1,0} parameter(3)\n  \
h1 = bf16[64,256]{1,0} dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
h2 = bf16[64,256]{1,0} dot(h1, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
ROOT y = bf16[64,256]{1,0} dot(h2, w3), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";

fn params(chip: &str) -> HloParams {
    hlo_params().into_iter().find(|p| p.name == chip).unwrap()
}

fn cost(text: &str, chip: &str, hp: &HloParams) -> ModuleCost {
    cost_module_with(&HloModule::parse(text).unwrap(), &ChipModel::preset(chip).unwrap(), hp).unwrap()
}

/// The launch of an MXU kernel streaming from HBM, as the test works it out: the op model's MXU launch scaled by
/// the chip's fitted `launch_factor`.
fn hbm_launch(chip: &str, hp: &HloParams) -> u64 {
    let model = ChipModel::preset(chip).unwrap();
    (model.params.mxu_launch_cycles * hp.launch_factor.clamp(0.2, 1.0)).round() as u64
}

/// With the rule (the installed `onchip_kernel_cycles`) and without it (`None`), the three kernels are the
/// same three MXU kernels and only the middle one differs, by exactly the HBM launch less the on-chip one:
/// v6e 1,042 cycles (the compiler's median such kernel on the fit records: mlp.019's seven of 1,038-1,056), v5e
/// 2,137. On v5p (megacore: results stay in HBM) and on tpu7x (whose on-chip bf16 kernels, 3,330, cost more than
/// tpusim's HBM launch there) nothing changes.
#[test]
fn only_a_kernel_reading_and_writing_vmem_pays_the_onchip_launch() {
    for (chip, onchip) in [
        ("v6e", Some(1042u64)),
        ("v5e", Some(2137)),
        ("v5p", None),
        ("tpu7x", None),
    ] {
        let with = params(chip);
        let mut without = with.clone();
        without.onchip_kernel_cycles = None;
        let (a, b) = (cost(THREE_LAYERS, chip, &with), cost(THREE_LAYERS, chip, &without));
        let kinds: Vec<KernelKind> = a.kernels.iter().map(|k| k.kind).collect();
        assert_eq!(kinds, [KernelKind::Mxu; 3], "{chip}: {:#?}", a.kernels);
        assert_eq!(a.kernels.len(), b.kernels.len());
        let saved = onchip.map_or(0, |c| hbm_launch(chip, &with) - c);
        assert!(onchip.is_none_or(|c| c < hbm_launch(chip, &with)), "{chip}");
        assert_eq!(
            a.kernels[0].cycles, b.kernels[0].cycles,
            "{chip}: the first kernel reads parameters only"
        );
        assert_eq!(
            a.kernels[1].cycles + saved,
            b.kernels[1].cycles,
            "{chip}: {:#?}",
            a.kernels
        );
        assert_eq!(
            a.kernels[2].cycles, b.kernels[2].cycles,
            "{chip}: the last kernel writes the result to HBM"
        );
        assert_eq!(a.total_cycles + saved, b.total_cycles, "{chip}");
    }
    // The installed constants are the ones the test derived from the corpus.
    assert_eq!(params("v6e").onchip_kernel_cycles, Some(1042.0));
    assert_eq!(params("v5e").onchip_kernel_cycles, Some(2137.0));
}

/// The same middle layer returned as a second result of the program leaves the chip: its kernel writes HBM and
/// pays the HBM launch, as the compiler's mlp kernels writing a result to HBM do (v6e median 3,335 cycles against
/// 1,088 in VMEM, `tools/corpus/onchip_kernels.py`).
#[test]
fn a_kernel_writing_a_program_result_pays_the_hbm_launch() {
    let returned = THREE_LAYERS
        .replace("ROOT y = bf16[64,256]{1,0} dot", "y = bf16[64,256]{1,0} dot")
        .replace(
            "\n}\n",
            "\n  ROOT t = (bf16[64,256]{1,0}, bf16[64,256]{1,0}) tuple(h2, y)\n}\n",
        );
    let with = params("v6e");
    let mut without = with.clone();
    without.onchip_kernel_cycles = None;
    let (a, b) = (cost(&returned, "v6e", &with), cost(&returned, "v6e", &without));
    assert_eq!(a.kernels.len(), 3, "{:#?}", a.kernels);
    assert_eq!(a.total_cycles, b.total_cycles, "{:#?}", a.kernels);
}
