//! sim-core: the parts of tpusim that know nothing about TPUs.
//!
//! - [`time`]: simulated time in integer picoseconds and clocks that convert cycles to time.
//! - [`layout`]: XLA shapes and layouts (parse, print, validate, sizes, index maps).
//! - [`buffer`]: tiled buffers whose storage is in physical (tiled) order, padding included.
//! - [`engine`]: the task-graph discrete-event engine.
//! - [`memory`]: capacity accounting per memory space with peak tracking.
//! - [`recorder`]: spans, flows and counters recorded by the engine for traces and reports.
//! - [`tag`]: a span's typed identity (unit, stage, step) that every consumer reads.
//! - [`summary`]: the run summary schema shared by workloads and reports.
//! - [`suggest`]: "did you mean" for mistyped names (edit distance).
//! - [`units`]: numbers as people read them (KiB/MiB/GiB, µs/ms, M samples/s, percentages).
//!
//! Architecture invariant: sim-core knows nothing about TPUs; chip facts live in sim-tpu.

pub mod buffer;
pub mod de;
pub mod engine;
pub mod layout;
pub mod memory;
pub mod output;
pub mod recorder;
pub mod suggest;
pub mod summary;
pub mod tag;
pub mod time;
pub mod units;
