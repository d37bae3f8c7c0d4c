//! workloads: workload specs and presets, id generators, and the training-step program builder
//! (TensorCore/SparseCore pipelining with stale gradients), plus the functional mode that trains a
//! small model on the simulated schedule.
//!
//! Architecture invariant: workloads builds task graphs and reads results; the engine owns time.

pub mod cache;
pub mod contention;
pub mod functional;
pub mod gather;
pub mod ids;
pub mod knobs;
pub mod lesson;
pub mod program;
pub mod sensitivity;
pub mod spec;
pub mod stepwork;

pub use program::{simulate, RunOptions, RunResult};
pub use spec::{Pipelining, Workload, WorkloadError};
