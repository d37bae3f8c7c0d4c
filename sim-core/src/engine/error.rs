//! Engine errors.

/// Why a task graph cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// A dependency or flow names a task that is not in this engine.
    #[error("{context}: unknown task (an id from another engine?)")]
    UnknownTask {
        /// The call that named it.
        context: String,
    },
    /// A task uses a unit that is not in this engine.
    #[error("task {task:?}: unknown unit (an id from another engine?)")]
    UnknownUnit {
        /// Name of the task.
        task: String,
    },
    /// A task uses a bandwidth resource that is not in this engine.
    #[error("task {task:?}: unknown bandwidth resource (an id from another engine?)")]
    UnknownBandwidth {
        /// Name of the task.
        task: String,
    },
    /// A resource cannot make progress (zero servers, zero clock, zero bandwidth).
    #[error("resource {resource:?}: {what} must be > 0")]
    ZeroCapacity {
        /// "process/name" of the resource.
        resource: String,
        /// Which number is zero.
        what: String,
    },
    /// A transfer with a zero rate cap would never finish.
    #[error("task {task:?}: transfer rate cap must be > 0 bytes/s")]
    ZeroRateCap {
        /// Name of the task.
        task: String,
    },
    /// The dependencies contain a cycle, so these tasks can never start.
    #[error("dependency cycle: {}", cycle.join(" -> "))]
    Cycle {
        /// Names of the tasks on one cycle, in dependency order (first repeated at the end).
        cycle: Vec<String>,
    },
}
