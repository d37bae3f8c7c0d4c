//! Where the arrays between a convolution's kernels live, and what a copy between two of them in VMEM costs.
//!
//! The compiler's memory-space assignment puts an intermediate array (written by one kernel of the op, read by the
//! next) in the VMEM beside the scoped window (`S(1)` in the optimized HLO) on chips that do so
//! (`ChipModel::vmem_intermediates`), as long as it fits beside the kernel's other VMEM-resident intermediate
//! (`ChipModel::prefetch_budget_bytes`, VMEM less the scoped window). A copy from one such array to another moves
//! no HBM bytes: the compiler charges it a local move, hundreds of cycles where the HBM copy of the same array
//! costs tens of thousands. Evidence (optimized HLO and per-kernel estimates):
//! - C25.conv2d_nhwc.001, f32[4,56,56,29] 1x1: on v5e and v6e every intermediate is `S(1)`; the copy of the
//!   rows-minor input into channel-minor order costs 400 cycles (16,112 on v5p, whose intermediates are in HBM),
//!   the copy of the f32 result into (H, W, N, C) 1,584 on v6e and tpu7x (24,338 on v5p).
//! - C25.conv2d_nhwc.011, bf16[4,224,224,54] 1x1 stride 2: on v5e and v6e the second input copy costs 5,600 cycles
//!   (235,144 on v5p) and the result copy 900 (46,872); on tpu7x, whose budget is 32 MiB, the first copy's
//!   29.4 MB output is `S(1)` but the second copy's 25.7 MB output, which would lie beside it, is not (T(16,128)
//!   in HBM, 146,988 cycles), and the small fusion result and its copy are again (900 cycles).

use super::chip::ChipModel;
use super::cost::{Bound, KernelCost, Phase, Residency, Unit};
use super::lower::Kernel;

/// The compiler's opcode for a pure copy (the only kernel a VMEM-to-VMEM move makes cheap: a pad or slice fusion
/// between the same arrays still does its VPU work, C25.conv2d_nhwc.010's 83,504-cycle pad on v6e).
const COPY: &str = "copy";

/// Where one kernel of a chain reads its main input and writes its result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Its input is the previous kernel's result, placed in VMEM.
    pub input_vmem: bool,
    /// Its result is an intermediate placed in VMEM.
    pub output_vmem: bool,
}

/// The placement of each kernel of a chain (kernel `i` reads kernel `i - 1`'s result; the first reads entry
/// parameters, the last writes the entry result, both in HBM): in program order, an intermediate goes to VMEM
/// when it fits the budget beside the kernel's input, if that is in VMEM too.
pub fn place(chain: &[Kernel], chip: &ChipModel) -> Vec<Placement> {
    let mut out = vec![Placement::default(); chain.len()];
    if !chip.vmem_intermediates {
        return out;
    }
    let budget = chip.prefetch_budget_bytes;
    let mut prev_vmem: Option<u64> = None;
    for (i, k) in chain.iter().enumerate() {
        let input = prev_vmem.unwrap_or(0);
        let last = i + 1 == chain.len();
        let output_vmem = !last && input + k.out_bytes <= budget;
        out[i] = Placement {
            input_vmem: prev_vmem.is_some(),
            output_vmem,
        };
        prev_vmem = output_vmem.then_some(k.out_bytes);
    }
    out
}

impl Placement {
    /// The operands an MXU kernel at this placement finds in VMEM: its activation (the previous kernel's result)
    /// and its result, neither fetched nor written back through HBM windows.
    ///
    /// Evidence: C25.conv2d_nhwc.001, f32[4,56,56,29] x [1,1,29,256] on v5e, whose input copies and result are
    /// all `S(1)`: the compiler's convolution fusion costs 6,528 cycles where streaming its 12.8 MB f32 result to
    /// HBM alone takes ~32,000 (tpusim's 36,138 did); on v6e 4,160.
    pub fn residency(self) -> Residency {
        Residency {
            lhs: self.input_vmem,
            rhs: false,
            out: self.output_vmem,
        }
    }
}

/// Whether `k` at `placement` is a copy between two VMEM arrays.
pub fn is_vmem_copy(k: &Kernel, placement: Placement) -> bool {
    k.name == COPY && placement.input_vmem && placement.output_vmem
}

/// The cost of a copy between two VMEM arrays: its bytes read and written at `vmem_copy_bytes_per_cycle`, no
/// launch (the compiler's estimates go down to 400 cycles, below any chip's fitted launch).
pub fn vmem_copy_cost(k: &Kernel, chip: &ChipModel) -> KernelCost {
    let bytes = k.in_bytes + k.out_bytes;
    let rate = chip.params.vmem_copy_bytes_per_cycle.max(1.0);
    let cycles = (bytes as f64 / rate).round().max(1.0) as u64;
    KernelCost {
        name: k.name.to_string(),
        cycles,
        windows: 1,
        vmem_bytes: 0,
        bound: Bound::Vpu,
        phases: vec![Phase {
            name: format!("{}/vmem_copy", k.name),
            unit: Unit::Vpu,
            start_cycle: 0,
            cycles,
            busy_cycles: cycles,
            bytes: 0,
        }],
    }
}
