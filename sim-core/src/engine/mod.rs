//! The task-graph discrete-event engine: tasks with dependencies and one demand each (occupy a
//! unit, transfer bytes through a shared bandwidth resource, wait, or a fixed delay); integer
//! picosecond time; deterministic event order ((time, sequence) heap).
//!
//! ```
//! use sim_core::engine::{Engine, QueuePolicy, Task};
//! use sim_core::time::{Clock, SimTime};
//! let mut e = Engine::new();
//! let hbm = e.add_bandwidth("chip0", "HBM", 100);
//! let mxu = e.add_unit("chip0", "TC MXU", Clock::from_mhz(1000), QueuePolicy::Fifo);
//! let load = e.add_task(Task::transfer(hbm, 100).name("load"));
//! let mm = e.add_task(Task::occupy(mxu, 1000).name("matmul").category("mxu"));
//! e.add_dep(load, mm);
//! let r = e.run().unwrap();
//! assert_eq!(r.end(load), Some(SimTime(1_000_000_000_000)));
//! assert_eq!(r.end(mm), Some(SimTime(1_000_001_000_000)));
//! ```

mod bandwidth;
mod error;
mod run;

use slotmap::{new_key_type, SlotMap};

use crate::recorder::ArgValue;
use crate::time::{Clock, SimTime};

pub use error::EngineError;
pub use run::{BandwidthStats, RunReport, TaskTimes, UnitStats};

new_key_type! {
    /// A task in an [`Engine`].
    pub struct TaskId;
    /// A unit (server resource: MXU, VPU, SC tile, sequencer) in an [`Engine`].
    pub struct UnitId;
    /// A bandwidth resource (HBM, ICI link, PCIe, DMA engine) in an [`Engine`].
    pub struct BandwidthId;
}

/// Order in which ready tasks waiting for a busy unit are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueuePolicy {
    /// First ready, first served.
    Fifo,
    /// Highest [`Task::priority`] first; ties in ready order.
    Priority,
}

/// What a task needs in order to complete.
#[derive(Clone, Debug, PartialEq)]
pub enum Demand {
    /// Hold one server of a unit for this many cycles of the unit's clock.
    Occupy {
        /// The unit.
        unit: UnitId,
        /// Cycles of the unit's clock.
        cycles: u64,
    },
    /// Move bytes through a bandwidth resource, sharing its rate fairly with concurrent transfers.
    Transfer {
        /// The bandwidth resource.
        bandwidth: BandwidthId,
        /// Bytes to move.
        bytes: u64,
        /// Upper bound on this transfer's rate in bytes per second (`u64::MAX`: none).
        rate_cap_bytes_per_s: u64,
    },
    /// Complete as soon as all dependencies have completed (barrier; zero duration).
    Wait,
    /// Complete a fixed time after all dependencies have completed, using no resource (latency).
    Delay {
        /// Duration.
        duration: SimTime,
    },
}

/// A task to add to an [`Engine`]: one demand plus what the recorder should show about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// What the task needs.
    pub demand: Demand,
    /// Span name.
    pub name: String,
    /// Span category (for colouring and filtering).
    pub category: String,
    /// Named numbers shown on the span.
    pub args: Vec<(String, ArgValue)>,
    /// Queue priority on a [`QueuePolicy::Priority`] unit: higher runs first.
    pub priority: i64,
    /// Track for Wait/Delay tasks (process, thread); they record no span without one.
    pub track: Option<(String, String)>,
}

impl Task {
    fn with(demand: Demand) -> Self {
        Task {
            demand,
            name: String::new(),
            category: String::new(),
            args: Vec::new(),
            priority: 0,
            track: None,
        }
    }
    /// Occupies one server of `unit` for `cycles` cycles of its clock.
    pub fn occupy(unit: UnitId, cycles: u64) -> Self {
        Self::with(Demand::Occupy { unit, cycles })
    }
    /// Transfers `bytes` through `bandwidth` (no rate cap; see [`Task::rate_cap`]).
    pub fn transfer(bandwidth: BandwidthId, bytes: u64) -> Self {
        Self::with(Demand::Transfer {
            bandwidth,
            bytes,
            rate_cap_bytes_per_s: u64::MAX,
        })
    }
    /// A barrier: completes when its dependencies complete, taking no time.
    pub fn wait() -> Self {
        Self::with(Demand::Wait)
    }
    /// A fixed latency using no resource.
    pub fn delay(duration: SimTime) -> Self {
        Self::with(Demand::Delay { duration })
    }
    /// Sets the span name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Sets the span category.
    pub fn category(mut self, category: impl Into<String>) -> Self {
        self.category = category.into();
        self
    }
    /// Attaches a named number or text to the span.
    pub fn arg(mut self, key: impl Into<String>, value: impl Into<ArgValue>) -> Self {
        self.args.push((key.into(), value.into()));
        self
    }
    /// Sets the queue priority (higher first on priority units).
    pub fn priority(mut self, priority: i64) -> Self {
        self.priority = priority;
        self
    }
    /// Caps a transfer's rate in bytes per second (ignored for other demands).
    pub fn rate_cap(mut self, bytes_per_s: u64) -> Self {
        if let Demand::Transfer {
            rate_cap_bytes_per_s, ..
        } = &mut self.demand
        {
            *rate_cap_bytes_per_s = bytes_per_s;
        }
        self
    }
    /// Draws a Wait/Delay task's span on this track (occupy/transfer spans use their resource's track).
    pub fn on_track(mut self, process: impl Into<String>, thread: impl Into<String>) -> Self {
        self.track = Some((process.into(), thread.into()));
        self
    }
}

impl From<i64> for ArgValue {
    fn from(v: i64) -> Self {
        ArgValue::Int(v)
    }
}
impl From<u64> for ArgValue {
    fn from(v: u64) -> Self {
        ArgValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<usize> for ArgValue {
    fn from(v: usize) -> Self {
        ArgValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<i32> for ArgValue {
    fn from(v: i32) -> Self {
        ArgValue::Int(v.into())
    }
}
impl From<u32> for ArgValue {
    fn from(v: u32) -> Self {
        ArgValue::Int(v.into())
    }
}
impl From<f64> for ArgValue {
    fn from(v: f64) -> Self {
        ArgValue::Float(v)
    }
}
impl From<&str> for ArgValue {
    fn from(v: &str) -> Self {
        ArgValue::Text(v.to_string())
    }
}
impl From<String> for ArgValue {
    fn from(v: String) -> Self {
        ArgValue::Text(v)
    }
}

/// A unit: `servers` identical servers behind one queue, timed by `clock`.
#[derive(Clone, Debug)]
pub struct Unit {
    /// Process (chip or host) the unit belongs to.
    pub process: String,
    /// Unit name (the track's thread).
    pub name: String,
    /// Clock converting the tasks' cycles to time.
    pub clock: Clock,
    /// Queue order.
    pub policy: QueuePolicy,
    /// Parallel servers (>= 1).
    pub servers: u32,
}

/// A bandwidth resource shared max-min fairly among its active transfers.
#[derive(Clone, Debug)]
pub struct Bandwidth {
    /// Process (chip or host) the resource belongs to.
    pub process: String,
    /// Resource name (the track's thread).
    pub name: String,
    /// Total rate in bytes per second.
    pub bytes_per_s: u64,
}

/// Stored task: the user's task plus its dense index (insertion order).
#[derive(Clone, Debug)]
struct TaskData {
    task: Task,
    dense: u32,
}

/// A task graph on units and bandwidth resources. Build it, then [`Engine::run`] it (any number of
/// times: runs do not change the engine, so identical engines give identical reports).
#[derive(Clone, Debug)]
pub struct Engine {
    tasks: SlotMap<TaskId, TaskData>,
    order: Vec<TaskId>,
    units: SlotMap<UnitId, Unit>,
    bandwidths: SlotMap<BandwidthId, Bandwidth>,
    /// Dependencies as dense (before, after) pairs.
    deps: Vec<(u32, u32)>,
    /// Flow arrows to record between task spans: (from, to, label).
    flows: Vec<(TaskId, TaskId, String)>,
    /// First invalid call (e.g. a dependency on an unknown task), reported by `run`.
    deferred_error: Option<EngineError>,
    recording: bool,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    /// An empty engine with recording on.
    pub fn new() -> Self {
        Engine {
            tasks: SlotMap::with_key(),
            order: Vec::new(),
            units: SlotMap::with_key(),
            bandwidths: SlotMap::with_key(),
            deps: Vec::new(),
            flows: Vec::new(),
            deferred_error: None,
            recording: true,
        }
    }

    /// Switches recording of spans and counters on or off (off is faster).
    pub fn set_recording(&mut self, on: bool) {
        self.recording = on;
    }

    /// Adds a single-server unit.
    pub fn add_unit(
        &mut self,
        process: impl Into<String>,
        name: impl Into<String>,
        clock: Clock,
        policy: QueuePolicy,
    ) -> UnitId {
        self.add_unit_servers(process, name, clock, policy, 1)
    }

    /// Adds a unit with `servers` parallel servers sharing one queue.
    pub fn add_unit_servers(
        &mut self,
        process: impl Into<String>,
        name: impl Into<String>,
        clock: Clock,
        policy: QueuePolicy,
        servers: u32,
    ) -> UnitId {
        self.units.insert(Unit {
            process: process.into(),
            name: name.into(),
            clock,
            policy,
            servers,
        })
    }

    /// Adds a bandwidth resource of `bytes_per_s` bytes per second.
    pub fn add_bandwidth(
        &mut self,
        process: impl Into<String>,
        name: impl Into<String>,
        bytes_per_s: u64,
    ) -> BandwidthId {
        self.bandwidths.insert(Bandwidth {
            process: process.into(),
            name: name.into(),
            bytes_per_s,
        })
    }

    /// Adds a task; it becomes ready when all its dependencies have completed.
    pub fn add_task(&mut self, task: Task) -> TaskId {
        let dense = self.order.len() as u32;
        let id = self.tasks.insert(TaskData { task, dense });
        self.order.push(id);
        id
    }

    /// Makes `after` wait for `before` to complete. Unknown tasks are reported by [`Engine::run`].
    pub fn add_dep(&mut self, before: TaskId, after: TaskId) {
        match (self.tasks.get(before), self.tasks.get(after)) {
            (Some(b), Some(a)) => self.deps.push((b.dense, a.dense)),
            _ => {
                if self.deferred_error.is_none() {
                    self.deferred_error = Some(EngineError::UnknownTask {
                        context: "add_dep".to_string(),
                    });
                }
            }
        }
    }

    /// Records a flow arrow from `from`'s span to `to`'s span (both must record spans).
    pub fn add_flow(&mut self, from: TaskId, to: TaskId, label: impl Into<String>) {
        self.flows.push((from, to, label.into()));
    }

    /// The task behind an id.
    pub fn task(&self, id: TaskId) -> Option<&Task> {
        self.tasks.get(id).map(|d| &d.task)
    }
    /// The unit behind an id.
    pub fn unit(&self, id: UnitId) -> Option<&Unit> {
        self.units.get(id)
    }
    /// The bandwidth resource behind an id.
    pub fn bandwidth(&self, id: BandwidthId) -> Option<&Bandwidth> {
        self.bandwidths.get(id)
    }
    /// Number of tasks.
    pub fn task_count(&self) -> usize {
        self.order.len()
    }
    /// Number of dependencies.
    pub fn dep_count(&self) -> usize {
        self.deps.len()
    }
}

#[cfg(test)]
mod tests;
