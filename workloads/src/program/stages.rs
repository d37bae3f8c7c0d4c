//! The step as data: the task graph's tagged tasks grouped into stages of steps, each with the units
//! it runs on, the cost inputs the engine runs it with, and the stages it waits on (through the
//! gates and joins between them). Read off the built graph, so it is the program that runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sim_core::engine::{Demand, TaskId};
use sim_core::tag::{SpanTag, Stage, Unit};

use super::graph::StepGraph;

/// One stage of one step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageNode {
    /// Tasks it is made of (kernels, passes, transfers on each link group, latencies).
    pub tasks: usize,
    /// Units it runs on.
    pub units: BTreeSet<Unit>,
    /// Cycles it occupies each unit for, summed over its tasks.
    pub cycles: BTreeMap<Unit, u64>,
    /// Bytes it moves through each bandwidth (HBM, PCIe, each ICI link group), summed.
    pub bytes: BTreeMap<Unit, u64>,
    /// Fixed delays (a collective's launch and hops), ps, summed.
    pub delay_ps: u64,
    /// The stages of steps that must finish before some task of it may start. A collective's fixed
    /// latency is passed through to the stage behind it, so a collective waits on what its latency does.
    pub waits_on: BTreeSet<(Stage, usize)>,
}

/// Every stage of every simulated step (warm-up and drain included), keyed by (stage, step).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepProgram {
    /// The stages.
    pub stages: BTreeMap<(Stage, usize), StageNode>,
}

impl StepProgram {
    /// Stage `stage` of step `step`.
    pub fn get(&self, stage: Stage, step: usize) -> Option<&StageNode> {
        self.stages.get(&(stage, step))
    }
    /// The stages step `step` has.
    pub fn stages_of(&self, step: usize) -> BTreeSet<Stage> {
        self.stages.keys().filter(|k| k.1 == step).map(|k| k.0).collect()
    }
}

/// A task's place in the program: its (stage, step), or none for gates and joins, which pass
/// dependencies through. A collective's latency passes them through too.
fn node_of(tag: Option<SpanTag>) -> Option<(Stage, usize)> {
    let t = tag?;
    match (t.stage?, t.step?) {
        (Stage::CollectiveLatency, _) => None,
        (s, i) => Some((s, i as usize)),
    }
}

/// The program `g` runs, as data.
pub fn step_program(g: &StepGraph) -> StepProgram {
    let e = &g.engine;
    let ids: Vec<TaskId> = (0..e.task_count()).filter_map(|k| e.task_at(k)).collect();
    let tag_of = |id: TaskId| e.task(id).and_then(|t| t.tag);
    let mut out = StepProgram::default();
    // What a pass-through task waits on, memoised (graphs have many joins).
    let mut through: HashMap<TaskId, BTreeSet<(Stage, usize)>> = HashMap::new();
    for &id in &ids {
        let Some(task) = e.task(id) else { continue };
        let Some(tag) = task.tag else { continue };
        let (Some(stage), Some(step)) = (tag.stage, tag.step) else {
            continue;
        };
        let node = out.stages.entry((stage, step as usize)).or_default();
        node.tasks += 1;
        node.units.insert(tag.unit);
        match task.demand {
            Demand::Occupy { cycles, .. } => *node.cycles.entry(tag.unit).or_default() += cycles,
            Demand::Transfer { bytes, .. } => *node.bytes.entry(tag.unit).or_default() += bytes,
            Demand::Delay(t) => node.delay_ps += t.0,
            Demand::Wait => {}
        }
        let me = (stage, step as usize);
        let mut waits = BTreeSet::new();
        for &p in g.preds.get(&id).map(Vec::as_slice).unwrap_or_default() {
            waits.extend(upstream(g, p, &tag_of, &mut through));
        }
        // Within a stage of a step (a chain of kernels, a pass's compute beside its traffic) is no wait.
        waits.remove(&me);
        let lat = node_of(Some(tag)).is_none();
        let key = if lat {
            (Stage::CollectiveLatency, step as usize)
        } else {
            me
        };
        out.stages.entry(key).or_default().waits_on.extend(waits);
    }
    out
}

/// The stages `id` stands for as a predecessor: its own, or for a pass-through task, those it waits on.
fn upstream(
    g: &StepGraph,
    id: TaskId,
    tag_of: &dyn Fn(TaskId) -> Option<SpanTag>,
    memo: &mut HashMap<TaskId, BTreeSet<(Stage, usize)>>,
) -> BTreeSet<(Stage, usize)> {
    if let Some(n) = node_of(tag_of(id)) {
        return BTreeSet::from([n]);
    }
    if let Some(m) = memo.get(&id) {
        return m.clone();
    }
    let mut out = BTreeSet::new();
    for &p in g.preds.get(&id).map(Vec::as_slice).unwrap_or_default() {
        out.extend(upstream(g, p, tag_of, memo));
    }
    memo.insert(id, out.clone());
    out
}
