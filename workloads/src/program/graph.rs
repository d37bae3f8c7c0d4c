//! Stage 3: the task graph of every step on the simulated chip's units, with typed handles. The
//! pipelining mode decides the edges between steps; the engine decides the schedule.

use std::collections::{BTreeMap, HashMap};

use sim_core::engine::{Engine, EngineError, QueuePolicy, ResourceId, Task, TaskId};
use sim_core::time::{Clock, SimTime};
use sim_tpu::topology_links::{all_reduce_loads, all_to_all_loads, link_groups, LinkGroup, LinkLoads};

use super::dense::{DenseProgram, Kernel, KernelRole};
use super::resolve::Plan;
use super::work::RunWork;
use crate::spec::{Pipelining, WorkloadError};

/// Bytes the host sends the device per id (a COO entry: row, column, gain).
pub const HOST_BYTES_PER_ID: u64 = sim_sparsecore::limits::hbm::COO_ENTRY_BYTES;

pub use sim_core::tag::Stage;
use sim_core::tag::{SpanTag, Unit};

/// The span argument holding a task's [`Stage::key`].
pub const STAGE_ARG: &str = "stage";

/// The units of the simulated chip.
#[derive(Clone, Debug)]
pub struct Units {
    /// Host preprocessing.
    pub host: ResourceId,
    /// PCIe.
    pub pcie: ResourceId,
    /// The TensorCore(s) of the chip.
    pub tc: ResourceId,
    /// Each SparseCore.
    pub scs: Vec<ResourceId>,
    /// HBM bandwidth.
    pub hbm: ResourceId,
    /// The chip's ICI links, one resource per slice dimension and direction (none on one chip).
    pub ici: Vec<(LinkGroup, ResourceId)>,
}

/// The tasks of one step the later stages read.
#[derive(Clone, Copy, Debug)]
pub struct StepTasks {
    /// SparseCore forward may start (ids are on the device, the pipelining gate is open).
    pub sc_fwd_start: TaskId,
    /// SparseCore forward done.
    pub sc_fwd_done: TaskId,
    /// SparseCore backward done.
    pub sc_bwd_done: TaskId,
    /// The dense update done (the next step's TensorCore forward may start).
    pub update_done: TaskId,
}

/// A task's role for the critical path.
#[derive(Clone, Copy, Debug)]
pub struct TaskInfo {
    /// What its time is spent on.
    pub stage: Stage,
    /// The unit it occupies (FIFO: it may have waited for the previous task there).
    pub unit: Option<ResourceId>,
    /// Of its time, the fixed launch cost, ps.
    pub launch_ps: u64,
}

/// The graph, its handles and what the critical path needs.
pub struct StepGraph {
    /// The engine holding the tasks.
    pub engine: Engine,
    /// Units.
    pub units: Units,
    /// Per step.
    pub steps: Vec<StepTasks>,
    /// Each task's predecessors.
    pub preds: HashMap<TaskId, Vec<TaskId>>,
    /// Each timed task's role.
    pub info: HashMap<TaskId, TaskInfo>,
    /// ICI bandwidth of the chip's link groups together, bytes/s.
    pub ici_bytes_per_s: u64,
    /// ICI bandwidth of one link group (one link each way per dimension), bytes/s.
    pub ici_link_bytes_per_s: u64,
    /// TensorCore clock, Hz.
    pub tc_clock_hz: u64,
    /// Fixed cost to start a collective, ns.
    pub collective_launch_ns: u64,
    /// Latency of one ICI hop, ns.
    pub hop_latency_ns: u64,
    /// The simulated chip's process name in the recording ("chip N", N its real index).
    pub chip_process: String,
    /// Each tile's compute cycles of a SparseCore pass, keyed by (SparseCore, step, forward?):
    /// trace detail; the pass itself occupies its SparseCore for the busiest tile's cycles.
    pub sc_tile_cycles: BTreeMap<(usize, usize, bool), Vec<u64>>,
    /// While rebuilding a graph in place: the next task and dependency the builder must emit.
    cursor: Option<Cursor>,
}

/// Where a rebuild in place stands: every task is replaced in the order it was added, every
/// dependency checked against the one added there; any difference (`same` false) means another
/// structure, and the graph is built afresh.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    task: usize,
    dep: usize,
    same: bool,
}

/// What decides a graph's structure (its tasks and dependencies, not their durations): graphs with
/// the same key are rebuilt in place by [`rebuild`]. Rebuilding checks the structure, so a key that
/// missed a difference costs a fresh build, never a wrong graph.
pub fn shape_key(p: &Plan, dense: &DenseProgram) -> String {
    let w = &p.w;
    format!(
        "{}/{:?}/{}/{}/{}/{}/{}/{}/{}/{}/{}",
        w.steps,
        w.pipelining,
        w.host.prefetch,
        p.spec().sparsecores_per_chip,
        p.stacks.len(),
        w.chips > 1,
        dense.forward.len(),
        dense.backward.len(),
        dense.embedding_grads_ready,
        dense.before_all_reduce.len(),
        dense.update.len()
    )
}

/// The process the simulated chip's units are recorded under: "chip N", N the index of the chip
/// holding the busiest partition (the straggler the run output names), 0 without SparseCore work.
pub fn chip_process(work: &RunWork) -> String {
    format!("chip {}", work.straggler.chip)
}

/// The step whose SparseCore backward must have finished before step `i`'s SparseCore forward
/// starts: the step before (sequential) or the one before that (pipelined: lookups of step i
/// miss the update of step i-1, so gradients arrive two steps late).
pub fn sc_forward_gate(pipelining: Pipelining, i: usize) -> Option<usize> {
    match pipelining {
        Pipelining::Sequential => i.checked_sub(1),
        Pipelining::Pipelined => i.checked_sub(2),
    }
}

/// The step whose SparseCore forward must have started before the host preprocesses step `i`:
/// the host works at most `prefetch` (at least 1) steps ahead of the SparseCores.
pub fn host_gate(prefetch: u32, i: usize) -> Option<usize> {
    i.checked_sub(prefetch.max(1) as usize)
}

/// The work simulated step `i` does when `warm` warm-up steps come before the `asked` ones: step
/// `warm + k` does the asked step k's; a warm-up or drain step repeats an asked step's work (the
/// one a period of repeating ids gives it, so the run keeps repeating), so the work and the limits
/// it is checked against stay the asked steps' own.
pub fn work_index(i: usize, warm: usize, asked: usize, period: Option<u32>) -> usize {
    let k = i as i64 - warm as i64;
    match period.map(|p| p.max(1) as i64) {
        Some(p) if p <= asked as i64 => k.rem_euclid(p) as usize,
        _ => k.rem_euclid(asked.max(1) as i64) as usize,
    }
}

fn err(x: EngineError) -> WorkloadError {
    WorkloadError::Run(x.to_string())
}

impl StepGraph {
    /// The unit a resource of the graph is.
    fn unit_of(&self, r: ResourceId) -> Unit {
        let u = &self.units;
        if r == u.host {
            Unit::Host
        } else if r == u.pcie {
            Unit::HostLink
        } else if r == u.tc {
            Unit::TensorCore
        } else if r == u.hbm {
            Unit::Hbm
        } else if let Some(n) = u.scs.iter().position(|&s| s == r) {
            Unit::SparseCore(n as u32)
        } else {
            let n = u.ici.iter().position(|&(_, x)| x == r);
            n.map_or(Unit::IciLatency, |n| Unit::IciLink(n as u32))
        }
    }

    /// Adds `t`; with a stage, tagged (its unit, the stage, step `.1`) and kept for the critical path.
    fn task(&mut self, t: Task, stage: Option<(Stage, usize)>, launch_ps: u64) -> TaskId {
        let t = match stage {
            Some((st, step)) => {
                let unit = match t.demand {
                    sim_core::engine::Demand::Occupy { unit: r, .. }
                    | sim_core::engine::Demand::Transfer { resource: r, .. } => self.unit_of(r),
                    _ => Unit::IciLatency,
                };
                let tag = SpanTag {
                    kernel: t.tag.and_then(|x| x.kernel),
                    ..SpanTag::new(unit, st, step)
                };
                // The stage argument is display text for trace readers; consumers read the tag.
                t.arg_value(STAGE_ARG, sim_core::recorder::ArgValue::Text(st.key().into()))
                    .tag(tag)
            }
            None => t,
        };
        let stage = stage.map(|(st, _)| st);
        // Only occupied units queue (FIFO); bandwidth is shared, never waited for.
        let unit = match t.demand {
            sim_core::engine::Demand::Occupy { unit, .. } => Some(unit),
            _ => None,
        };
        let id = match &mut self.cursor {
            None => self.engine.add_task(t),
            Some(c) => {
                let at = c.task;
                c.task += 1;
                match self.engine.task_at(at) {
                    Some(id) if c.same => {
                        // The ids are those of a fresh build: same positions, same order.
                        let _ = self.engine.replace_task(id, t);
                        id
                    }
                    _ => {
                        c.same = false;
                        return TaskId::default();
                    }
                }
            }
        };
        match stage {
            Some(stage) => {
                self.info.insert(id, TaskInfo { stage, unit, launch_ps });
            }
            None if self.cursor.is_some() && self.info.contains_key(&id) => self.mark_differs(),
            None => {}
        }
        id
    }

    /// Step `i`'s host preprocessing, its transfer and the SparseCore passes, wired with the
    /// pipelining gates; returns the SparseCore forward and backward gates.
    fn host_and_sparsecore(
        &mut self,
        p: &Plan,
        sw: &super::work::StepWork,
        i: usize,
        sc_dma_cap: u64,
    ) -> Result<ScGates, WorkloadError> {
        let w = &p.w;
        let step = i as i64;
        let host_ns = host_stage_ns(p, sw);
        let h = self.task(
            Task::occupy(self.units.host, host_ns.max(1))
                .name(format!("preprocess step {i}"))
                .category("host")
                .arg("step", step)
                .arg("ids", sw.ids as i64),
            Some((Stage::Host, i)),
            0,
        );
        if let Some(k) = host_gate(w.host.prefetch, i) {
            let gate = self.steps[k].sc_fwd_start;
            self.dep(gate, h)?;
        }
        let pc = self.task(
            Task::transfer(self.units.pcie, sw.ids * HOST_BYTES_PER_ID)
                .name(format!("host->device step {i}"))
                .category("pcie")
                .arg("step", step),
            Some((Stage::Pcie, i)),
            0,
        );
        self.dep(h, pc)?;
        let f_start = self.task(Task::wait().name(format!("SC fwd start {i}")), None, 0);
        self.dep(pc, f_start)?;
        if let Some(k) = sc_forward_gate(w.pipelining, i) {
            let d = self.steps[k].sc_bwd_done;
            self.dep(d, f_start)?;
        }
        let f_done = self.task(Task::wait().name(format!("SC fwd done {i}")), None, 0);
        let b_start = self.task(Task::wait().name(format!("SC bwd start {i}")), None, 0);
        let b_done = self.task(Task::wait().name(format!("SC bwd done {i}")), None, 0);
        for s in 0..self.units.scs.len() {
            let unit = self.units.scs[s];
            let ScStepCost {
                fwd: (fc, fb, fp),
                bwd: (bc, bb, bp),
                fwd_tiles: ft,
                bwd_tiles: bt,
            } = sc_step_cost(p, sw, s);
            self.sc_tile_cycles.insert((s, i, true), ft);
            self.sc_tile_cycles.insert((s, i, false), bt);
            let (fx, fm) = self.sc_pass(
                unit,
                sc_dma_cap,
                (s, i),
                ("fwd", "gather"),
                Stage::ScForward,
                (fc, fb, fp),
            );
            let (bx, bm) = self.sc_pass(
                unit,
                sc_dma_cap,
                (s, i),
                ("bwd", "update"),
                Stage::ScBackward,
                (bc, bb, bp),
            );
            for t in [fx, fm] {
                self.dep(f_start, t)?;
                self.dep(t, f_done)?;
            }
            for t in [bx, bm] {
                self.dep(b_start, t)?;
                self.dep(t, b_done)?;
            }
        }
        Ok(ScGates {
            f_start,
            f_done,
            b_start,
            b_done,
        })
    }

    /// Step `i`'s all-to-alls, TensorCore kernels, all-reduce and update after the SparseCore gates.
    fn dense_and_collectives(
        &mut self,
        p: &Plan,
        dense: &DenseProgram,
        i: usize,
        tc_hbm_cap: u64,
        gates: ScGates,
    ) -> Result<(), WorkloadError> {
        let ScGates {
            f_start,
            f_done,
            b_start,
            b_done,
        } = gates;
        let b = p.w.batch_per_chip();
        let link = p.spec().ici_bytes_per_s_per_link;
        // Activations cross ICI in the tables' element size; a chip keeps 1/chips of them.
        let a2a_bytes_per_chip = |width: u64, elem: u64| b * width * elem;
        let do_collectives = p.w.chips > 1;
        // One all-to-all per stack, one after another, each paying its fixed latency.
        let a2a = |g: &mut StepGraph, after: TaskId, what: &str| -> Result<TaskId, WorkloadError> {
            let mut prev = after;
            if !do_collectives {
                return Ok(prev);
            }
            for st in &p.stacks {
                let t = all_to_all_loads(&p.slice, a2a_bytes_per_chip(st.width, st.elem_bytes.max(4)), link);
                prev = g.collective(
                    prev,
                    format!("all-to-all {what} {}", st.def.name),
                    Stage::AllToAll,
                    t,
                    i,
                )?;
            }
            Ok(prev)
        };
        let a2a_f = a2a(self, f_done, "activations")?;
        // TensorCore: forward after the activations and the previous step's update.
        let mut prev = match self.steps.last() {
            Some(last) => {
                let u = last.update_done;
                self.join(&[a2a_f, u])?
            }
            None => a2a_f,
        };
        // Kernels are numbered in `DenseProgram::kernels` order.
        let mut index = 0..;
        for k in &dense.forward {
            prev = self.kernel(prev, (index.next().unwrap_or_default(), k), i, tc_hbm_cap)?;
        }
        let mut grads_ready = prev;
        for (n, k) in dense.backward.iter().enumerate() {
            prev = self.kernel(prev, (index.next().unwrap_or_default(), k), i, tc_hbm_cap)?;
            if n + 1 == dense.embedding_grads_ready {
                grads_ready = prev;
            }
        }
        if dense.backward.len() < dense.embedding_grads_ready || dense.embedding_grads_ready == 0 {
            grads_ready = prev;
        }
        for k in &dense.before_all_reduce {
            prev = self.kernel(prev, (index.next().unwrap_or_default(), k), i, tc_hbm_cap)?;
        }
        if do_collectives {
            let t = all_reduce_loads(&p.slice, dense.gradient_bytes, link);
            prev = self.collective(prev, "all-reduce dense gradients".into(), Stage::AllReduce, t, i)?;
        }
        for k in &dense.update {
            prev = self.kernel(prev, (index.next().unwrap_or_default(), k), i, tc_hbm_cap)?;
        }
        let update_done = prev;
        let a2a_b = a2a(self, grads_ready, "gradients")?;
        self.dep(a2a_b, b_start)?;
        self.dep(f_done, b_start)?;
        self.steps.push(StepTasks {
            sc_fwd_start: f_start,
            sc_fwd_done: f_done,
            sc_bwd_done: b_done,
            update_done,
        });
        Ok(())
    }

    fn mark_differs(&mut self) {
        if let Some(c) = &mut self.cursor {
            c.same = false;
        }
    }

    fn dep(&mut self, a: TaskId, b: TaskId) -> Result<(), WorkloadError> {
        if let Some(c) = &mut self.cursor {
            if self.engine.dependency(c.dep) != Some((a, b)) {
                c.same = false;
            }
            c.dep += 1;
            return Ok(());
        }
        self.engine.add_dep(a, b).map_err(err)?;
        self.preds.entry(b).or_default().push(a);
        Ok(())
    }

    fn join(&mut self, from: &[TaskId]) -> Result<TaskId, WorkloadError> {
        let j = self.task(Task::wait(), None, 0);
        for &f in from {
            self.dep(f, j)?;
        }
        Ok(j)
    }

    /// A collective: its fixed latency, then its bytes on each link group it loads (each group's
    /// transfer alone takes that group's time), done when every group is.
    fn collective(
        &mut self,
        after: TaskId,
        name: String,
        stage: Stage,
        t: LinkLoads,
        step: usize,
    ) -> Result<TaskId, WorkloadError> {
        let latency_ps =
            (self.collective_launch_ns + self.hop_latency_ns.saturating_mul(t.latency_hops)).saturating_mul(1000);
        // On a track of its own so figures and traces show the time it holds the step.
        let track = sim_core::recorder::Track {
            process: self.chip_process.clone(),
            thread: "ICI latency".into(),
        };
        let lat = self.task(
            Task::delay(SimTime(latency_ps))
                .name(format!("{name} latency step {step}"))
                .category("ici_latency")
                .arg("step", step as i64)
                .on_track(track),
            Some((Stage::CollectiveLatency, step)),
            0,
        );
        self.dep(after, lat)?;
        let mut parts = Vec::with_capacity(t.per_group_ps.len());
        for task in link_transfers(&self.units.ici, self.ici_link_bytes_per_s, &t) {
            let x = self.task(
                task.name(format!("{name} step {step}"))
                    .category("ici")
                    .arg("step", step as i64),
                Some((stage, step)),
                0,
            );
            self.dep(lat, x)?;
            parts.push(x);
        }
        match parts.as_slice() {
            [] => Ok(lat),
            [one] => Ok(*one),
            _ => self.join(&parts),
        }
    }

    /// One SparseCore pass: its compute on the SparseCore and its HBM traffic at the tiles' DMA rate.
    /// `names`: the compute and traffic span names; `work`: cycles, HBM bytes, of which padding.
    fn sc_pass(
        &mut self,
        unit: ResourceId,
        dma_cap: u64,
        (sc, step): (usize, usize),
        names: (&str, &str),
        stage: Stage,
        (cycles, bytes, padding): (u64, u64, u64),
    ) -> (TaskId, TaskId) {
        let cat = if stage == Stage::ScForward { "sc_fwd" } else { "sc_bwd" };
        let x = self.task(
            Task::occupy(unit, cycles)
                .name(format!("SC{sc} {} step {step}", names.0))
                .category(cat)
                .arg("step", step as i64)
                .arg("hbm_bytes", bytes as i64)
                .arg("padding_bytes", padding as i64),
            Some((stage, step)),
            0,
        );
        let m = self.task(
            Task::transfer(self.units.hbm, bytes)
                .cap(dma_cap)
                .name(format!("SC{sc} {} step {step}", names.1))
                .category(cat)
                .arg("step", step as i64),
            Some((stage, step)),
            0,
        );
        (x, m)
    }

    /// Kernel `index` (in [`DenseProgram::kernels`] order) of step `step`.
    fn kernel(
        &mut self,
        after: TaskId,
        (index, k): (usize, &Kernel),
        step: usize,
        tc_hbm_cap: u64,
    ) -> Result<TaskId, WorkloadError> {
        let stage = match k.role {
            KernelRole::Forward => Stage::TcForward,
            KernelRole::Backward => Stage::TcBackward,
            KernelRole::Update => Stage::TcUpdate,
            KernelRole::Program => Stage::TcProgram,
        };
        // The kernel's index rides on the tag; `task` fills in the rest.
        let kernel_tag = SpanTag {
            kernel: Some(index as u32),
            ..SpanTag::new(Unit::TensorCore, stage, step)
        };
        let clock = self.tc_clock_hz;
        let launch_ps = (k.fixed_cycles as u128 * 1_000_000_000_000 / clock.max(1) as u128) as u64;
        let cat = match k.role {
            KernelRole::Forward => "tc_fwd",
            KernelRole::Backward => "tc_bwd",
            KernelRole::Update => "tc_update",
            KernelRole::Program => "tc_program",
        };
        let c = self.task(
            Task::occupy(self.units.tc, (k.cycles + k.fixed_cycles).max(1))
                .name(format!("{} step {step}", k.name))
                .category(cat)
                .arg("step", step as i64)
                .arg("hbm_bytes", k.hbm_bytes as i64)
                .arg("launch_cycles", k.fixed_cycles as i64)
                .tag(kernel_tag),
            Some((stage, step)),
            launch_ps,
        );
        let m = self.task(
            Task::transfer(self.units.hbm, k.hbm_bytes)
                .cap(tc_hbm_cap)
                .name(format!("{} HBM step {step}", k.name))
                .category(cat)
                .arg("step", step as i64)
                .tag(kernel_tag),
            Some((stage, step)),
            0,
        );
        self.dep(after, c)?;
        self.dep(after, m)?;
        self.join(&[c, m])
    }
}

/// Builds every step's tasks.
pub fn build(p: &Plan, work: &RunWork, dense: &DenseProgram) -> Result<StepGraph, WorkloadError> {
    rebuild(p, work, dense, None)
}

/// [`build`], rebuilding `old` (a graph of the same [`shape_key`]) in place when it has the same
/// structure: its resources and tasks are replaced, its dependencies and run-ready form kept. The
/// graph is the one `build` gives, task ids included; another structure is built afresh.
pub fn rebuild(
    p: &Plan,
    work: &RunWork,
    dense: &DenseProgram,
    old: Option<StepGraph>,
) -> Result<StepGraph, WorkloadError> {
    if let Some(old) = old {
        if let Some(g) = rebuild_in_place(p, work, dense, old)? {
            return Ok(g);
        }
    }
    emit(p, work, dense, None).map(|g| g.expect("a fresh build has no structure to differ from"))
}

/// `old` rebuilt in place as [`build`] would build the graph, or None when the structure differs.
pub fn rebuild_in_place(
    p: &Plan,
    work: &RunWork,
    dense: &DenseProgram,
    old: StepGraph,
) -> Result<Option<StepGraph>, WorkloadError> {
    emit(p, work, dense, Some(old))
}

/// The builder: into a new engine, or replacing `old`'s tasks in order (None when its structure
/// differs).
fn emit(
    p: &Plan,
    work: &RunWork,
    dense: &DenseProgram,
    old: Option<StepGraph>,
) -> Result<Option<StepGraph>, WorkloadError> {
    let w = &p.w;
    let spec = p.spec();
    let params = p.params();
    let sc = &p.sc;
    let mut e = Engine::new();
    // Spans are needed for the summary (busy and overlap fractions) even without a trace.
    e.set_recording(true);
    let host = e
        .add_unit("host", "preprocess", Clock::from_mhz(1000), QueuePolicy::Fifo)
        .map_err(err)?;
    let pcie = e
        .add_bandwidth("host", "PCIe", spec.host_link_bytes_per_s)
        .map_err(err)?;
    let tc_hz = p.model.clock_hz as u64;
    // The simulated chip is the one holding the busiest partition: named by its real index.
    let chip = chip_process(work);
    let tc = e
        .add_unit(&chip, "TC", Clock { hz: tc_hz }, QueuePolicy::Fifo)
        .map_err(err)?;
    let scs: Vec<ResourceId> = (0..spec.sparsecores_per_chip)
        .map(|s| e.add_unit(&chip, &format!("SC {s}"), Clock { hz: sc.clock_hz }, QueuePolicy::Fifo))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let hbm = e
        .add_bandwidth(&chip, "HBM", p.model.hbm.chip_bytes_per_s)
        .map_err(err)?;
    let ici_link_bytes_per_s = spec.ici_bytes_per_s_per_link.max(1);
    let ici = ici_links(&mut e, &chip, &p.slice, ici_link_bytes_per_s)?;
    let ici_bytes_per_s = (ici.len() as u64 * ici_link_bytes_per_s).max(1);
    // Rebuilding: the resources just made replace the old graph's, whose tasks are then replaced.
    let (e, preds, info, sc_tile_cycles, cursor) = match old {
        Some(mut o) => {
            if o.engine.replace_resources(e.resources()).is_err() {
                return Ok(None);
            }
            let cursor = Cursor {
                task: 0,
                dep: 0,
                same: true,
            };
            (o.engine, o.preds, o.info, o.sc_tile_cycles, Some(cursor))
        }
        None => (e, HashMap::new(), HashMap::new(), BTreeMap::new(), None),
    };
    let mut g = StepGraph {
        engine: e,
        units: Units {
            host,
            pcie,
            tc,
            scs,
            hbm,
            ici,
        },
        steps: Vec::new(),
        preds,
        info,
        ici_bytes_per_s,
        ici_link_bytes_per_s,
        tc_clock_hz: tc_hz,
        collective_launch_ns: params.ici_collective_launch_ns,
        hop_latency_ns: params.ici_hop_latency_ns,
        chip_process: chip.clone(),
        sc_tile_cycles,
        cursor,
    };
    let sc_dma_cap = ((sc.tile_dma_bytes_per_cycle * sc.tiles as f64 * sc.clock_hz as f64) as u64)
        .min((spec.hbm_bytes_per_s as f64 * sc.hbm_share) as u64)
        .max(1);
    let tc_hbm_cap = (p.model.hbm.device_bytes_per_s * p.tc_share).max(1);

    let asked = work.steps.len();
    let warm = super::window::warmup_steps(w.host.prefetch);
    for i in 0..warm + asked + super::window::drain_steps(w.host.prefetch) {
        let Some(sw) = work.steps.get(work_index(i, warm, asked, work.period)) else {
            break;
        };
        let gates = g.host_and_sparsecore(p, sw, i, sc_dma_cap)?;
        g.dense_and_collectives(p, dense, i, tc_hbm_cap, gates)?;
    }
    if let Some(c) = g.cursor.take() {
        let all = c.task == g.engine.task_count() && c.dep == g.engine.dep_count();
        // Every (SparseCore, step, direction) was written again: no key is left from the old graph.
        let tiles = g.sc_tile_cycles.len() == 2 * g.units.scs.len() * g.steps.len();
        if !(c.same && all && tiles) {
            return Ok(None);
        }
    }
    Ok(Some(g))
}

/// The tasks that open and close a step's SparseCore passes.
#[derive(Clone, Copy)]
struct ScGates {
    f_start: TaskId,
    f_done: TaskId,
    b_start: TaskId,
    b_done: TaskId,
}

/// The host's preprocessing time of one step, ns: its ids at the host threads' rate, plus the id
/// bound check where it is enabled.
fn host_stage_ns(p: &Plan, sw: &super::work::StepWork) -> u64 {
    let w = &p.w;
    let mut host_ns = (sw.ids as f64 / (w.host.threads as f64 * w.host.ids_per_s_per_thread) * 1e9) as u64;
    if w.xla_sparse_core_enable_id_bound_check {
        host_ns += sw.ids * p.params().host_id_bound_check_ps_per_id / 1000 / w.host.threads as u64;
    }
    host_ns
}

/// One SparseCore's forward and backward passes of one step, costed by the SparseCore model: compute
/// cycles, HBM bytes and padding bytes of each, and each tile's cycles (trace detail). The builder
/// only wires them.
struct ScStepCost {
    fwd: (u64, u64, u64),
    bwd: (u64, u64, u64),
    fwd_tiles: Vec<u64>,
    bwd_tiles: Vec<u64>,
}

fn sc_step_cost(p: &Plan, sw: &super::work::StepWork, s: usize) -> ScStepCost {
    let (w, sc, params, groups) = (&p.w, &p.sc, p.params(), p.serial_groups);
    let (mut fc, mut fb, mut fp, mut bc, mut bb, mut bp) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    // Each tile's compute cycles (forward, backward): its share of the ids and rows.
    let tiles = sc.tiles.max(1) as usize;
    let (mut ft, mut bt) = (vec![0u64; tiles], vec![0u64; tiles]);
    for (k, st) in p.stacks.iter().enumerate() {
        let wk = sw.per_stack.get(k).and_then(|v| v.get(s)).copied().unwrap_or_default();
        let f = sc.forward(wk, st.dim, st.elem_bytes);
        let bk = sc.backward(wk, st.dim, st.elem_bytes, st.optimizer);
        let passes = sw.minibatches.get(k).copied().unwrap_or(1) as u64;
        // Vector passes over the gathered rows: NaN checks (forward and backward) and
        // quantise + dequantise (forward).
        let lanes = if st.elem_bytes == 2 {
            sc.lanes_bf16
        } else {
            sc.lanes_f32
        }
        .max(1) as u64;
        let row_pass = wk.ids * st.dim.div_ceil(lanes) / sc.tiles.max(1) as u64;
        let nan = if w.xla_sc_detect_nan { row_pass } else { 0 };
        let quant = if w.quantization.is_some() { 2 * row_pass } else { 0 };
        let fixed = params.sc_pass_launch_cycles * passes + nan;
        for (t, (a, b)) in ft.iter_mut().zip(bt.iter_mut()).enumerate() {
            *a += sc.forward_tile_cycles(wk, st.dim, st.elem_bytes, t as u32) + fixed + quant;
            *b += sc.backward_tile_cycles(wk, st.dim, st.elem_bytes, st.optimizer, t as u32) + fixed;
        }
        fc += f.compute_cycles + params.sc_pass_launch_cycles * passes + nan + quant;
        fb += f.hbm_bytes;
        fp += f.hbm_padding_bytes;
        bc += bk.compute_cycles + params.sc_pass_launch_cycles * passes + nan;
        bb += bk.hbm_bytes;
        bp += bk.hbm_padding_bytes;
    }
    if p.has_sparsecore_tables() {
        let barrier = params.sc_serial_barrier_cycles * (groups - 1);
        fc += barrier;
        bc += barrier;
        ft.iter_mut().chain(bt.iter_mut()).for_each(|c| *c += barrier);
    }
    ScStepCost {
        fwd: (fc, fb, fp),
        bwd: (bc, bb, bp),
        fwd_tiles: ft,
        bwd_tiles: bt,
    }
}

/// One bandwidth resource per link group of the slice (`ICI x+`, ...), each at one link's rate.
fn ici_links(
    e: &mut Engine,
    chip: &str,
    slice: &sim_tpu::topology::SliceShape,
    link_bytes_per_s: u64,
) -> Result<Vec<(LinkGroup, ResourceId)>, WorkloadError> {
    link_groups(slice)
        .into_iter()
        .map(|g| {
            e.add_bandwidth(chip, &format!("ICI {}", g.name()), link_bytes_per_s)
                .map(|r| (g, r))
                .map_err(err)
        })
        .collect()
}

/// A collective's transfers: on each link group it loads, the bytes that take that group's time
/// alone at `link_bytes_per_s`. Groups the chip does not have are skipped.
pub fn link_transfers(links: &[(LinkGroup, ResourceId)], link_bytes_per_s: u64, loads: &LinkLoads) -> Vec<Task> {
    loads
        .per_group_ps
        .iter()
        .filter_map(|&(group, ps)| {
            let &(_, res) = links.iter().find(|(g, _)| *g == group)?;
            let bytes = (ps as u128 * link_bytes_per_s as u128 / 1_000_000_000_000) as u64;
            Some(Task::transfer(res, bytes))
        })
        .collect()
}

#[cfg(test)]
mod link_tests {
    use super::*;
    use sim_tpu::topology::SliceShape;

    /// Two collectives started together on a 4x4x8 slice's links at 1 GB/s; when the last ends, ps.
    fn both_done(a: &LinkLoads, b: &LinkLoads) -> u64 {
        let v4 = sim_tpu::chips::Chip::preset("v4").unwrap().spec;
        let slice = SliceShape::for_chip(&v4, 128, None).unwrap();
        let mut e = Engine::new();
        let links = ici_links(&mut e, "chip 0", &slice, 1_000_000_000).unwrap();
        for loads in [a, b] {
            for t in link_transfers(&links, 1_000_000_000, loads) {
                e.add_task(t);
            }
        }
        e.run().unwrap().makespan.0
    }

    fn on(groups: &[(usize, bool)], ps: u64) -> LinkLoads {
        LinkLoads {
            per_group_ps: groups
                .iter()
                .map(|&(axis, positive)| (LinkGroup { axis, positive }, ps))
                .collect(),
            latency_hops: 0,
        }
    }

    #[test]
    fn collectives_share_only_the_links_they_both_load() {
        // 1 ms each alone (1 MB on a 1 GB/s link). On different dimensions, or opposite directions
        // of one, they run side by side: 1 ms. On the same dimension and direction they split the
        // links' rate: both end at 2 ms.
        let x = on(&[(0, true), (0, false)], 1_000_000_000);
        let y = on(&[(1, true), (1, false)], 1_000_000_000);
        assert_eq!(both_done(&x, &y), 1_000_000_000);
        let x_plus = on(&[(0, true)], 1_000_000_000);
        let x_minus = on(&[(0, false)], 1_000_000_000);
        assert_eq!(both_done(&x_plus, &x_minus), 1_000_000_000);
        assert_eq!(both_done(&x, &x), 2_000_000_000);
        // Sharing one direction of one dimension only: that group carries 2 ms of bytes, the rest 1.
        let xy = on(&[(0, true), (1, true)], 1_000_000_000);
        assert_eq!(both_done(&xy, &x_plus), 2_000_000_000);
    }
}
