//! Costing kernels with the TensorCore model: MXU kernels through its window search ([`plan_mxu_layout`]:
//! passes on padded tiles, DMA of windows, epilogue; operands and results the temp model places in VMEM are not
//! streamed from or to HBM), VPU kernels at its per-class rates on padded elements, HBM traffic on
//! padded bytes; plus the entry total and a temp-memory estimate from buffer live ranges in the kernel order.
//!
//! Unmodelled ops (gather, scatter, sort, custom-call, ...) are costed by a stated conservative rule:
//! launch + every operand and result byte moved once at the HBM rate (a gather's table, even one an inlined call
//! returns through a tuple, only as many bytes as it gathers, a scatter's target once, in place). They are listed in [`ModuleCost::unmodelled`]. A kernel of a
//! single VPU op is timed by the TensorCore op model itself. A `while` loop is its body, costed as a graph of its
//! own (once per computation), times the trip count read from the loop ([`loops`]); one whose count cannot be read is one trip, listed
//! as unmodelled. A `conditional` is its most expensive branch, listed as unmodelled (which branch runs is known
//! only at run time).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use sim_core::layout::{PrimitiveType, Shape};

use super::bytes::{dims_of, elements, Sizer};
use super::fusion::{group, Group, KernelKind};
use super::graph::{Graph, Node};
use super::loops;
use super::ops::OpClass;
use super::{HloError, HloModule};
use crate::tensorcore::cost::time_kernel;
use crate::tensorcore::cost::{plan_mxu_layout, Residency};
use crate::tensorcore::lower::MxuLayout;
use crate::tensorcore::lower::{Kernel, MxuWork, VpuClass, Work, VREG_ELEMENTS};
use crate::tensorcore::{Bound, ChipModel, Dtype};

/// Constants of the fused-kernel model, per chip (`calibration.json` beside this file): the cycle constants fitted
/// by `cargo run --release -p sim-tpu --example hlo_fit -- --corpus` on the `fit` splits of
/// testdata/hlo/programs.json and of the compiler corpus, the temp constants on programs.json's only
/// (`tools/corpus/merge_temp.py`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HloParams {
    /// Chip preset name.
    pub name: String,
    /// HBM bytes per cycle of the compiler's cost model: `model_hbm_bytes_per_s / model_clock` of the preset
    /// (not fitted; reference/chips.md).
    pub hbm_bytes_per_cycle: f64,
    /// VPU cycles per 1024 padded elements of one fused elementwise op or reduction input (fitted).
    pub fused_op_cycles: f64,
    /// Cycles per 1024 padded elements of a loop or reduce fusion's largest array: the per-iteration cost of
    /// the compiler's loop pipeline (fitted).
    pub loop_block_cycles: f64,
    /// Further cycles per 1024 padded elements of the largest array for each full-size array a loop or reduce
    /// fusion streams in or out (each is a vector load or store per block; fitted, 0 when absent).
    #[serde(default)]
    pub stream_block_cycles: f64,
    /// Bytes of intermediate buffers the compiler keeps in VMEM instead of HBM (buffers are placed first come,
    /// first served while they fit; fitted, at most the chip's VMEM).
    pub vmem_temp_bytes: u64,
    /// Bytes of on-chip memory the compiler fills with temporaries, for the temp estimate: VMEM, or on a chip
    /// with CMEM (v4) CMEM, where it places intermediates instead (fitted on temp bytes, at most that memory).
    #[serde(default)]
    pub temp_fast_bytes: u64,
    /// Bytes the compiler's temp allocation adds once any temporary lives in HBM (fitted, under 1 MiB).
    #[serde(default)]
    pub temp_overhead_bytes: u64,
    /// Bytes of HBM scratch per kernel reducing across rows (a bias gradient, a loss summed to a scalar): such a
    /// kernel accumulates partial results over the row blocks of its grid (fitted, under 128 KiB).
    #[serde(default)]
    pub temp_row_reduce_bytes: u64,
    /// Factor (0..=1) on the TensorCore model's matmul epilogue rates (`mm_out_*`, `mm_acc_32bit`, fitted on
    /// standalone ops whose results go to HBM): inside a program most matmul results stay in VMEM for the next
    /// kernel (fitted).
    pub mxu_epilogue_factor: f64,
    /// Factor (0.2..=1) on the op model's fixed MXU launch cycles (`mxu_launch_cycles`): an MXU kernel of a
    /// program overlaps its prologue with the previous kernel (fitted). Loop and reduce kernels pay the op model's
    /// whole `launch_cycles` ([`ChipModel::loop_launch_cycles`]).
    pub launch_factor: f64,
    /// VPU cycles per 1024 padded elements of one fused op inside an MXU kernel (its epilogue runs on tiles
    /// already in vector registers, far cheaper than a loop fusion's op; fitted, `fused_op_cycles` when absent).
    #[serde(default)]
    pub mxu_fused_op_cycles: Option<f64>,
    /// Cycles per 1024 padded elements of its largest array a loop or reduce kernel streaming from HBM adds for
    /// row-wise work across the vector lanes, not hidden under its stream ([`super::cross_lane`]; fitted, 0 when
    /// absent).
    #[serde(default)]
    pub row_block_cycles: f64,
    /// Fixed cycles of an MXU kernel whose operands and results are all on chip (no HBM prologue): the
    /// compiler's smallest MXU fusion estimate on the corpus's fit records (read off, not fitted;
    /// [`super::loop_state::onchip_mxu_launch`]); the HBM launch when absent.
    #[serde(default)]
    pub onchip_mxu_launch_cycles: Option<f64>,
    /// Fixed cycles of an MXU kernel all on chip that the compiler emits as an ordinary kernel rather than its
    /// smallest kind: an entry kernel on parameters it copied on chip ([`super::onchip_kernel`]) or a loop-body
    /// product of fewer than 8 rows ([`super::loop_state::onchip_mxu_launch`]). Read off the corpus's fit records
    /// (not fitted): the median entry kernel of at most 256 KiB all in VMEM, v5e 2,137, v6e 1,042, tpu7x 3,330;
    /// the narrow loop-body products of scan.006/.010 agree within 3% (2,072-2,080, 1,056, 3,338-3,340).
    #[serde(default)]
    pub onchip_kernel_cycles: Option<f64>,
}

/// The embedded constants of every calibrated chip.
pub fn hlo_params() -> Vec<HloParams> {
    // Checked by a unit test, so this cannot fail in a released binary.
    serde_json::from_str(include_str!("calibration.json")).expect("embedded hlo calibration.json is valid")
}

/// The cost of one kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelCost {
    /// Kernel name: the instruction that anchors it (its dot, reduce, or last op).
    pub name: String,
    /// Loop, reduce, MXU or unmodelled.
    pub kind: KernelKind,
    /// Instructions it computes (program order; a fused op recomputed by several kernels is listed in each).
    pub instructions: Vec<String>,
    /// Cycles.
    pub cycles: u64,
    /// Start cycle in the sequential kernel order.
    pub start_cycle: u64,
    /// What limits it.
    pub bound_by: Bound,
    /// Nominal FLOPs (2 per multiply-add on the MXU; one per element for elementwise ops and reductions).
    pub flops: u64,
    /// HBM bytes read and written, on padded (tiled) sizes.
    pub hbm_bytes: u64,
    /// HBM bytes on logical sizes.
    pub hbm_unpadded_bytes: u64,
    /// `hbm_bytes - hbm_unpadded_bytes`: traffic spent on tile padding.
    pub padding_bytes: u64,
    /// Peak VMEM of its windows.
    pub vmem_bytes: u64,
    /// Its instructions' node ids in the flattened graph ([`super::graph::Graph`]), for dependency walks.
    #[serde(skip)]
    pub nodes: Vec<usize>,
}

/// The cost of one execution of a module's entry computation on one chip.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModuleCost {
    /// Chip preset name.
    pub chip: String,
    /// TensorCore cycles (the sum over kernels, run one after another).
    pub total_cycles: u64,
    /// Microseconds at the chip's clock.
    pub time_us: f64,
    /// Parameters' padded bytes.
    pub argument_bytes: u64,
    /// Outputs' padded bytes plus a tuple's index table.
    pub output_bytes: u64,
    /// Peak bytes of intermediate buffers live at once in the kernel order.
    pub temp_bytes: u64,
    /// Kernels in execution order.
    pub kernels: Vec<KernelCost>,
    /// Opcodes costed by the conservative rule, with their instruction counts.
    pub unmodelled: BTreeMap<String, u64>,
}

impl ModuleCost {
    /// Bytes the program needs in HBM at once: arguments, outputs and temporaries.
    pub fn footprint_bytes(&self) -> u64 {
        self.argument_bytes
            .saturating_add(self.output_bytes)
            .saturating_add(self.temp_bytes)
    }

    /// Whether the footprint fits `hbm_bytes`.
    pub fn fits(&self, hbm_bytes: u64) -> bool {
        self.footprint_bytes() <= hbm_bytes
    }

    /// The kernel sequence as a Chrome trace (one `X` event per kernel, one thread per kernel kind).
    pub fn chrome_trace(&self, clock_hz: f64) -> serde_json::Value {
        let us = |c: u64| c as f64 * 1e6 / clock_hz;
        let tid = |k: KernelKind| match k {
            KernelKind::Mxu => 1,
            KernelKind::Loop => 2,
            KernelKind::Reduce => 3,
            KernelKind::Unmodelled => 4,
            KernelKind::While | KernelKind::Conditional => 5,
        };
        let mut events = vec![
            serde_json::json!({"ph":"M","name":"process_name","pid":0,"args":{"name":format!("TensorCore ({})", self.chip)}}),
        ];
        for (name, t) in [
            ("MXU fusions", 1),
            ("loop fusions", 2),
            ("reduce fusions", 3),
            ("unmodelled", 4),
            ("loops and conditionals", 5),
        ] {
            events.push(serde_json::json!({"ph":"M","name":"thread_name","pid":0,"tid":t,"args":{"name":name}}));
        }
        for k in &self.kernels {
            events.push(serde_json::json!({
                "ph": "X", "pid": 0, "tid": tid(k.kind), "name": k.name,
                "ts": us(k.start_cycle), "dur": us(k.cycles),
                "args": {"cycles": k.cycles, "bound_by": k.bound_by, "flops": k.flops, "hbm_bytes": k.hbm_bytes,
                         "padding_bytes": k.padding_bytes, "instructions": k.instructions.len()}
            }));
        }
        serde_json::json!({"traceEvents": events, "displayTimeUnit": "ns"})
    }
}

/// Element type of a dot/convolution operand, for the MXU model.
fn dtype_of(p: PrimitiveType) -> Dtype {
    match p.name() {
        "bf16" => Dtype::Bfloat16,
        "f16" => Dtype::Float16,
        "s8" | "u8" | "s4" | "u4" => Dtype::Int8,
        "f8e4m3fn" | "f8e4m3" | "f8e4m3fnuz" | "f8e4m3b11fnuz" => Dtype::Float8E4m3fn,
        "f8e5m2" | "f8e5m2fnuz" => Dtype::Float8E5m2,
        "s32" | "u32" => Dtype::Int32,
        _ => Dtype::Float32,
    }
}

fn bits_of(s: &Shape) -> u64 {
    match s {
        Shape::Array(a) => a.element_type.bit_width() as u64,
        Shape::Tuple(e) => e.first().map_or(32, bits_of),
        _ => 32,
    }
}

fn prod(dims: &[u64], idx: &[usize]) -> u64 {
    idx.iter()
        .map(|&i| dims.get(i).copied().unwrap_or(1))
        .fold(1u64, |a, d| a.saturating_mul(d))
}

/// The MXU work of a dot or convolution node, and its FLOPs.
fn mxu_work(g: &Graph<'_>, node: &Node<'_>) -> Option<(MxuWork, u64)> {
    let lhs = &g.nodes[*node.operands.first()?];
    let rhs = &g.nodes[*node.operands.get(1)?];
    let ld = dims_of(&lhs.ins.shape);
    let rd = dims_of(&rhs.ins.shape);
    let dtype = match &lhs.ins.shape {
        Shape::Array(a) => dtype_of(a.element_type),
        _ => return None,
    };
    let out_bits = bits_of(&node.ins.shape);
    let to_idx = |v: Option<Vec<i64>>| -> Vec<usize> {
        v.unwrap_or_default()
            .into_iter()
            .filter(|&x| x >= 0)
            .map(|x| x as usize)
            .collect()
    };
    if node.class == OpClass::Dot {
        let lb = to_idx(node.ins.int_list("lhs_batch_dims"));
        let lc = to_idx(node.ins.int_list("lhs_contracting_dims"));
        let rb = to_idx(node.ins.int_list("rhs_batch_dims"));
        let rc = to_idx(node.ins.int_list("rhs_contracting_dims"));
        let batch = prod(&ld, &lb);
        let k = prod(&ld, &lc);
        let lfree: Vec<usize> = (0..ld.len()).filter(|i| !lb.contains(i) && !lc.contains(i)).collect();
        let rfree: Vec<usize> = (0..rd.len()).filter(|i| !rb.contains(i) && !rc.contains(i)).collect();
        let m = prod(&ld, &lfree);
        let n = prod(&rd, &rfree);
        let flops = 2u64
            .saturating_mul(batch)
            .saturating_mul(m)
            .saturating_mul(k)
            .saturating_mul(n);
        return Some((
            MxuWork {
                batch: batch.max(1),
                m: m.max(1),
                k: k.max(1),
                n: n.max(1),
                taps_h: 1,
                taps_w: 1,
                dtype,
                out_bits,
                conv: false,
            },
            flops,
        ));
    }
    // Convolution: dim_labels like `b01f_01io->b01f`; window `size=3x3 ...`.
    let labels = node.ins.attr("dim_labels")?;
    let (lhs_l, rest) = labels.split_once('_')?;
    let (rhs_l, out_l) = rest.split_once("->")?;
    let pos = |l: &str, c: char| l.find(c);
    let od = dims_of(&node.ins.shape);
    let groups = node
        .ins
        .attr("feature_group_count")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1)
        .max(1);
    let nb = ld.get(pos(lhs_l, 'b')?).copied()?;
    let cin = ld.get(pos(lhs_l, 'f')?).copied()? / groups;
    let cout = rd.get(pos(rhs_l, 'o')?).copied()?;
    let spatial_out: u64 = out_l
        .char_indices()
        .filter(|(_, c)| c.is_ascii_digit())
        .map(|(i, _)| od.get(i).copied().unwrap_or(1))
        .fold(1u64, |a, d| a.saturating_mul(d));
    let taps: Vec<u64> = rhs_l
        .char_indices()
        .filter(|(_, c)| c.is_ascii_digit())
        .map(|(i, _)| rd.get(i).copied().unwrap_or(1))
        .collect();
    // With an input dilation, only every lhs_dilate-th tap of the window meets a real input element (XLA writes
    // batched matmuls as convolutions with window size = lhs_dilate: one real tap per batch position).
    let dilate: Vec<u64> = node
        .ins
        .attr("window")
        .and_then(|w| w.split_whitespace().find_map(|f| f.strip_prefix("lhs_dilate=")))
        .map(|d| {
            d.trim_end_matches('}')
                .split('x')
                .map(|x| x.parse().unwrap_or(1))
                .collect()
        })
        .unwrap_or_default();
    let taps: Vec<u64> = taps
        .iter()
        .enumerate()
        .map(|(i, &t)| t.div_ceil(dilate.get(i).copied().unwrap_or(1).max(1)))
        .collect();
    let taps_h = taps.first().copied().unwrap_or(1).max(1);
    let taps_w = taps.iter().skip(1).fold(1u64, |a, &d| a.saturating_mul(d)).max(1);
    let m = nb.saturating_mul(spatial_out);
    let flops = 2u64
        .saturating_mul(m)
        .saturating_mul(taps_h * taps_w)
        .saturating_mul(cin)
        .saturating_mul(cout);
    Some((
        MxuWork {
            batch: 1,
            m: m.max(1),
            k: cin.max(1),
            n: cout.max(1),
            taps_h,
            taps_w,
            dtype,
            out_bits,
            conv: true,
        },
        flops,
    ))
}

/// VPU work of one fused node: (op blocks, largest array blocks) in 1024 padded elements, and nominal FLOPs.
/// Cheap elementwise ops ride along in the loop's per-block cost (the compiler's estimates barely grow with
/// their number); transcendentals, reductions, relayouts and concatenations count their blocks; ops that only
/// index (broadcast, reshape, slice, iota) do no vector work.
fn vpu_blocks(g: &Graph<'_>, node: &Node<'_>, sizer: &Sizer) -> Result<((f64, f64), u64), HloError> {
    let out = sizer.shape(&node.ins.shape)?.padded_elements as f64 / VREG_ELEMENTS as f64;
    let n = elements(&node.ins.shape);
    Ok(match node.class {
        OpClass::Elementwise => ((0.0, out), n),
        OpClass::Relayout => ((out, out), 0),
        OpClass::Transcendental => ((out, out), n),
        OpClass::Movement => match node.ins.opcode.as_str() {
            // In place: only the update moves.
            "dynamic-update-slice" => {
                let u = match node.operands.get(1) {
                    Some(&o) => sizer.shape(&g.nodes[o].ins.shape)?.padded_elements as f64 / VREG_ELEMENTS as f64,
                    None => out,
                };
                ((u, u), 0)
            }
            "pad" | "concatenate" | "reverse" => ((out, out), 0),
            _ => ((0.0, out), 0),
        },
        OpClass::Reduce => {
            let input = node.operands.first().map(|&o| &g.nodes[o].ins.shape);
            match input {
                Some(s) => {
                    let b = sizer.shape(s)?.padded_elements as f64 / VREG_ELEMENTS as f64;
                    ((b, b), elements(s))
                }
                None => ((0.0, out), 0),
            }
        }
        _ => ((0.0, 0.0), 0),
    })
}

/// The op model's kernel for an unfused VPU op, when its class maps onto one of the model's.
/// Its vector work counts whole vregs ([`super::bytes::vreg_elements`]). `input` stands for the node's first operand (a narrowed reduction's narrow array); `bytes` are the kernel's
/// HBM bytes read, written and unpadded.
fn single_op_kernel(
    g: &Graph<'_>,
    node: &Node<'_>,
    input: Option<&Shape>,
    bytes: (u64, u64, u64),
    sizer: &Sizer,
    chip: &ChipModel,
) -> Result<Option<crate::tensorcore::KernelCost>, HloError> {
    let (in_bytes, out_bytes, unpadded) = bytes;
    let out = sizer.shape(&node.ins.shape)?.vreg_elements as f64 / VREG_ELEMENTS as f64;
    let first_in = input.or_else(|| node.operands.first().map(|&o| &g.nodes[o].ins.shape));
    let (class, blocks, bits) = match (node.class, node.ins.opcode.as_str()) {
        (OpClass::Elementwise, "convert") | (OpClass::Transcendental, _) => {
            (VpuClass::Unary, out, first_in.map_or(32, bits_of))
        }
        (OpClass::Elementwise, _) => (VpuClass::Binary, out, bits_of(&node.ins.shape)),
        (OpClass::Reduce, "reduce") => match first_in {
            Some(s) => (
                VpuClass::Reduce,
                sizer.shape(s)?.vreg_elements as f64 / VREG_ELEMENTS as f64,
                bits_of(s),
            ),
            None => return Ok(None),
        },
        (OpClass::Relayout, _) => (VpuClass::Transpose, out, bits_of(&node.ins.shape)),
        (OpClass::Movement, "concatenate" | "pad") => (VpuClass::Concat, out, bits_of(&node.ins.shape)),
        _ => return Ok(None),
    };
    let k = Kernel {
        name: "fusion",
        work: Work::Vpu {
            class,
            blocks,
            elem_bytes: bits.div_ceil(8).max(1),
        },
        in_bytes,
        out_bytes,
        unpadded_bytes: unpadded,
    };
    Ok(Some(time_kernel(&k, chip)))
}

fn is_scalar_constant(node: &Node<'_>) -> bool {
    node.ins.opcode == "constant" && dims_of(&node.ins.shape).is_empty()
}

/// A kernel's HBM traffic on padded and logical sizes.
struct Traffic {
    in_bytes: u64,
    out_bytes: u64,
    out_elems: u64,
    unpadded: u64,
}

/// The bytes kernel `k` reads and writes in HBM: inputs and outputs not in VMEM, scalar constants aside, a
/// dynamic-update-slice's buffer updated in place ([`super::inplace`]).
fn kernel_traffic(g: &Graph<'_>, k: &Group, sizer: &Sizer, in_vmem: &BTreeSet<usize>) -> Result<Traffic, HloError> {
    let mut t = Traffic {
        in_bytes: 0,
        out_bytes: 0,
        out_elems: 0,
        unpadded: 0,
    };
    let (updated, updates) = super::inplace::in_place_updates(g, k);
    let windowed = super::inplace::windowed_reads(g, k, sizer)?;
    for &i in &k.inputs {
        if is_scalar_constant(&g.nodes[i]) || in_vmem.contains(&i) || updated.contains(&i) {
            continue;
        }
        let s = sizer.shape(&g.nodes[i].ins.shape)?;
        let (padded, logical) = match windowed.get(&i) {
            Some(&w) => (w, w.min(s.logical_bytes)),
            None => (s.padded_bytes, s.logical_bytes),
        };
        t.in_bytes = t.in_bytes.saturating_add(padded);
        t.unpadded = t.unpadded.saturating_add(logical);
    }
    for &o in &k.outputs {
        if in_vmem.contains(&o) {
            continue;
        }
        let s = sizer.shape(&g.nodes[updates.get(&o).copied().unwrap_or(o)].ins.shape)?;
        t.out_bytes = t.out_bytes.saturating_add(s.padded_bytes);
        t.out_elems = t.out_elems.saturating_add(s.padded_elements);
        t.unpadded = t.unpadded.saturating_add(s.logical_bytes);
    }
    Ok(t)
}

/// A kernel the TensorCore op model timed (`kc`), with tpusim's kernel fields.
fn op_model_cost(
    g: &Graph<'_>,
    k: &Group,
    kind: KernelKind,
    kc: &crate::tensorcore::KernelCost,
    flops: u64,
    total_bytes: u64,
    unpadded: u64,
) -> KernelCost {
    KernelCost {
        name: g.nodes[k.anchor].ins.name.clone(),
        kind,
        instructions: k.members.iter().map(|&m| g.nodes[m].ins.name.clone()).collect(),
        cycles: kc.cycles,
        start_cycle: 0,
        bound_by: kc.bound,
        flops,
        hbm_bytes: total_bytes,
        hbm_unpadded_bytes: unpadded,
        padding_bytes: total_bytes.saturating_sub(unpadded),
        vmem_bytes: kc.vmem_bytes,
        nodes: k.members.clone(),
    }
}

/// Costs one kernel. `vmem` holds the intermediates placed in VMEM and, apart, a loop body's on-chip state:
/// both move no HBM bytes, but only the first spares a loop kernel its HBM loop pipeline (scan.018's body
/// kernel, two of its three inputs on chip, costs the compiler 7,291 cycles per trip on v5e, the pipeline's
/// figure).
fn cost_kernel(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
    vmem: (&BTreeSet<usize>, &BTreeSet<usize>, Option<&BTreeSet<usize>>),
    unmodelled: &mut BTreeMap<String, u64>,
) -> Result<KernelCost, HloError> {
    let (placed, state, copied) = vmem;
    let joined;
    let in_vmem = if state.is_empty() {
        placed
    } else {
        joined = placed.union(state).copied().collect::<BTreeSet<usize>>();
        &joined
    };
    if super::scalar::on_scalar_unit(g, k) {
        return Ok(super::scalar::scalar_kernel(g, k));
    }
    if let Some(c) = super::batchnorm::epilogue_reduction(g, k, sizer, hp)? {
        return Ok(c);
    }
    let p = &chip.params;
    let Traffic {
        in_bytes,
        out_bytes,
        out_elems,
        unpadded,
    } = kernel_traffic(g, k, sizer, in_vmem)?;
    let total_bytes = in_bytes.saturating_add(out_bytes);
    let bw = hp.hbm_bytes_per_cycle.max(1e-9);
    let dma = total_bytes as f64 / bw;
    let KernelWork {
        max_blocks,
        flops,
        vpu,
        op_blocks,
        mxu,
    } = kernel_work(g, k, (sizer, chip, hp), in_vmem, unmodelled, out_elems)?;
    let scoped = chip.scoped_vmem_bytes;
    // A kernel of one op is the case the TensorCore op model was calibrated on: time it there, as a narrowed
    // reduction, one reduce of its narrow input (`narrow_reduce`).
    let single = match (k.kind, k.members.as_slice()) {
        (KernelKind::Loop | KernelKind::Reduce, [only]) => Some((*only, None)),
        (KernelKind::Reduce, _) => super::narrow_reduce::narrowed_kernel(g, &k.members).map(|(r, x)| (r, Some(x))),
        _ => None,
    };
    if let Some((only, narrow)) = single {
        let input = narrow.map(|x| &g.nodes[x].ins.shape);
        if let Some(kc) = single_op_kernel(g, &g.nodes[only], input, (in_bytes, out_bytes, unpadded), sizer, chip)? {
            return Ok(op_model_cost(g, k, k.kind, &kc, flops, total_bytes, unpadded));
        }
    }
    let dot = k
        .members
        .iter()
        .copied()
        .find(|&m| matches!(g.nodes[m].class, OpClass::Dot | OpClass::Convolution));
    if let (Some(dot), [MxuPass { work: w, .. }]) = (dot, mxu.as_slice()) {
        let b = (in_bytes, out_bytes, unpadded);
        if let Some(kc) = super::matvec::matvec_kernel(g, k, dot, w, b, sizer, chip, hp.loop_block_cycles)? {
            return Ok(op_model_cost(g, k, KernelKind::Loop, &kc, flops, total_bytes, unpadded));
        }
    }
    let (launch, body, bound, vmem) = match k.kind {
        KernelKind::Mxu => {
            // Only a loop body's kernels on chip skip the per-window DMA cycles ([`super::onchip_kernel`]).
            let onchip = onchip_launch(g, k, hp, p.mxu_launch_cycles, (in_vmem, state, None)).is_some();
            let (body, bound, vmem) = mxu_body(g, k, sizer, chip, hp, (in_vmem, onchip), &mxu, vpu)?;
            (p.mxu_launch_cycles, body, bound, vmem)
        }
        KernelKind::Loop | KernelKind::Reduce => {
            let blocks = Blocks {
                max: max_blocks,
                vpu,
                ops: op_blocks,
            };
            let (body, bound) = loop_body(g, k, sizer, hp, placed, blocks, dma);
            (p.launch_cycles, body, bound, total_bytes.min(scoped))
        }
        KernelKind::Unmodelled | KernelKind::While | KernelKind::Conditional => {
            // Gathers read only the rows they gather (as many bytes as they write); scatters update their first
            // operand in place (its bytes are the result's, counted once).
            let anchor = &g.nodes[k.anchor];
            // Only when the kernel reads it from memory (a broadcast initial value is generated in place).
            let first = match anchor.operands.first() {
                Some(&o) if k.inputs.contains(&forwarded(g, o)) => sizer.shape(&g.nodes[o].ins.shape)?.padded_bytes,
                _ => 0,
            };
            let moved = match anchor.ins.opcode.as_str() {
                "gather" | "dynamic-slice" => total_bytes.saturating_sub(first).saturating_add(out_bytes),
                "scatter" => total_bytes.saturating_sub(first),
                _ => total_bytes,
            };
            let body = moved as f64 / bw;
            (p.launch_cycles, body, Bound::Hbm, total_bytes.min(scoped))
        }
    };
    let launch_c = match k.kind {
        KernelKind::Mxu => mxu_launch(g, k, hp, chip, launch, (in_vmem, state, copied), &mxu),
        // A loop, reduce or unmodelled kernel pays the op model's whole launch, not overlapped with the previous
        // kernel. Evidence (compiler corpus, 1,300 kLoop fusions and single-op kernels over 5 chips): none is
        // estimated below it (minimum kLoop estimate v4 611, v5e 1818, v5p 2117, v6e 2116, tpu7x 2296 cycles, at
        // the op model's `launch_cycles` 607, 1813, 2117, 2116, 2289), inside programs of up to hundreds of kernels
        // as alone; MXU (kOutput) fusions do go below theirs (v5e 280 cycles), so only they keep `launch_factor`.
        _ => chip.loop_launch_cycles(),
    };
    let body_c = body.max(0.0).round() as u64;
    let bound = if launch_c > body_c { Bound::Launch } else { bound };
    let mut names = Vec::with_capacity(k.members.len());
    for &m in &k.members {
        names.push(g.nodes[m].ins.name.clone());
    }
    Ok(KernelCost {
        name: g.nodes[k.anchor].ins.name.clone(),
        kind: k.kind,
        instructions: names,
        cycles: launch_c + body_c,
        start_cycle: 0,
        bound_by: bound,
        flops,
        hbm_bytes: total_bytes,
        hbm_unpadded_bytes: unpadded,
        padding_bytes: total_bytes.saturating_sub(unpadded),
        vmem_bytes: vmem,
        nodes: k.members.clone(),
    })
}

/// A kernel's work member by member: MXU passes for its products, vector cycles and blocks for the rest (less
/// what reductions sharing one sweep of a matmul's tiles, or row statistics in its pass, save).
fn kernel_work(
    g: &Graph<'_>,
    k: &Group,
    (sizer, chip, hp): (&Sizer, &ChipModel, &HloParams),
    in_vmem: &BTreeSet<usize>,
    unmodelled: &mut BTreeMap<String, u64>,
    out_elems: u64,
) -> Result<KernelWork, HloError> {
    let mut max_blocks = out_elems as f64 / VREG_ELEMENTS as f64;
    let mut flops = 0u64;
    let mut vpu = 0.0;
    let mut op_blocks = 0.0;
    let mut mxu: Vec<MxuPass> = Vec::new();
    for &m in &k.members {
        let node = &g.nodes[m];
        match node.class {
            OpClass::Dot | OpClass::Convolution => {
                let (pass, f) = mxu_pass(g, k, m, sizer, chip, hp, in_vmem)?;
                flops = flops.saturating_add(f);
                mxu.push(pass);
            }
            OpClass::Unmodelled => {
                *unmodelled.entry(node.ins.opcode.clone()).or_insert(0) += 1;
            }
            _ => {
                let (c, f) = vpu_blocks(g, node, sizer)?;
                op_blocks += c.0;
                vpu += c.0
                    * if k.kind == KernelKind::Mxu {
                        hp.mxu_fused_op_cycles.unwrap_or(hp.fused_op_cycles)
                    } else {
                        hp.fused_op_cycles
                    };
                max_blocks = max_blocks.max(c.1);
                flops = flops.saturating_add(f);
            }
        }
    }
    // Several reductions of a matmul's result share one sweep of its tiles ([`super::epilogue_sweep`]).
    let shared = super::epilogue_sweep::shared_blocks(g, k, sizer)?;
    vpu -= shared * hp.mxu_fused_op_cycles.unwrap_or(hp.fused_op_cycles);
    // Row statistics in the matmul's own pass sweep the result tiles once ([`super::rowstats::one_pass`]).
    if k.kind == KernelKind::Mxu && super::rowstats::one_pass(g, k) {
        vpu = super::rowstats::one_pass_vector_cycles(max_blocks, hp.mxu_fused_op_cycles.unwrap_or(hp.fused_op_cycles));
    }
    Ok(KernelWork {
        max_blocks,
        flops,
        vpu,
        op_blocks,
        mxu,
    })
}

/// What [`kernel_work`] returns.
struct KernelWork {
    max_blocks: f64,
    flops: u64,
    vpu: f64,
    op_blocks: f64,
    mxu: Vec<MxuPass>,
}

/// The value operand `o` forwards through free ops (an element of a tuple built in the graph, a bitcast, a copy):
/// the kernel input it stands for. A gather's table returned by an inlined call (a log-softmax computed in one
/// call and gathered from in another, softmax_xent.023) is that call's value, read only for the rows gathered.
fn forwarded(g: &Graph<'_>, mut o: usize) -> usize {
    for _ in 0..64 {
        let n = &g.nodes[o];
        if n.class != OpClass::Free {
            break;
        }
        let from = n.operands.first().map(|&t| &g.nodes[t]);
        o = match (n.ins.opcode.as_str(), from) {
            ("get-tuple-element", Some(t)) if t.ins.opcode == "tuple" => {
                match n.ins.tuple_index().and_then(|i| t.operands.get(i)) {
                    Some(&x) => x,
                    None => break,
                }
            }
            ("bitcast" | "copy-done" | "copy-start" | "reshape", Some(_)) if n.operands.len() == 1 => n.operands[0],
            _ => break,
        };
    }
    o
}

/// Fixed cycles of MXU kernel `k`: the op model's launch scaled by `launch_factor`, or the on-chip launch when
/// all its operands and results are on chip ([`onchip_launch`]).
fn mxu_launch(
    g: &Graph<'_>,
    k: &Group,
    hp: &HloParams,
    chip: &ChipModel,
    launch: f64,
    vmem: (&BTreeSet<usize>, &BTreeSet<usize>, Option<&BTreeSet<usize>>),
    mxu: &[MxuPass],
) -> u64 {
    let hbm_launch = hbm_mxu_launch(hp, launch);
    match onchip_launch(g, k, hp, launch, vmem) {
        Some(onchip) => {
            let rows = mxu.iter().map(|p| p.work.m.min(p.work.n)).min().unwrap_or(0);
            super::loop_state::onchip_mxu_launch(
                onchip,
                hp.onchip_kernel_cycles,
                hbm_launch,
                rows,
                chip.loop_launch_cycles(),
            )
        }
        None => hbm_launch,
    }
}

/// The op model's MXU `launch` scaled by `launch_factor`: the fixed cycles of a kernel streaming from HBM.
fn hbm_mxu_launch(hp: &HloParams, launch: f64) -> u64 {
    (launch * hp.launch_factor.clamp(0.2, 1.0)).max(0.0).round() as u64
}

/// The on-chip launch MXU kernel `k` pays when all its operands and results are on chip (`None` when they are
/// not, or when the chip's on-chip launch is no cheaper than `launch`, the HBM one): some of them in a loop's
/// on-chip `state` ([`super::loop_state`]), or, in the entry of a chip without megacore, with the parameters the
/// compiler `copied` on chip before it ([`super::onchip_kernel`]).
fn onchip_launch(
    g: &Graph<'_>,
    k: &Group,
    hp: &HloParams,
    launch: f64,
    vmem: (&BTreeSet<usize>, &BTreeSet<usize>, Option<&BTreeSet<usize>>),
) -> Option<Option<f64>> {
    let (on_chip, state, copied) = vmem;
    let free = |i: usize| is_scalar_constant(&g.nodes[i]);
    let touches_state = k.inputs.iter().chain(&k.outputs).any(|n| state.contains(n));
    if touches_state {
        let all =
            k.inputs.iter().all(|&i| free(i) || on_chip.contains(&i)) && k.outputs.iter().all(|o| on_chip.contains(o));
        return all.then_some(hp.onchip_mxu_launch_cycles);
    }
    let copied = copied?;
    if !super::onchip_kernel::reads_and_writes_on_chip(g, k, on_chip, copied, &free) {
        return None;
    }
    let c = hp.onchip_kernel_cycles.filter(|c| c.is_finite() && *c >= 0.0)?;
    ((c.round() as u64) < hbm_mxu_launch(hp, launch)).then_some(Some(c))
}

/// One dot or convolution of an MXU kernel, as its window plan will run it.
struct MxuPass {
    /// Its work (transposed for skinny products).
    work: MxuWork,
    /// Which operands are already on chip.
    residency: Residency,
    /// Cycles it spends at least streaming operands too large for on-chip memory ([`super::spill`]).
    spill: f64,
    /// Its stationary operand's layout ([`super::mxu_layout`]).
    layout: MxuLayout,
}

/// Dot or convolution `m` of MXU kernel `k` as its window plan will run it, with its FLOPs.
fn mxu_pass(
    g: &Graph<'_>,
    k: &Group,
    m: usize,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
    in_vmem: &BTreeSet<usize>,
) -> Result<(MxuPass, u64), HloError> {
    let m_node = m;
    let node = &g.nodes[m];
    let w = mxu_work(g, node).ok_or_else(|| {
        HloError::Unsupported(format!(
            "`{}`: {} operands or attributes are not understood",
            node.ins.name, node.ins.opcode
        ))
    })?;
    // A result consumed inside the kernel (scores reduced by a softmax), or written to VMEM, never goes to HBM.
    let stays = !k.outputs.contains(&m) || in_vmem.contains(&m);
    let resident = |o: Option<&usize>| o.is_some_and(|&o| operand_resident(g, k, o, sizer, in_vmem).unwrap_or(false));
    let residency = Residency {
        lhs: resident(node.operands.first()),
        rhs: resident(node.operands.get(1)),
        out: stays,
    };
    let spill = super::spill::spilled_operand_cycles(g, node, residency, sizer, chip, hp.hbm_bytes_per_cycle)?;
    // A kernel gradient streams its operands once ([`super::conv_backward`]).
    let kg = super::conv_backward::kernel_gradient(g, node, &w.0, residency, sizer, chip, hp.hbm_bytes_per_cycle)?;
    if let Some(kg) = kg {
        let spill = kg.stream_cycles.max(kg.transpose_cycles).max(spill);
        let pass = MxuPass {
            work: kg.work,
            residency: kg.residency,
            spill,
            layout: MxuLayout::default(),
        };
        return Ok((pass, w.1));
    }
    // A strided convolution reads its whole input ([`super::conv_strided`]).
    let strided = super::conv_strided::strided_input_cycles(g, node, residency.lhs, sizer, hp.hbm_bytes_per_cycle)?;
    // A computed operand streams the HBM inputs it is made from ([`super::prologue`]).
    let prologue = super::prologue::prologue_input_cycles(g, k, m, sizer, in_vmem, hp.hbm_bytes_per_cycle)?;
    // A depthwise convolution takes a multiply-add per output block and tap ([`super::conv_depthwise`]).
    let depthwise = super::conv_depthwise::depthwise_floor_cycles(g, node, &w.0, sizer, chip)?;
    let spill = spill.max(strided).max(prologue).max(depthwise);
    let m = w.0.m;
    let mut w0 = w.0;
    // A 16-bit result widened back to f32 in the kernel drains as the accumulator ([`super::drain`]).
    w0.out_bits = super::drain::drained_bits(g, k, m_node, w0.out_bits);
    let (work, residency) = super::matvec::skinny_transposed(w0, residency);
    let (work, residency) = super::narrow_result::narrow_transposed(work, residency);
    let transposed = work.m != m;
    let layout = super::mxu_layout::stationary_layout(g, node, work.batch, transposed, sizer)?;
    let pass = MxuPass {
        work,
        residency,
        spill,
        layout,
    };
    Ok((pass, w.1))
}

/// The body of an MXU kernel: each dot's window plan (epilogue rates scaled by `mxu_epilogue_factor`, results
/// kept in VMEM not written; without the per-window DMA overhead when the kernel is all on chip, `vmem.1`:
/// [`super::loop_state::onchip_window_body`]), or its fused vector work if longer, plus the epilogue results it
/// writes to HBM; with what bounds it and its peak VMEM.
#[allow(clippy::too_many_arguments)]
fn mxu_body(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
    vmem: (&BTreeSet<usize>, bool),
    mxu: &[MxuPass],
    vpu: f64,
) -> Result<(f64, Bound, u64), HloError> {
    let (in_vmem, onchip) = vmem;
    let bw = hp.hbm_bytes_per_cycle.max(1e-9);
    if mxu.is_empty() {
        return Err(HloError::Unsupported("MXU kernel without a dot".into()));
    }
    let mut fused = chip.clone();
    let f = hp.mxu_epilogue_factor.clamp(0.0, 1.0);
    fused.params.mm_out_16bit *= f;
    fused.params.mm_out_32bit *= f;
    fused.params.mm_acc_32bit *= f;
    // A kernel recomputing a cheap producer dot (attention scores in the softmax and its gradient)
    // runs each dot's window plan in turn.
    let (mut mxu_body, mut vmem, mut bound) = (0.0, 0, Bound::Mxu);
    let mut longest = 0.0;
    for pass in mxu {
        let plan = plan_mxu_layout(&pass.work, &fused, pass.residency, pass.layout);
        // The window plan writes no result kept in VMEM (`Residency::out`), so the plan it picks is the
        // best one without that traffic; never below streaming the operands that cannot be on chip.
        let body = if onchip {
            super::loop_state::onchip_window_body(plan.body_cycles, plan.iterations, chip.params.mxu_iter_cycles)
        } else {
            plan.body_cycles
        };
        let body = body.max(pass.spill);
        mxu_body += body;
        vmem = vmem.max(plan.vmem_bytes);
        if body > longest {
            longest = body;
            bound = plan.bound;
        }
    }
    // The window plan streams the dot's operands itself; most producers' inputs are VMEM-resident
    // intermediates, so no separate HBM term.
    // Results of the epilogue written to HBM (the exp of a softmax fused after its scores' dot): the
    // window plan does not stream them.
    // A dynamic-update-slice writes only its update, in place ([`super::inplace`]).
    let (_, updates) = super::inplace::in_place_updates(g, k);
    let mut epi = 0u64;
    for &o in &k.outputs {
        if !in_vmem.contains(&o) && !matches!(g.nodes[o].class, OpClass::Dot | OpClass::Convolution) {
            let written = updates.get(&o).copied().unwrap_or(o);
            epi = epi.saturating_add(sizer.shape(&g.nodes[written].ins.shape)?.padded_bytes);
        }
    }
    let epi = epi.saturating_add(super::epilogue_inputs::epilogue_input_bytes(g, k, sizer, in_vmem)?);
    let epi = epi as f64 / bw;
    // The compiler adds that traffic to the kernel's compute rather than hiding it under it.
    let body = f64::max(mxu_body, vpu) + epi;
    let bound = if body == mxu_body { bound } else { Bound::Vpu };
    Ok((body, bound, vmem))
}

/// A loop or reduce kernel's vector work in 1024-element blocks.
#[derive(Clone, Copy)]
struct Blocks {
    /// Blocks of its largest array.
    max: f64,
    /// Cycles of its fused ops.
    vpu: f64,
    /// Op blocks (the fused ops' blocks, before their per-block cost).
    ops: f64,
}

/// The body of a loop or reduce kernel: its loop pipeline over the largest array (per block, plus per full-size
/// array streamed) or its fused ops, whichever is longer, or only its vector work when nothing full-size is
/// streamed from HBM; at least its HBM transfer `dma`; plus its row-wise cross-lane work when it streams
/// ([`super::cross_lane`]). With what bounds it.
fn loop_body(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    hp: &HloParams,
    in_vmem: &BTreeSet<usize>,
    blocks: Blocks,
    dma: f64,
) -> (f64, Bound) {
    // Inputs read through slices stream only their windows (sizes already failed in `kernel_traffic` if bad).
    let windowed = super::inplace::windowed_reads(g, k, sizer).unwrap_or_default();
    // Arrays at least half the largest one's size are streamed block by block with it.
    let full = |i: &usize| {
        sizer
            .shape(&g.nodes[*i].ins.shape)
            .map(|s| 2.0 * s.padded_elements as f64 >= blocks.max * VREG_ELEMENTS as f64)
            .unwrap_or(false)
    };
    let full_inputs: Vec<usize> = k
        .inputs
        .iter()
        .copied()
        .filter(|i| !is_scalar_constant(&g.nodes[*i]) && !windowed.contains_key(i) && full(i))
        .collect();
    let full_outputs: Vec<usize> = k.outputs.iter().copied().filter(|o| full(o)).collect();
    // 16-bit streams widened in the kernel count their share ([`super::widened_stream`]).
    let streams = super::widened_stream::stream_count(g, k, &full_inputs, &full_outputs);
    let streamed = k
        .inputs
        .iter()
        .chain(&k.outputs)
        .any(|i| !is_scalar_constant(&g.nodes[*i]) && !in_vmem.contains(i) && !windowed.contains_key(i) && full(i));
    let compute = if streamed {
        blocks
            .vpu
            .max(blocks.max * (hp.loop_block_cycles + hp.stream_block_cycles * streams.weight))
    } else {
        vmem_resident_compute(blocks, hp)
    };
    let rows = if streamed && streams.rows && super::cross_lane::crosses_lanes(g, k) {
        blocks.max * hp.row_block_cycles.max(0.0)
    } else {
        0.0
    };
    // A convolution's result read whole is swept in its batch-inside layout ([`super::conv_result_pass`]).
    let whole: Vec<usize> = k
        .inputs
        .iter()
        .filter(|i| !windowed.contains_key(i))
        .map(|&i| forwarded(g, i))
        .collect();
    let compute = compute.max(super::conv_result_pass::pass_floor(g, k, &whole, hp).unwrap_or(0.0));
    let body = compute.max(dma) + rows;
    let bound = if dma > compute { Bound::Hbm } else { Bound::Vpu };
    (body, bound)
}

/// Vector cycles of a loop or reduce kernel none of whose full-size arrays is streamed from or to HBM (all in
/// VMEM: the scores of a softmax next to the matmul that made them): no HBM loop pipeline, only the vector work,
/// at the rate of an MXU kernel's fused ops, which also run on tiles already on chip. Evidence (compiler corpus,
/// attention.017 on v5e, scores f32[3,16,431,431]: 10,368 padded blocks): the compiler's one kernel computing the
/// scores' dot, row max, exp and row sum costs 43,792 cycles, 4.2 per block for all of it, where the loop
/// pipeline alone (`loop_block_cycles`, 12.9 on v5e) would cost 134,000 for the exp and sum. Even so each block of
/// the largest array passes the vector unit once, at the loop kernel's op rate, however few ops count blocks:
/// softmax_xent.018 (bf16 logits [151,4480] in VMEM, 665 blocks) `logits - max - log(sum)`, elementwise only,
/// costs the compiler 5,553 cycles on v5e and 3,167 on v6e, 5.6 and 1.6 per block over the launch, where
/// tpusim had the launch alone (1,814 and 2,117); `fused_op_cycles` is 5.3 and 2.5.
fn vmem_resident_compute(blocks: Blocks, hp: &HloParams) -> f64 {
    let ops = blocks.ops * hp.mxu_fused_op_cycles.unwrap_or(hp.fused_op_cycles);
    ops.max(blocks.max * hp.fused_op_cycles)
}

/// Whether a dot operand's value comes from VMEM: an intermediate placed there, or computed in the kernel from
/// inputs that (but for at most a sixteenth of its bytes: biases, scales) are in VMEM or are products of the same
/// kernel ([`super::chained_layer`]).
fn operand_resident(
    g: &Graph<'_>,
    k: &Group,
    operand: usize,
    sizer: &Sizer,
    in_vmem: &BTreeSet<usize>,
) -> Result<bool, HloError> {
    if !k.members.contains(&operand) {
        return Ok(in_vmem.contains(&operand));
    }
    let mut hbm = 0u64;
    let mut any_vmem = false;
    let mut stack = vec![operand];
    let mut seen = BTreeSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        if super::chained_layer::produced_on_chip(g, k, n) {
            any_vmem = true;
        } else if k.members.contains(&n) {
            stack.extend(g.nodes[n].operands.iter().copied());
        } else if in_vmem.contains(&n) {
            any_vmem = true;
        } else if !is_scalar_constant(&g.nodes[n]) {
            hbm = hbm.saturating_add(sizer.shape(&g.nodes[n].ins.shape)?.padded_bytes);
        }
    }
    let own = sizer.shape(&g.nodes[operand].ins.shape)?.padded_bytes;
    Ok(any_vmem && hbm.saturating_mul(16) <= own)
}

/// Where [`place_buffers`] put the intermediates.
struct Placement {
    /// Peak HBM bytes live at once, each kernel's scratch included.
    hbm_peak: u64,
    /// Whether any kernel output lives in HBM (scratch aside).
    hbm_outputs: bool,
    /// The buffers placed in VMEM.
    in_vmem: BTreeSet<usize>,
}

/// Peak bytes of intermediate buffers in HBM in the kernel order, and the buffers placed in VMEM. A buffer lives from the kernel writing it to
/// the last kernel reading it; entry outputs and parameters are not temporaries; buffers that fit the VMEM budget
/// next to the VMEM-resident ones live at that moment stay in VMEM (as the compiler's `S(1)` placements do).
/// `bytes` gives a buffer's size and `eligible` whether a kernel's output may go on chip at all; `scratch[t]`
/// (when given) is HBM live only while kernel `t` runs; `once` are values kernels recompute that the compiler
/// writes once ([`super::written_once`]), buffers like kernel outputs.
fn place_buffers(
    g: &Graph<'_>,
    kernels: &[Group],
    vmem_budget: u64,
    bytes: &dyn Fn(usize) -> Result<u64, HloError>,
    eligible: &dyn Fn(&Group) -> bool,
    scratch: &[u64],
    once: &[super::written_once::WrittenOnce],
) -> Result<Placement, HloError> {
    let outputs: BTreeSet<usize> = g.outputs().into_iter().collect();
    let last_use = super::vmem_copy::hbm_last_use(g, kernels);
    // (start, end, bytes, node, on-chip allowed) in kernel order.
    let mut buffers = Vec::new();
    for (t, k) in kernels.iter().enumerate() {
        let takes_over = takes_over_operands(g, k, t, &last_use, &outputs);
        for &o in &k.outputs {
            if outputs.contains(&o) {
                continue;
            }
            let end = last_use.get(&o).copied().unwrap_or(t).max(t);
            // A result in its operands' buffers is not a second buffer where they end.
            if takes_over && end == t {
                continue;
            }
            buffers.push((if takes_over { t + 1 } else { t }, end, bytes(o)?, o, eligible(k)));
        }
    }
    for w in once {
        buffers.push((w.first, w.last, w.bytes, w.node, eligible(&kernels[w.first])));
    }
    buffers.sort_by_key(|b| b.0);
    let mut hbm = vec![0i128; kernels.len() + 1];
    let mut vmem = vec![0u64; kernels.len() + 1];
    let mut in_vmem = BTreeSet::new();
    let mut hbm_outputs = false;
    for (start, end, b, node, ok) in buffers {
        let peak_vmem = vmem[start..=end].iter().copied().max().unwrap_or(0);
        if ok && peak_vmem.saturating_add(b) <= vmem_budget {
            for v in &mut vmem[start..=end] {
                *v += b;
            }
            in_vmem.insert(node);
        } else {
            hbm[start] += b as i128;
            hbm[end + 1] -= b as i128;
            hbm_outputs |= b > 0;
        }
    }
    for (t, &b) in scratch.iter().enumerate().take(kernels.len()) {
        hbm[t] += b as i128;
        hbm[t + 1] -= b as i128;
    }
    let mut live = 0i128;
    let mut peak = 0i128;
    for d in hbm {
        live += d;
        peak = peak.max(live);
    }
    Ok(Placement {
        hbm_peak: peak.max(0) as u64,
        hbm_outputs,
        in_vmem,
    })
}

/// Whether kernel `k` (at `t`) is a collective whose result takes over its operands' buffers
/// ([`CollectiveKind::reuses_operand_buffers`]): every operand is another kernel's temporary, last read here.
fn takes_over_operands(
    g: &Graph<'_>,
    k: &Group,
    t: usize,
    last_use: &HashMap<usize, usize>,
    outputs: &BTreeSet<usize>,
) -> bool {
    super::collective::CollectiveKind::reuses_operand_buffers(&g.nodes[k.anchor].ins.opcode)
        && !k.inputs.is_empty()
        && k.inputs.iter().all(|i| {
            last_use.get(i) == Some(&t)
                && !outputs.contains(i)
                && !matches!(g.nodes[*i].ins.opcode.as_str(), "parameter" | "constant")
        })
}

/// Whether an f32 value reaches only matmuls (through elementwise and data-movement ops): the compiler's dots
/// round f32 operands to bf16 at default precision, so it writes such a value out in bf16.
fn feeds_only_dots(g: &Graph<'_>, outputs: &BTreeSet<usize>, node: usize) -> bool {
    let is_f32 = |n: usize| matches!(&g.nodes[n].ins.shape, Shape::Array(a) if a.element_type.name() == "f32");
    if !is_f32(node) {
        return false;
    }
    let mut stack = vec![node];
    let mut seen = BTreeSet::new();
    let mut any_dot = false;
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        // A wide fan-out is not followed: the value is kept in f32.
        if seen.len() > 64 || outputs.contains(&n) || g.users[n].is_empty() {
            return false;
        }
        for &u in &g.users[n] {
            let un = &g.nodes[u];
            match un.class {
                OpClass::Dot | OpClass::Convolution => {
                    if un.ins.attr("operand_precision").is_some() || un.ins.attr("precision_config").is_some() {
                        return false;
                    }
                    any_dot = true;
                }
                OpClass::Elementwise | OpClass::Movement | OpClass::Free if is_f32(u) => stack.push(u),
                _ => return false,
            }
        }
    }
    any_dot
}

/// Temp bytes as the compiler allocates them: intermediates it keeps on chip (VMEM, or CMEM on v4) are not
/// temporaries; on a megacore chip without CMEM the two cores both write an MXU kernel's result, which then
/// cannot sit in one core's VMEM; f32 values feeding only matmuls are stored in bf16; kernels' own scratch
/// ([`super::temp`]) is live while they run; a `chained` product's result ([`super::dot_chain`]) is never a whole
/// buffer; and the allocation carries a fixed overhead once a kernel's output lives in HBM.
fn temp_bytes(
    g: &Graph<'_>,
    kernels: &[Group],
    chained: &BTreeSet<usize>,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
) -> Result<u64, HloError> {
    let mxu_on_chip = mxu_results_on_chip(chip);
    let outputs: BTreeSet<usize> = g.outputs().into_iter().collect();
    let bytes = |o: usize| -> Result<u64, HloError> {
        if chained.contains(&o) {
            return Ok(0);
        }
        if let Some(b) = super::temp::loop_result_bytes(g, o, &outputs, sizer)? {
            return Ok(b);
        }
        let b = sizer.shape(&g.nodes[o].ins.shape)?.padded_bytes;
        Ok(if feeds_only_dots(g, &outputs, o) { b / 2 } else { b })
    };
    let eligible = |k: &Group| mxu_on_chip || !super::temp::written_by_both_cores(g, k);
    let scratch = super::temp::kernel_scratch(g, kernels, sizer, !mxu_on_chip)?;
    let once = super::written_once::written_once(g, kernels, sizer)?;
    let placed = place_buffers(g, kernels, hp.temp_fast_bytes, &bytes, &eligible, &scratch, &once)?;
    let base = if placed.hbm_outputs {
        placed.hbm_peak.saturating_add(hp.temp_overhead_bytes)
    } else {
        placed.hbm_peak
    };
    // Kernels reducing over the major (row) dimension: the minor dimension of the input is kept, or all are
    // reduced (one accumulator per kernel).
    let mut across_rows = 0u64;
    for k in kernels {
        for &m in &k.members {
            let n = &g.nodes[m];
            if n.class != OpClass::Reduce || n.ins.opcode != "reduce" {
                continue;
            }
            let Some(&input) = n.operands.first() else { continue };
            let rank = dims_of(&g.nodes[input].ins.shape).len() as i64;
            let dims = n.ins.int_list("dimensions").unwrap_or_default();
            if rank >= 1 && (dims.contains(&0) || dims.len() as i64 == rank) {
                across_rows += 1;
                break;
            }
        }
    }
    Ok(base.saturating_add(across_rows.saturating_mul(hp.temp_row_reduce_bytes)))
}

/// Whether the compiler may keep an MXU kernel's result on chip: not on a megacore chip without CMEM, whose two
/// cores both write it.
fn mxu_results_on_chip(chip: &ChipModel) -> bool {
    !chip.megacore || chip.cmem_bytes > 0
}

/// Bytes of one granule of the compiler's temp allocation.
const TEMP_GRANULE_BYTES: u64 = 16 << 10;

/// `bytes` of temporaries as the compiler's memory analysis reports them: a whole number of 16 KiB granules.
/// Evidence: the `temp_bytes` of every one of the 2,031 corpus records (all five chips) is a multiple of 16,384,
/// a scalar's 512-byte buffer counting 16,384 (reduction.011 on v5p and v6e).
fn temp_granules(bytes: u64) -> u64 {
    bytes.div_ceil(TEMP_GRANULE_BYTES).saturating_mul(TEMP_GRANULE_BYTES)
}

/// Costs one execution of `module`'s entry computation on `chip`.
pub fn cost_module(module: &HloModule, chip: &ChipModel) -> Result<ModuleCost, HloError> {
    let all = hlo_params();
    let preset = all
        .iter()
        .find(|h| h.name == chip.name)
        .ok_or_else(|| HloError::Unsupported(format!("no hlo calibration for chip `{}`", chip.name)))?;
    let mut hp = preset.clone();
    // The chip's fused-kernel stream rate, what-ifs applied (`ChipModel::for_chip`).
    hp.hbm_bytes_per_cycle = chip.hbm.hlo_stream_bytes_per_cycle;
    cost_module_with(module, chip, &hp)
}

/// Like [`cost_module`] with explicit fused-kernel constants (for the fitter).
pub fn cost_module_with(module: &HloModule, chip: &ChipModel, hp: &HloParams) -> Result<ModuleCost, HloError> {
    let sizer = Sizer::new(&chip.name)?;
    let g = Graph::build(module)?;
    let entry = module.entry_computation();
    let mut argument_bytes = 0u64;
    for (_, i) in entry.parameters() {
        argument_bytes = argument_bytes.saturating_add(sizer.shape(&entry.instructions[i].shape)?.padded_bytes);
    }
    let output_bytes = sizer.result_bytes(&entry.instructions[entry.root].shape)?;
    let mut body = cost_graph(module, &g, &sizer, chip, hp, &mut Control::default())?;
    distinct_names(&mut body.kernels);
    Ok(ModuleCost {
        chip: chip.name.clone(),
        total_cycles: body.total,
        time_us: body.total as f64 * 1e6 / chip.clock_hz,
        argument_bytes,
        output_bytes,
        temp_bytes: temp_granules(body.temp),
        kernels: body.kernels,
        unmodelled: body.unmodelled,
    })
}

/// Kernels named after instructions of a computation called several times (a batch norm applied three times)
/// would share names: the second and later, in execution order, get `#2`, `#3`, ...
fn distinct_names(kernels: &mut [KernelCost]) {
    let mut seen: HashMap<String, u32> = HashMap::new();
    for k in kernels {
        let n = seen.entry(k.name.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            k.name = format!("{}#{n}", k.name);
        }
    }
}

/// Deepest nesting of `while` loops and conditionals costed.
const MAX_LOOP_DEPTH: usize = 16;

/// One flat graph's kernels, run one after another.
struct GraphCost {
    kernels: Vec<KernelCost>,
    total: u64,
    temp: u64,
    unmodelled: BTreeMap<String, u64>,
}

/// What a nested graph (a loop body, a branch) adds to the kernel standing for it.
#[derive(Clone)]
struct Nested {
    total: u64,
    temp: u64,
    unmodelled: BTreeMap<String, u64>,
    flops: u64,
    hbm_bytes: u64,
    hbm_unpadded_bytes: u64,
    padding_bytes: u64,
    vmem_bytes: u64,
    bound_by: Bound,
}

/// Nested computations costed so far (each computation once, however many loops run it: a file nesting loops
/// that each run the next level twice costs linear, not exponential, time), and the loop counters read.
#[derive(Default)]
struct Control {
    depth: usize,
    graphs: HashMap<usize, Nested>,
    counters: HashMap<(usize, usize), Option<loops::Counter>>,
    /// The state elements the next loop body costed keeps on chip ([`super::loop_state`]).
    state: Option<BTreeSet<usize>>,
    /// The state elements of the next loop body costed that hold a parameter of the enclosing graph, laid out
    /// as its caller's ([`super::sublane_slice`]).
    laid: Option<BTreeSet<usize>>,
}

/// The nodes of graph `g` (the entry, or the loop body `control` is about to cost) that hold state the compiler
/// keeps on chip ([`super::loop_state`]), and those in the entry's layout: its parameters, or a loop body's
/// state holding them ([`super::sublane_slice`]).
fn state_and_laid(g: &Graph<'_>, control: &mut Control) -> (BTreeSet<usize>, BTreeSet<usize>) {
    let state = control
        .state
        .take()
        .map(|e| super::loop_state::state_nodes(g, &e))
        .unwrap_or_default();
    let laid = match control.laid.take() {
        Some(e) => super::loop_state::state_nodes(g, &e),
        None if control.depth == 0 => (0..g.nodes.len())
            .filter(|&n| g.nodes[n].ins.opcode == "parameter")
            .collect(),
        None => BTreeSet::new(),
    };
    (state, laid)
}

/// Costs flat graph `g` (the entry, or a nested computation at `control.depth`).
fn cost_graph(
    module: &HloModule,
    g: &Graph<'_>,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
    control: &mut Control,
) -> Result<GraphCost, HloError> {
    let (state, laid) = state_and_laid(g, control);
    let node_bytes = |i: usize| {
        let n = &g.nodes[i];
        if is_scalar_constant(n) {
            return 0;
        }
        sizer.shape(&n.ins.shape).map_or(0, |s| s.padded_bytes)
    };
    // Row statistics over a 16-bit matmul result join its kernel ([`super::rowstats`]).
    let groups = super::rowstats::merge_row_statistics(g, group(g, &node_bytes)?);
    // Reductions over a matmul's epilogue are more outputs of its kernel ([`super::epilogue_reduce`]).
    let groups = super::epilogue_reduce::merge_into_mxu(g, groups);
    // A kernel only storing a matmul kernel's values is more outputs of it ([`super::update_fusion`]).
    let groups = super::update_fusion::merge_updates(g, groups);
    // A matmul kernel makes one pass over its result ([`super::passes`]).
    let groups = super::passes::split_passes(g, groups, &node_bytes);
    // Intermediates placed in VMEM are read and written there, not over HBM.
    let padded = |o: usize| Ok(sizer.shape(&g.nodes[o].ins.shape)?.padded_bytes);
    let mut in_vmem = place_buffers(g, &groups, hp.vmem_temp_bytes, &padded, &|_| true, &[], &[])?.in_vmem;
    // Parameters the first kernel reading them streams from HBM, on chip for the later ones.
    let mut streamed_once = BTreeMap::new();
    // The parameters the compiler copies on chip before their first reader ([`super::onchip_kernel`]).
    let mut copied = None;
    if control.depth == 0 {
        copied = super::onchip_kernel::copied_parameters(g, sizer, chip)?;
        let cross = super::prefetch::cross_program_prefetch(g, sizer, chip)?;
        in_vmem.extend(cross);
        in_vmem.extend(super::operand_prefetch::prefetched_operands(
            g, &groups, cross, sizer, chip,
        )?);
        streamed_once = super::operand_prefetch::streamed_once(g, &groups, cross, sizer, chip)?;
        in_vmem.extend(streamed_once.keys());
    }
    // A batched matmul's result only the next batched matmul reads stays on chip, never a whole buffer
    // ([`super::dot_chain`]).
    let chained = super::dot_chain::chained_results(g, &groups);
    in_vmem.extend(chained.iter().copied());
    let mut temp = temp_bytes(g, &groups, &chained, sizer, chip, hp)?;
    let mut nested_temp = 0u64;
    // The convolution copies' temporaries: live only around their kernel, so they raise the peak at most to
    // their own size when nothing else is live.
    let mut copy_temp = 0u64;
    let mut unmodelled = BTreeMap::new();
    let mut kernels = Vec::with_capacity(groups.len());
    let mut t = 0u64;
    // The loop inputs converted to bf16 so far ([`super::loop_convert`]).
    let mut converted = BTreeSet::new();
    for (at, k) in groups.iter().enumerate() {
        let anchor = &g.nodes[k.anchor];
        // A loop's f32 inputs converted to bf16 before it ([`super::loop_convert`]).
        let mut loop_converts: Vec<super::loop_convert::StateParameter> = Vec::new();
        let mut slice_kernels: Vec<KernelCost> = Vec::new();
        let control_flow = match anchor.ins.opcode.as_str() {
            "while" => Some(KernelKind::While),
            "conditional" => Some(KernelKind::Conditional),
            _ => None,
        };
        let c = match control_flow {
            Some(kind) if k.kind == KernelKind::Unmodelled => {
                if control.depth >= MAX_LOOP_DEPTH {
                    return Err(HloError::Unsupported(format!(
                        "`{}`: while loops and conditionals nested deeper than {MAX_LOOP_DEPTH}",
                        anchor.ins.name
                    )));
                }
                control.depth += 1;
                let nested = if kind == KernelKind::While {
                    cost_while(module, g, k, sizer, chip, hp, control).map(|(n, times, inputs)| {
                        // A parameter converted for an earlier loop is not converted again.
                        loop_converts = inputs.into_iter().filter(|c| converted.insert(c.value)).collect();
                        (n, times)
                    })
                } else {
                    cost_conditional(module, anchor, sizer, chip, hp, control)
                };
                control.depth -= 1;
                let (n, times) = nested?;
                for (op, count) in &n.unmodelled {
                    *unmodelled.entry(op.clone()).or_insert(0) += count;
                }
                let copies = if mxu_results_on_chip(chip) {
                    0
                } else {
                    super::temp::loop_copy_bytes(g, &loop_converts, sizer)?
                };
                nested_temp = nested_temp.max(n.temp.saturating_add(copies));
                nested_kernel(g, k, kind, &n, times)
            }
            _ => {
                let streamed: BTreeSet<usize> = streamed_once.iter().filter(|e| *e.1 == at).map(|e| *e.0).collect();
                let placed = KernelPlacement {
                    in_vmem: &in_vmem,
                    streamed: &streamed,
                    state: &state,
                    laid: &laid,
                    copied: copied.as_ref(),
                };
                let (c, slices) = cost_sliced_kernel(g, k, sizer, chip, hp, placed, &mut unmodelled)?;
                slice_kernels = slices;
                c
            }
        };
        let (mut before, mut after) = if control.depth == 0 {
            super::relayout::copies_around(g, k, sizer, chip)?
        } else {
            (Vec::new(), Vec::new())
        };
        before.splice(
            0..0,
            super::loop_convert::convert_kernels(g, &loop_converts, sizer, chip)?,
        );
        before.extend(slice_kernels);
        after.splice(0..0, super::batchnorm::statistic_passes(g, k, sizer, chip, hp)?);
        if control.depth == 0 && !mxu_results_on_chip(chip) {
            copy_temp = copy_temp
                .max(super::relayout::copy_temporaries(g, k, sizer)?)
                .max(super::temp::gather_table_copy_bytes(g, k, sizer, chip)?);
        } else if control.depth == 0 {
            copy_temp = copy_temp.max(super::temp::copied_out_result_bytes(g, k, sizer, hp.temp_fast_bytes)?);
        }
        for mut r in before.into_iter().chain([c]).chain(after) {
            r.start_cycle = t;
            t = t.saturating_add(r.cycles);
            kernels.push(r);
        }
    }
    // A nested graph's temporaries live while it runs, beside the enclosing graph's.
    temp = temp.saturating_add(nested_temp);
    if copy_temp > temp {
        temp = copy_temp.saturating_add(if temp == 0 { hp.temp_overhead_bytes } else { 0 });
    }
    Ok(GraphCost {
        kernels,
        total: t,
        temp,
        unmodelled,
    })
}

/// Where an entry or loop-body kernel's values are: on chip (`in_vmem`), streamed once from HBM despite that
/// (`streamed`), in a loop's on-chip `state`, in the entry's layout (`laid`, [`super::sublane_slice`]), and the
/// parameters the compiler `copied` on chip first (`None` on a megacore chip, [`super::onchip_kernel`]).
struct KernelPlacement<'a> {
    in_vmem: &'a BTreeSet<usize>,
    streamed: &'a BTreeSet<usize>,
    state: &'a BTreeSet<usize>,
    laid: &'a BTreeSet<usize>,
    copied: Option<&'a BTreeSet<usize>>,
}

/// Kernel `k` of a graph (not a loop or conditional), with the kernels of its slices along the sublanes before
/// it, which it reads on chip ([`super::sublane_slice`]). `placed` holds the graph's VMEM placement, the inputs
/// this kernel streams from HBM all the same, the loop state on chip and the arrays in the entry's layout.
fn cost_sliced_kernel(
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
    placed: KernelPlacement<'_>,
    unmodelled: &mut BTreeMap<String, u64>,
) -> Result<(KernelCost, Vec<KernelCost>), HloError> {
    let KernelPlacement {
        in_vmem,
        streamed,
        state,
        laid,
        copied,
    } = placed;
    let sliced = super::sublane_slice::sublane_slices(g, k, laid, sizer)?;
    let own;
    let placed = if streamed.is_empty() && sliced.is_empty() {
        in_vmem
    } else {
        own = in_vmem
            .difference(streamed)
            .copied()
            .chain(super::sublane_slice::sliced_inputs(&sliced))
            .collect::<BTreeSet<usize>>();
        &own
    };
    let slices = sliced
        .iter()
        .map(|s| {
            let on_chip = (in_vmem.contains(&s.input) && !streamed.contains(&s.input)) || state.contains(&s.input);
            super::sublane_slice::slice_kernel(g, s, on_chip, chip, hp.hbm_bytes_per_cycle)
        })
        .collect();
    Ok((
        cost_kernel(g, k, sizer, chip, hp, (placed, state, copied), unmodelled)?,
        slices,
    ))
}

/// Computation `comp` costed as a graph of its own (once: `build` flattens it the first time), summed for the
/// kernel standing for it.
#[allow(clippy::too_many_arguments)]
fn nested_graph<'m>(
    module: &'m HloModule,
    comp: usize,
    build: impl FnOnce() -> Result<Graph<'m>, HloError>,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
    control: &mut Control,
) -> Result<Nested, HloError> {
    if let Some(n) = control.graphs.get(&comp) {
        return Ok(n.clone());
    }
    let c = cost_graph(module, &build()?, sizer, chip, hp, control)?;
    let sum = |f: &dyn Fn(&KernelCost) -> u64| c.kernels.iter().fold(0u64, |a, k| a.saturating_add(f(k)));
    // What most of the graph's cycles are bound by.
    let mut by_bound: Vec<(Bound, u64)> = Vec::new();
    for k in &c.kernels {
        match by_bound.iter_mut().find(|(b, _)| *b == k.bound_by) {
            Some(e) => e.1 = e.1.saturating_add(k.cycles),
            None => by_bound.push((k.bound_by, k.cycles)),
        }
    }
    let n = Nested {
        total: c.total,
        temp: c.temp,
        flops: sum(&|k| k.flops),
        hbm_bytes: sum(&|k| k.hbm_bytes),
        hbm_unpadded_bytes: sum(&|k| k.hbm_unpadded_bytes),
        padding_bytes: sum(&|k| k.padding_bytes),
        vmem_bytes: c.kernels.iter().map(|k| k.vmem_bytes).max().unwrap_or(0),
        bound_by: by_bound
            .iter()
            .max_by_key(|(_, c)| *c)
            .map_or(Bound::Launch, |(b, _)| *b),
        unmodelled: c.unmodelled,
    };
    control.graphs.insert(comp, n.clone());
    Ok(n)
}

/// A `while` loop: its body (costed as a graph of its own) and the trip count read from the loop
/// ([`loops::counter`]); a loop whose trip count cannot be read is one trip and listed as unmodelled. The
/// condition (a scalar compare on the scalar unit) is not charged. Also the f32 inputs converted to bf16 before
/// it ([`super::loop_convert`]).
fn cost_while(
    module: &HloModule,
    g: &Graph<'_>,
    k: &Group,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
    control: &mut Control,
) -> Result<(Nested, u64, Vec<super::loop_convert::StateParameter>), HloError> {
    let node = &g.nodes[k.anchor];
    let (cond_comp, body_comp) = loops::parts(module, node)?;
    // The body's graph, when flattened here to read the counter, is the one costed below.
    let mut flattened = None;
    let counter = match control.counters.get(&(cond_comp, body_comp)) {
        Some(c) => *c,
        None => {
            let cond = Graph::build_computation(module, cond_comp)?;
            let body = Graph::build_computation(module, body_comp)?;
            let c = loops::counter(&cond, &body);
            control.counters.insert((cond_comp, body_comp), c);
            flattened = Some(body);
            c
        }
    };
    let trips = counter.and_then(|c| node.operands.first().and_then(|&init| c.trips(g, init)));
    let graph = match flattened.take() {
        Some(b) => b,
        None => Graph::build_computation(module, body_comp)?,
    };
    let converted = match node.operands.first() {
        Some(&init) => super::loop_convert::converted_inputs(g, init, &graph),
        None => Vec::new(),
    };
    if !control.graphs.contains_key(&body_comp) {
        let budget = super::loop_state::state_budget(chip);
        let mut kept = match node.operands.first() {
            Some(&init) => super::loop_state::on_chip_elements(g, init, &graph, sizer, budget)?,
            None => BTreeSet::new(),
        };
        kept.extend(super::loop_convert::in_cmem(g, &converted, sizer, chip)?);
        control.state = Some(kept);
        control.laid = node
            .operands
            .first()
            .map(|&init| super::sublane_slice::parameter_elements(g, init, &graph));
    }
    flattened = Some(graph);
    let build = || flattened.map_or_else(|| Graph::build_computation(module, body_comp), Ok);
    let mut body = nested_graph(module, body_comp, build, sizer, chip, hp, control)?;
    let trips = trips.unwrap_or_else(|| {
        *body.unmodelled.entry("while".to_string()).or_insert(0) += 1;
        1
    });
    Ok((body, trips, converted))
}

/// A `conditional` (`lax.cond`, `lax.switch`): which branch runs is known only at run time, so it is costed as
/// its most expensive branch (each a graph of its own), and listed as unmodelled.
fn cost_conditional(
    module: &HloModule,
    node: &Node<'_>,
    sizer: &Sizer,
    chip: &ChipModel,
    hp: &HloParams,
    control: &mut Control,
) -> Result<(Nested, u64), HloError> {
    let mut worst: Option<Nested> = None;
    for comp in loops::branches(module, node)? {
        let build = || Graph::build_computation(module, comp);
        let branch = nested_graph(module, comp, build, sizer, chip, hp, control)?;
        if worst.as_ref().is_none_or(|w| branch.total > w.total) {
            worst = Some(branch);
        }
    }
    let mut worst =
        worst.ok_or_else(|| HloError::Unsupported(format!("`{}`: a conditional without branches", node.ins.name)))?;
    *worst.unmodelled.entry("conditional".to_string()).or_insert(0) += 1;
    Ok((worst, 1))
}

/// The kernel standing for a nested graph run `times` times (a loop's body, a conditional's branch).
fn nested_kernel(g: &Graph<'_>, k: &Group, kind: KernelKind, n: &Nested, times: u64) -> KernelCost {
    KernelCost {
        name: g.nodes[k.anchor].ins.name.clone(),
        kind,
        instructions: k.members.iter().map(|&m| g.nodes[m].ins.name.clone()).collect(),
        cycles: n.total.saturating_mul(times),
        start_cycle: 0,
        bound_by: n.bound_by,
        flops: n.flops.saturating_mul(times),
        hbm_bytes: n.hbm_bytes.saturating_mul(times),
        hbm_unpadded_bytes: n.hbm_unpadded_bytes.saturating_mul(times),
        padding_bytes: n.padding_bytes.saturating_mul(times),
        vmem_bytes: n.vmem_bytes,
        nodes: k.members.clone(),
    }
}

impl ModuleCost {
    /// Cycles by what limits the kernels.
    pub fn cycles_by_bound(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for k in &self.kernels {
            let key = serde_json::to_value(k.bound_by)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            *m.entry(key).or_insert(0) += k.cycles;
        }
        m
    }

    /// One sentence on what limits the program: the unit most cycles are bound by, the top kernel, and padding.
    pub fn bottleneck(&self) -> String {
        let total = self.total_cycles.max(1) as f64;
        let by = self.cycles_by_bound();
        let Some((unit, cycles)) = by.iter().max_by_key(|(_, c)| **c) else {
            return "The program has no kernels.".into();
        };
        let what = match unit.as_str() {
            "MXU" => "the matrix units (MXU-bound kernels)",
            "VPU" => "the vector unit (elementwise, reductions and layout changes)",
            "HBM" => "HBM bandwidth",
            _ => "kernel launch overhead (many small kernels)",
        };
        let top = self.kernels.iter().max_by_key(|k| k.cycles);
        let hbm: u64 = self.kernels.iter().map(|k| k.hbm_bytes).sum();
        let pad: u64 = self.kernels.iter().map(|k| k.padding_bytes).sum();
        let mut s = format!(
            "{:.0}% of the time is limited by {what}",
            *cycles as f64 / total * 100.0
        );
        if let Some(k) = top {
            s += &format!(
                "; the largest kernel, {} ({:?}), takes {:.0}%",
                k.name,
                k.kind,
                k.cycles as f64 / total * 100.0
            );
        }
        if hbm > 0 {
            s += &format!(
                "; tile padding is {:.0}% of HBM traffic",
                pad as f64 / hbm as f64 * 100.0
            );
        }
        s + "."
    }
}
