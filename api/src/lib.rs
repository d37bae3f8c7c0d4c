//! tpusim's JSON contracts as library functions: what `tpusim layout|preprocess|limits|op|hlo|run|sweep|
//! systolic|explain|demo --json` print is built here, once, and both the CLI and the Python package call these functions,
//! so the two agree field for field.
//!
//! This crate composes the model crates (sim-sparsecore, sim-tpu, workloads, reports); it holds no
//! model of its own. Functions take typed inputs (paths, parsed specs, id batches) and return typed
//! results or `serde_json` values in the CLI's schema.

pub mod explain;
pub mod hlo;
pub mod layout;
pub mod limits;
pub mod op;
pub mod preprocess;
pub mod run;
pub mod sweep;
pub mod systolic;

/// An error of an API call, carrying the message the CLI prints after `error: `.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad input or usage (the CLI exits 2).
    #[error("{0:#}")]
    Input(anyhow::Error),
    /// A preprocessing limit is exceeded with id dropping off (the CLI exits 1; jax-tpu-embedding aborts).
    #[error("{0}")]
    LimitExceeded(sim_sparsecore::preprocess::LimitExceeded),
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        ApiError::Input(e)
    }
}

/// The result of an API call.
pub type Result<T> = std::result::Result<T, ApiError>;
