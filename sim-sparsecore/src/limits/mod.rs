//! Limits: our limits files and jax-tpu-embedding's FDO stats (NPZ and CSV), estimation of limits
//! from data, and the verdicts users act on: compile-time (SparseCore memory, as the XLA TPU compiler
//! judges it), HBM (the SparseCore guide's stack estimates) and run-time (minibatching, dropped ids).

pub mod compile;
pub mod files;
pub mod hbm;
pub mod resolve;

pub use compile::{
    compile_check, stack_compile_case, CompileCase, CompileVerdict, ProgramKind, ScCompileParams, VerdictClass,
};
pub mod estimate;

pub use files::{FdoStack, FdoStats, LimitsFile, StackLimit};
