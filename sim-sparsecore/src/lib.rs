//! sim-sparsecore: everything about SparseCores.
//!
//! - [`preprocess`]: host preprocessing bit-exact with jax-tpu-embedding (stacking, COO -> CSR, stats, id dropping, minibatching).
//! - [`limits`]: limits files and FDO stats, estimation from data, compile-time and run-time verdicts.
//! - [`model`]: SparseCore timing and functional model.

pub mod limits;
pub mod model;
pub mod preprocess;
