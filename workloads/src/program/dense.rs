//! Stage 2b: the TensorCore program of one step, kernel by kernel, costed by the TensorCore model:
//! bottom MLP, TensorCore tables, interaction, top MLP, loss, their backward, the dense gradients'
//! conversion for the all-reduce, the reduction between replicas of one chip, and the optimizer update.

use serde_json::json;
use sim_tpu::tensorcore::{cost, OpSpec, Phase};

use super::resolve::Plan;
use crate::spec::{Interaction, WorkloadError};
use sim_tpu::tensorcore::gather::{tc_gather, GatherOp};

/// What part of the step a kernel belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelRole {
    /// Forward pass.
    Forward,
    /// Backward pass.
    Backward,
    /// Gradient conversion, reduction between replicas, optimizer update.
    Update,
    /// A kernel of the user's HLO step (forward, backward and optimizer in one program).
    Program,
}

/// One TensorCore kernel of a step, on the simulated chip.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// Name (`top0 fwd`, `bottom1 dW`, ...).
    pub name: String,
    /// Part of the step.
    pub role: KernelRole,
    /// TensorCore cycles of the chip's share (the chip's TensorCores split a device's work), without
    /// the kernel's fixed cost.
    pub cycles: u64,
    /// The kernel's fixed cycles (launch, sync, pipeline fill) as the compiler estimates them for
    /// this chip: every TensorCore running the kernel pays them whole, so they are not split.
    /// Zero where `cycles` already holds them (gathers, HLO kernels).
    pub fixed_cycles: u64,
    /// HBM bytes, padded.
    pub hbm_bytes: u64,
    /// HBM bytes, logical.
    pub hbm_unpadded: u64,
    /// Peak VMEM.
    pub vmem_bytes: u64,
    /// The model's kernel stages (sequencer, DMA, MXU, VPU), cycles scaled like `cycles`.
    pub phases: Vec<Phase>,
}

/// The dense part of one step.
#[derive(Clone, Debug, Default)]
pub struct DenseProgram {
    /// Forward kernels in order.
    pub forward: Vec<Kernel>,
    /// Backward kernels in order.
    pub backward: Vec<Kernel>,
    /// After the all-reduce: the replicas' gradients gathered back (if several) and the update.
    pub update: Vec<Kernel>,
    /// Between the backward pass and the all-reduce: the chip's replicas reduce-scatter their
    /// gradients (if several). The conversion to the all-reduce dtype has no kernel of its own: the
    /// compiler fuses it into the kernels that produce the gradients.
    pub before_all_reduce: Vec<Kernel>,
    /// Dense parameters per replica (weights, biases and TensorCore tables).
    pub parameters: u64,
    /// Bytes one replica's gradients put into the all-reduce.
    pub gradient_bytes: u64,
    /// Activation bytes per chip kept for the backward pass.
    pub activation_bytes: u64,
    /// Backward kernels after which the embedding gradients are ready (their all-to-all may start).
    pub embedding_grads_ready: usize,
    /// With a user's HLO (`dense.hlo`): its kernels' 80% band from held-out residuals, in the step's
    /// TensorCore cycles.
    pub hlo_band: Option<HloBand>,
}

/// The band of a user's HLO program (`dense.hlo`), in the step's TensorCore cycles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HloBand {
    /// The program's kernels' cycles (the sum of its `forward` kernels).
    pub cycles: u64,
    /// Low end of the band.
    pub cycles_low: u64,
    /// High end.
    pub cycles_high: u64,
    /// Share of the program's cycles in kernels outside the calibrated domain.
    pub out_of_domain_fraction: f64,
}

impl DenseProgram {
    /// Every kernel of a step, in program order.
    pub fn kernels(&self) -> impl Iterator<Item = &Kernel> {
        self.forward
            .iter()
            .chain(&self.backward)
            .chain(&self.before_all_reduce)
            .chain(&self.update)
    }
}

struct Builder<'a> {
    p: &'a Plan,
    b: u64,
}

impl Builder<'_> {
    fn op(&self, name: String, role: KernelRole, v: serde_json::Value) -> Result<Kernel, WorkloadError> {
        let spec = OpSpec::from_value(&v).map_err(|e| WorkloadError::Run(format!("{name}: {e}")))?;
        let c = cost(&spec, &self.p.model).map_err(|e| WorkloadError::Run(format!("{name}: {e}")))?;
        let share = self.p.tc_share;
        // The op model's first phase is the kernel's fixed cost; the rest is split between TensorCores.
        let fixed = c
            .kernels
            .iter()
            .map(|k| k.phases.first().map_or(0, |ph| ph.cycles))
            .sum::<u64>()
            .min(c.cycles);
        Ok(Kernel {
            name,
            role,
            cycles: (c.cycles - fixed).div_ceil(share),
            fixed_cycles: fixed,
            hbm_bytes: c.hbm_bytes / share,
            hbm_unpadded: c.hbm_bytes_unpadded / share,
            vmem_bytes: c.vmem_bytes,
            phases: c
                .phases()
                .into_iter()
                .map(|mut ph| {
                    ph.start_cycle /= share;
                    // A kernel's fixed cost is paid whole; its body is split.
                    if ph.unit != sim_tpu::tensorcore::Unit::Sequencer {
                        ph.cycles = ph.cycles.div_ceil(share);
                        ph.busy_cycles = ph.busy_cycles.div_ceil(share);
                        ph.bytes /= share;
                    }
                    ph
                })
                .collect(),
        })
    }

    /// An elementwise kernel over `rows x cols` f32 values.
    fn elementwise(&self, name: String, role: KernelRole, rows: u64, cols: u64) -> Result<Kernel, WorkloadError> {
        self.op(
            name,
            role,
            json!({"op": "add", "params": {"shape": [rows.max(1), cols.max(1)], "dtype": "float32"}}),
        )
    }

    /// A pass that reads f32 and writes the bf16 a following matmul consumes (a gather-and-concatenate
    /// or a symmetrisation fused into one loop).
    fn to_bf16(&self, name: String, role: KernelRole, rows: u64, cols: u64) -> Result<Kernel, WorkloadError> {
        self.op(
            name,
            role,
            json!({"op": "convert", "params": {"shape": [rows.max(1), cols.max(1)], "dtype": "float32", "to": "bfloat16"}}),
        )
    }

    /// A memory-bound pass over `elements` reading and writing `bytes_per_element` in all, at the
    /// model's HBM rate (one replica's copy: every replica of the chip runs it).
    fn streaming(&self, name: String, elements: u64, bytes_per_element: u64) -> Kernel {
        let p = self.p;
        let replicas = p.replicas_per_chip;
        let bytes = elements.saturating_mul(bytes_per_element);
        // Every replica streams its own copy through the chip's HBM; replicas on separate TensorCores
        // run at once, a megacore replica splits the pass.
        let per_tc = bytes * replicas / p.tc_share;
        let cycles =
            (per_tc as u128 * p.model.clock_hz as u128).div_ceil(p.model.hbm.device_bytes_per_s.max(1) as u128) as u64;
        Kernel {
            name,
            role: KernelRole::Update,
            cycles,
            // A streaming pass is a loop fusion: it pays a VPU kernel's fixed cost.
            fixed_cycles: p.model.params.launch_cycles.max(0.0).round() as u64,
            hbm_bytes: bytes * replicas,
            hbm_unpadded: bytes * replicas,
            vmem_bytes: 0,
            phases: Vec::new(),
        }
    }

    /// The chip's replicas (one per TensorCore) combine their gradients as the all-reduce's first
    /// and last hops over HBM: before it each TensorCore sums its half of the parameters from both
    /// replicas (reads two halves, writes one: 1.5 gradient copies), after it each reads the other
    /// half's sum back (one copy). One replica per chip has neither.
    fn replica_reduction(&self, parameters: u64, grad_bytes: u64) -> (Vec<Kernel>, Vec<Kernel>) {
        if self.p.replicas_per_chip < 2 {
            return (Vec::new(), Vec::new());
        }
        let halves = self.p.replicas_per_chip;
        let share = parameters.div_ceil(halves);
        let scatter = Kernel {
            role: KernelRole::Backward,
            ..self.streaming(
                "gradients reduce-scattered across the chip's replicas".into(),
                share,
                halves * grad_bytes + grad_bytes,
            )
        };
        let gather = self.streaming(
            "gradients all-gathered across the chip's replicas".into(),
            share,
            (halves - 1) * grad_bytes * 2,
        );
        (vec![scatter], vec![gather])
    }

    /// A TensorCore gather of `rows` rows of `row_bytes`, or the scatter-add of their gradients
    /// into the dense gradient of the TensorCore tables (`table_elements` elements).
    fn gather(
        &self,
        name: String,
        role: KernelRole,
        (rows, row_bytes): (u64, u64),
        table_elements: u64,
        op: GatherOp,
    ) -> Result<Kernel, WorkloadError> {
        let p = self.p;
        // Each compiler device takes its share of the rows (its replica's, or its part of a megacore
        // kernel's). A scatter-add writes the dense gradient: a megacore kernel splits it, while
        // replicas on separate TensorCores each write their own whole copy.
        let share = p.tc_share;
        let table = if p.megacore {
            table_elements.div_ceil(share)
        } else {
            table_elements
        };
        let g = tc_gather(&p.model, op, rows.div_ceil(share), row_bytes, table)
            .map_err(|e| WorkloadError::Run(format!("{name}: {e}")))?;
        Ok(Kernel {
            name,
            role,
            cycles: g.cycles,
            fixed_cycles: 0,
            hbm_bytes: g.hbm_bytes * share,
            hbm_unpadded: g.hbm_bytes * share,
            vmem_bytes: 0,
            phases: Vec::new(),
        })
    }

    /// An MLP: forward layer kernels (matmul, bias, ReLU fused), backward per layer the ReLU and bias
    /// gradient, dX and dW. Returns the output width and the parameters.
    fn mlp(
        &self,
        prefix: &str,
        din: u64,
        widths: &[u64],
        fwd: &mut Vec<Kernel>,
        bwd: &mut Vec<Kernel>,
    ) -> Result<(u64, u64), WorkloadError> {
        let b = self.b;
        let mut d = din;
        let mut params = 0u64;
        for (i, &out) in widths.iter().enumerate() {
            fwd.push(self.op(
                format!("{prefix}{i} fwd"),
                KernelRole::Forward,
                json!({"op": "mlp_layer", "params": {"B": b, "Din": d, "Dout": out, "dtype": "bfloat16"}}),
            )?);
            let mut layer = vec![
                self.op(
                    format!("{prefix}{i} relu+bias grad"),
                    KernelRole::Backward,
                    json!({"op": "reduce_sum_major", "params": {"shape": [b, out], "dtype": "float32"}}),
                )?,
                self.op(
                    format!("{prefix}{i} dX"),
                    KernelRole::Backward,
                    json!({"op": "matmul", "params": {"M": b, "K": out, "N": d, "dtype": "bfloat16"}}),
                )?,
                self.op(
                    format!("{prefix}{i} dW"),
                    KernelRole::Backward,
                    json!({"op": "matmul", "params": {"M": d, "K": b, "N": out, "dtype": "bfloat16"}}),
                )?,
            ];
            // Backward runs last layer first; inside a layer in this order.
            layer.reverse();
            bwd.extend(layer);
            params += d * out + out;
            d = out;
        }
        Ok((d, params))
    }
}

/// The step's TensorCore program: the user's HLO (`dense.hlo`) or the built-in layers.
pub fn dense_program(p: &Plan) -> Result<DenseProgram, WorkloadError> {
    match &p.w.dense.hlo {
        Some(path) => hlo_program(p, path),
        None => builtin_program(p),
    }
}

/// Elements of the entry parameters that the step also returns (same dims and type as a result
/// element): the weights and optimizer slots it updates.
fn updated_parameter_elements(m: &sim_tpu::hlo::HloModule) -> u64 {
    use sim_core::layout::{Dim, Shape};
    let entry = m.entry_computation();
    let key = |s: &Shape| match s {
        Shape::Array(a) => Some((
            a.element_type,
            a.dims
                .iter()
                .map(|d| match d {
                    Dim::Static(x) => *x,
                    _ => -1,
                })
                .collect::<Vec<i64>>(),
        )),
        _ => None,
    };
    let mut outputs: Vec<_> = match &entry.instructions[entry.root].shape {
        Shape::Tuple(elems) => elems.iter().filter_map(key).collect(),
        other => key(other).into_iter().collect(),
    };
    let mut total = 0u64;
    for (_, i) in entry.parameters() {
        let Some(k) = key(&entry.instructions[i].shape) else {
            continue;
        };
        if let Some(pos) = outputs.iter().position(|o| *o == k) {
            outputs.swap_remove(pos);
            total = total.saturating_add(k.1.iter().map(|&d| d.max(0) as u64).product::<u64>());
        }
    }
    total
}

/// The TensorCore stage from the user's HLO: its kernels run one after another (a replica's forward
/// and backward); the dense gradients all-reduced between replicas and updated after it are the
/// parameters the program returns a same-shaped result for (see [`updated_parameter_elements`]).
fn hlo_program(p: &Plan, path: &std::path::Path) -> Result<DenseProgram, WorkloadError> {
    let w = &p.w;
    let bad = |e: String| WorkloadError::Spec(format!("dense.hlo {}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let module = sim_tpu::hlo::HloModule::parse(&text).map_err(|e| bad(e.to_string()))?;
    let cost = sim_tpu::hlo::cost_module(&module, &p.model).map_err(|e| bad(e.to_string()))?;
    let forward: Vec<Kernel> = cost
        .kernels
        .iter()
        .map(|k| Kernel {
            name: format!("hlo {}", k.name),
            role: KernelRole::Program,
            cycles: k.cycles,
            fixed_cycles: 0,
            hbm_bytes: k.hbm_bytes,
            hbm_unpadded: k.hbm_unpadded_bytes,
            vmem_bytes: k.vmem_bytes,
            phases: Vec::new(),
        })
        .collect();
    let (band, _) = sim_tpu::band::hlo_band(&cost, &sim_tpu::band::BandData::embedded().hlo);
    let hlo_band = Some(HloBand {
        cycles: forward.iter().map(|k| k.cycles).sum(),
        cycles_low: band.total_cycles_low,
        cycles_high: band.total_cycles_high,
        out_of_domain_fraction: band.out_of_domain_fraction,
    });
    let parameters = updated_parameter_elements(&module);
    let emb_width: u64 = w
        .features
        .iter()
        .map(|f| w.tables.iter().find(|t| t.name == f.table).map_or(0, |t| t.dim))
        .sum();
    let bld = Builder {
        p,
        b: w.batch_per_chip(),
    };
    let grad_bytes_per = w.dense.gradient_dtype.bytes();
    let (before_all_reduce, mut update) = bld.replica_reduction(parameters, grad_bytes_per);
    // Data parallelism applies the optimizer after the all-reduce, outside the per-replica program.
    update.push(bld.streaming(
        format!("{:?} update", w.dense.optimizer).to_lowercase(),
        parameters,
        4 + 4 + grad_bytes_per + w.dense.optimizer.slots() * 8,
    ));
    Ok(DenseProgram {
        embedding_grads_ready: 0,
        forward,
        backward: Vec::new(),
        update,
        before_all_reduce,
        parameters,
        gradient_bytes: parameters * w.dense.gradient_dtype.bytes(),
        // The program's own buffers: arguments, outputs and temporaries, per replica.
        activation_bytes: cost.temp_bytes.saturating_add(w.batch_per_chip() * emb_width * 4 * 2),
        hlo_band,
    })
}

fn builtin_program(p: &Plan) -> Result<DenseProgram, WorkloadError> {
    let w = &p.w;
    let bld = Builder {
        p,
        b: w.batch_per_chip(),
    };
    let b = bld.b;
    let (mut fwd, mut bwd) = (Vec::new(), Vec::new());
    let (bottom_out, bottom_params) = bld.mlp(
        "bottom",
        w.dense.dense_features.max(1),
        &w.dense.bottom,
        &mut fwd,
        &mut bwd,
    )?;
    // TensorCore tables: gathered forward, scatter-added backward into a dense gradient.
    let mut tc_params = 0u64;
    let mut tc_rows = 0u64;
    let mut tc_row_bytes = 0u64;
    for t in w.tensorcore_tables() {
        tc_params += t.vocab * t.dim;
        tc_row_bytes = tc_row_bytes.max(t.dim * t.dtype.bytes());
        for f in w.features.iter().filter(|f| f.table == t.name) {
            tc_rows += b * crate::ids::max_valency(&f.valency);
        }
    }
    if tc_rows > 0 {
        fwd.push(bld.gather(
            "tensorcore tables gather".into(),
            KernelRole::Forward,
            (tc_rows, tc_row_bytes),
            tc_params,
            GatherOp::Take,
        )?);
    }
    let f = w.features.len() as u64 + 1;
    let dim = w.tables.iter().map(|t| t.dim).max().unwrap_or(1);
    let mut tail = Vec::new();
    let top_in = match w.dense.interaction {
        Interaction::Dot | Interaction::DotSelf | Interaction::DotFull => {
            fwd.push(bld.op(
                "interaction fwd".into(),
                KernelRole::Forward,
                json!({"op": "batched_matmul", "params": {"B": b, "M": f, "K": dim, "N": f, "dtype": "bfloat16"}}),
            )?);
            let pairs = match w.dense.interaction {
                Interaction::Dot => f * (f - 1) / 2,
                Interaction::DotSelf => f * (f + 1) / 2,
                _ => f * f,
            };
            let top_in = pairs + if w.dense.concat_dense { bottom_out } else { 0 };
            // Gathering a triangle and concatenating is one fusion; the full matrix skips the gather.
            fwd.push(bld.to_bf16("interaction concat".into(), KernelRole::Forward, b, top_in)?);
            // Backward: dZ symmetrised, then dX = dZ X for every sample.
            tail.push(bld.to_bf16("interaction bwd symmetrise".into(), KernelRole::Backward, b, f * f)?);
            tail.push(bld.op(
                "interaction bwd".into(),
                KernelRole::Backward,
                json!({"op": "batched_matmul", "params": {"B": b, "M": f, "K": f, "N": dim, "dtype": "bfloat16"}}),
            )?);
            top_in
        }
        Interaction::Dcnv2(layers) => {
            let width = f * dim;
            for l in 0..layers {
                fwd.push(bld.op(
                    format!("cross{l} fwd"),
                    KernelRole::Forward,
                    json!({"op": "mlp_layer", "params": {"B": b, "Din": width, "Dout": width, "dtype": "bfloat16"}}),
                )?);
                tail.push(bld.op(
                    format!("cross{l} dX"),
                    KernelRole::Backward,
                    json!({"op": "matmul", "params": {"M": b, "K": width, "N": width, "dtype": "bfloat16"}}),
                )?);
                tail.push(bld.op(
                    format!("cross{l} dW"),
                    KernelRole::Backward,
                    json!({"op": "matmul", "params": {"M": width, "K": b, "N": width, "dtype": "bfloat16"}}),
                )?);
            }
            width
        }
    };
    let cross_params = match w.dense.interaction {
        Interaction::Dcnv2(l) => l as u64 * ((f * dim) * (f * dim) + f * dim),
        _ => 0,
    };
    let mut top_bwd = Vec::new();
    let (top_out, top_params) = bld.mlp("top", top_in, &w.dense.top, &mut fwd, &mut top_bwd)?;
    fwd.push(bld.elementwise("loss".into(), KernelRole::Forward, b, top_out)?);
    // Backward in reverse program order: loss, top MLP, interaction, TensorCore tables, bottom MLP.
    bwd.reverse();
    let mut backward = vec![bld.elementwise("loss grad".into(), KernelRole::Backward, b, top_out)?];
    backward.extend(top_bwd.into_iter().rev());
    backward.extend(tail);
    let embedding_grads_ready = backward.len();
    if tc_rows > 0 {
        backward.push(bld.gather(
            "tensorcore tables scatter-add".into(),
            KernelRole::Backward,
            (tc_rows, tc_row_bytes),
            tc_params,
            GatherOp::ScatterAdd,
        )?);
    }
    backward.extend(bwd);

    let parameters = bottom_params + top_params + cross_params + tc_params;
    let grad_bytes_per = w.dense.gradient_dtype.bytes();
    let (before_all_reduce, mut update) = bld.replica_reduction(parameters, grad_bytes_per);
    // The optimizer: f32 weights and slots read and written, the gradient read.
    let slots = w.dense.optimizer.slots();
    update.push(bld.streaming(
        format!("{:?} update", w.dense.optimizer).to_lowercase(),
        parameters,
        4 + 4 + grad_bytes_per + slots * 8,
    ));
    let emb_width: u64 = w
        .features
        .iter()
        .map(|f| w.tables.iter().find(|t| t.name == f.table).map_or(0, |t| t.dim))
        .sum();
    let activation_bytes =
        b * (emb_width + w.dense.bottom.iter().sum::<u64>() + top_in + w.dense.top.iter().sum::<u64>()) * 4 * 2;
    Ok(DenseProgram {
        forward: fwd,
        backward,
        update,
        before_all_reduce,
        parameters,
        gradient_bytes: parameters * grad_bytes_per,
        activation_bytes,
        embedding_grads_ready,
        hlo_band: None,
    })
}
