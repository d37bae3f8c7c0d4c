//! sim-sparsecore: everything about SparseCores.
//!
//! - [`preprocess`]: host preprocessing bit-exact with jax-tpu-embedding (stacking, COO -> CSR, stats, id dropping, minibatching).
//! - [`crosscheck`]: names in limits files, FDO stats and specs resolved against the spec; batches checked against it.
//! - [`limits`]: limits files and FDO stats, estimation from data, compile-time and run-time verdicts.
//! - [`model`]: SparseCore timing and functional model.

pub mod crosscheck;
pub mod limits;
pub mod model;
pub mod preprocess;
