//! The task-graph discrete-event engine.
//!
//! A simulation is a graph of tasks. Each task has dependencies and one demand:
//! - *occupy* a unit (MXU, VPU, SparseCore tile, sequencer) for N cycles of the unit's clock; a unit has
//!   one or more servers and a FIFO or priority queue;
//! - *transfer* B bytes through a bandwidth resource (HBM, ICI link, PCIe) with an optional per-transfer
//!   rate cap; concurrent transfers share the bandwidth max-min fairly (water-filling), recomputed at
//!   every start and finish, so contention is real;
//! - *delay* for a fixed time (a latency), or *wait* (a zero-time barrier joining its dependencies).
//!
//! Time is integer picoseconds; the event heap is ordered by (time, sequence number), so identical
//! inputs give identical schedules. Spans and counters go to a [`Recorder`] when recording is on.

mod heap;
mod run;

use slotmap::{new_key_type, SlotMap};

use crate::recorder::{ArgValue, Recorder, Track};
use crate::tag::SpanTag;
use crate::time::{Clock, SimTime};

pub use run::{FastForward, RunResult};

new_key_type! {
    /// A task in an [`Engine`].
    pub struct TaskId;
}

/// A unit or bandwidth resource of an [`Engine`] (index in creation order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId(pub u32);

/// How a unit orders the ready tasks waiting for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueuePolicy {
    /// First ready, first served.
    Fifo,
    /// Highest task priority first; ties first ready, first served.
    Priority,
}

/// What a task asks of the machine.
#[derive(Clone, Debug, PartialEq)]
pub enum Demand {
    /// Occupy one server of a unit for this many cycles of its clock.
    Occupy {
        /// The unit.
        unit: ResourceId,
        /// Cycles of the unit's clock.
        cycles: u64,
    },
    /// Move bytes through a bandwidth resource.
    Transfer {
        /// The bandwidth resource.
        resource: ResourceId,
        /// Bytes to move.
        bytes: u64,
        /// Largest rate this one transfer can reach, bytes per second (e.g. a DMA engine's limit).
        cap_bytes_per_s: Option<u64>,
    },
    /// Take a fixed time without using any resource (a latency).
    Delay(SimTime),
    /// Complete as soon as all dependencies have (a barrier).
    Wait,
}

/// A task: its demand plus what to show for it when recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// What the task asks for.
    pub demand: Demand,
    /// Name shown on its span.
    pub name: String,
    /// Category for colouring and filtering.
    pub category: String,
    /// Priority on units with [`QueuePolicy::Priority`] (higher first).
    pub priority: i32,
    /// Numbers attached to the span.
    pub args: Vec<(String, ArgValue)>,
    /// Overrides the track of the span (default: the resource's track; none for waits and delays).
    pub track: Option<Track>,
    /// What the span is, carried to it unread.
    pub tag: Option<SpanTag>,
}

impl Task {
    fn new(demand: Demand) -> Self {
        Task {
            demand,
            name: String::new(),
            category: String::new(),
            priority: 0,
            args: Vec::new(),
            track: None,
            tag: None,
        }
    }
    /// Occupy `unit` for `cycles` of its clock.
    pub fn occupy(unit: ResourceId, cycles: u64) -> Self {
        Task::new(Demand::Occupy { unit, cycles })
    }
    /// Transfer `bytes` through `resource`.
    pub fn transfer(resource: ResourceId, bytes: u64) -> Self {
        Task::new(Demand::Transfer {
            resource,
            bytes,
            cap_bytes_per_s: None,
        })
    }
    /// Take a fixed time.
    pub fn delay(t: SimTime) -> Self {
        Task::new(Demand::Delay(t))
    }
    /// A zero-time barrier.
    pub fn wait() -> Self {
        Task::new(Demand::Wait)
    }
    /// Sets the per-transfer rate cap (bytes per second); ignored for other demands.
    pub fn cap(mut self, bytes_per_s: u64) -> Self {
        if let Demand::Transfer { cap_bytes_per_s, .. } = &mut self.demand {
            *cap_bytes_per_s = Some(bytes_per_s);
        }
        self
    }
    /// Sets the span name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Sets the category.
    pub fn category(mut self, category: impl Into<String>) -> Self {
        self.category = category.into();
        self
    }
    /// Sets the priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
    /// Adds a named integer to the span.
    pub fn arg(mut self, key: impl Into<String>, value: i64) -> Self {
        self.args.push((key.into(), ArgValue::Int(value)));
        self
    }
    /// Adds a named value of any kind to the span.
    pub fn arg_value(mut self, key: impl Into<String>, value: ArgValue) -> Self {
        self.args.push((key.into(), value));
        self
    }
    /// Tags the span with what it is.
    pub fn tag(mut self, tag: SpanTag) -> Self {
        self.tag = Some(tag);
        self
    }
    /// Draws the span on this track.
    pub fn on_track(mut self, track: Track) -> Self {
        self.track = Some(track);
        self
    }
}

/// A resource and its parameters.
#[derive(Clone, Debug)]
pub enum Resource {
    /// A unit occupied for cycles.
    Unit {
        /// Where its spans are drawn.
        track: Track,
        /// Its clock.
        clock: Clock,
        /// Tasks it runs at once.
        servers: u32,
        /// Queue order.
        policy: QueuePolicy,
    },
    /// A bandwidth shared by concurrent transfers.
    Bandwidth {
        /// Where its spans are drawn.
        track: Track,
        /// Total rate, bytes per second.
        bytes_per_s: u64,
    },
}

impl Resource {
    /// The resource's track.
    pub fn track(&self) -> &Track {
        match self {
            Resource::Unit { track, .. } | Resource::Bandwidth { track, .. } => track,
        }
    }
}

/// Errors of building or running a task graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// A dependency names a task that does not exist (removed or from another engine).
    #[error("unknown task in a dependency")]
    UnknownTask,
    /// A demand names a resource of the wrong kind or that does not exist.
    #[error("task '{task}' uses resource {resource}, which {problem}")]
    BadResource {
        /// The task's name.
        task: String,
        /// The resource index.
        resource: u32,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The dependencies form a cycle: these tasks never became ready.
    #[error("the task graph has a cycle: {stuck} tasks never became ready (e.g. '{example}')")]
    Cycle {
        /// How many tasks never ran.
        stuck: usize,
        /// One of them.
        example: String,
    },
    /// A resource was given zero capacity.
    #[error("resource '{0}' has zero capacity")]
    ZeroCapacity(String),
    /// Replacement resources differ in number or kind from the engine's.
    #[error("the replacement resources differ in number or kind")]
    ResourcesDiffer,
}

/// A task graph over resources, ready to run.
#[derive(Default)]
pub struct Engine {
    pub(crate) resources: Vec<Resource>,
    pub(crate) tasks: SlotMap<TaskId, Task>,
    /// Task ids in insertion order (their dense positions).
    pub(crate) ids: Vec<TaskId>,
    /// Dense demands, kept beside the slot map so a run never walks the full task records.
    pub(crate) dense: Vec<run::Dense>,
    /// Dependencies as dense positions (before, after).
    pub(crate) deps: Vec<(u32, u32)>,
    /// Rate caps of capped transfers (dense records index into it).
    pub(crate) caps: Vec<u64>,
    /// The first task added with a bad resource; [`Engine::run`] reports it.
    pub(crate) first_error: Option<EngineError>,
    pub(crate) record: bool,
    /// The run-ready form of the graph (initial task records, successor lists), built by the first
    /// run and reused by later ones; adding tasks or dependencies drops it.
    pub(crate) template: std::sync::OnceLock<run::Template>,
}

impl Engine {
    /// An empty engine that records spans.
    pub fn new() -> Self {
        Engine {
            record: true,
            ..Default::default()
        }
    }

    /// Switches span and counter recording on or off (off is faster).
    pub fn set_recording(&mut self, on: bool) {
        self.record = on;
    }

    /// Adds a unit with one server.
    pub fn add_unit(
        &mut self,
        process: &str,
        thread: &str,
        clock: Clock,
        policy: QueuePolicy,
    ) -> Result<ResourceId, EngineError> {
        self.add_unit_with_servers(process, thread, clock, policy, 1)
    }

    /// Adds a unit that runs up to `servers` tasks at once.
    pub fn add_unit_with_servers(
        &mut self,
        process: &str,
        thread: &str,
        clock: Clock,
        policy: QueuePolicy,
        servers: u32,
    ) -> Result<ResourceId, EngineError> {
        if servers == 0 || clock.hz == 0 {
            return Err(EngineError::ZeroCapacity(format!("{process}/{thread}")));
        }
        let track = Track {
            process: process.into(),
            thread: thread.into(),
        };
        self.resources.push(Resource::Unit {
            track,
            clock,
            servers,
            policy,
        });
        Ok(ResourceId(self.resources.len() as u32 - 1))
    }

    /// Adds a bandwidth resource of `bytes_per_s`.
    pub fn add_bandwidth(&mut self, process: &str, thread: &str, bytes_per_s: u64) -> Result<ResourceId, EngineError> {
        if bytes_per_s == 0 {
            return Err(EngineError::ZeroCapacity(format!("{process}/{thread}")));
        }
        let track = Track {
            process: process.into(),
            thread: thread.into(),
        };
        self.resources.push(Resource::Bandwidth { track, bytes_per_s });
        Ok(ResourceId(self.resources.len() as u32 - 1))
    }

    /// The resources, in creation order.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// Adds a task.
    /// A task naming a missing resource, or one of the wrong kind, makes [`Engine::run`] fail
    /// with [`EngineError::BadResource`].
    pub fn add_task(&mut self, task: Task) -> TaskId {
        let dense = match run::Dense::of(&task, self) {
            Ok(d) => d,
            Err(e) => {
                self.first_error.get_or_insert(e);
                run::Dense::WAIT
            }
        };
        self.dense.push(dense);
        self.template = std::sync::OnceLock::new();
        let id = self.tasks.insert(task);
        self.ids.push(id);
        id
    }

    /// The task behind an id.
    pub fn task(&self, id: TaskId) -> Option<&Task> {
        self.tasks.get(id)
    }

    /// Makes `after` wait for `before` to finish.
    pub fn add_dep(&mut self, before: TaskId, after: TaskId) -> Result<(), EngineError> {
        let dense = |id: TaskId| run::dense_index(self.ids.len(), id).filter(|&i| self.ids[i as usize] == id);
        match (dense(before), dense(after)) {
            (Some(a), Some(b)) => {
                self.deps.push((a, b));
                self.template = std::sync::OnceLock::new();
                Ok(())
            }
            _ => Err(EngineError::UnknownTask),
        }
    }

    /// Number of tasks.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// The `i`-th task added.
    pub fn task_at(&self, i: usize) -> Option<TaskId> {
        self.ids.get(i).copied()
    }

    /// Number of dependencies.
    pub fn dep_count(&self) -> usize {
        self.deps.len()
    }

    /// The `k`-th dependency added: (before, after).
    pub fn dependency(&self, k: usize) -> Option<(TaskId, TaskId)> {
        self.deps
            .get(k)
            .map(|&(a, b)| (self.ids[a as usize], self.ids[b as usize]))
    }

    /// Replaces every resource's parameters, keeping tasks and dependencies: as many resources, each
    /// of the same kind. Occupy durations were converted with the old clocks: replace those tasks too.
    pub fn replace_resources(&mut self, resources: &[Resource]) -> Result<(), EngineError> {
        let same_kinds = resources.len() == self.resources.len()
            && resources.iter().zip(&self.resources).all(|(a, b)| {
                matches!(
                    (a, b),
                    (Resource::Unit { .. }, Resource::Unit { .. })
                        | (Resource::Bandwidth { .. }, Resource::Bandwidth { .. })
                )
            });
        if !same_kinds {
            return Err(EngineError::ResourcesDiffer);
        }
        for r in resources {
            let zero = match r {
                Resource::Unit { clock, servers, .. } => clock.hz == 0 || *servers == 0,
                Resource::Bandwidth { bytes_per_s, .. } => *bytes_per_s == 0,
            };
            if zero {
                let t = r.track();
                return Err(EngineError::ZeroCapacity(format!("{}/{}", t.process, t.thread)));
            }
        }
        self.resources = resources.to_vec();
        Ok(())
    }

    /// Replaces a task's demand and what is shown for it, keeping its dependencies, so a graph of
    /// the same structure runs again with other durations without being rebuilt. A demand naming a
    /// bad resource makes [`Engine::run`] fail, as with [`Engine::add_task`].
    pub fn replace_task(&mut self, id: TaskId, task: Task) -> Result<(), EngineError> {
        let i = run::dense_index(self.ids.len(), id)
            .filter(|&i| self.ids[i as usize] == id)
            .ok_or(EngineError::UnknownTask)? as usize;
        run::replace(self, i, &task);
        self.tasks[id] = task;
        Ok(())
    }

    /// Runs the graph to completion and returns per-task times, busy times and the recording.
    pub fn run(&self) -> Result<RunResult, EngineError> {
        run::run(self)
    }

    /// [`Engine::run`] for a graph that repeats: task `i + S` is a copy of task `i` one period
    /// later (same demand and dependency count, successors shifted by `S`), where `S` is the
    /// distance from `anchor` to `again`, its copy one period on. Each time a copy of `anchor`
    /// finishes the run's state is captured; once it equals an earlier capture shifted by whole
    /// periods (the argument is in `run/repeat.rs`), the periods the graph still has room for are
    /// written out as shifted copies and only the last ones are simulated. The result equals
    /// [`Engine::run`]'s (task times, statistics, events, spans and counter samples in the same
    /// order) except for [`RunResult::fast_forward`], which says what was skipped; a run whose
    /// state never repeats, or a graph that does not repeat with that stride, is simulated in full.
    pub fn run_repeating(&self, anchor: TaskId, again: TaskId) -> Result<RunResult, EngineError> {
        run::run_repeating(self, anchor, again)
    }

    pub(crate) fn new_recorder(&self) -> Recorder {
        Recorder::new()
    }
}

#[cfg(test)]
mod tests;
