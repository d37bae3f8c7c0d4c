//! tpusim's JSON contracts as library functions: what `tpusim layout|preprocess|limits|chips|op|hlo|
//! select|run|sweep|systolic|explain|demo --json` print is built here, once, and both the CLI and the
//! Python package call these functions, so the two agree field for field.
//!
//! This crate is the only door to the model crates (sim-core, sim-sparsecore, sim-tpu, workloads,
//! reports) for the CLI and Python; it holds no model of its own. Functions take typed inputs (paths,
//! parsed specs, id batches) and return typed results or `serde_json` values in the CLI's schema.
//! What it re-exports is data (types a caller names, fills or prints, and constants) and sim-core's
//! presentation helpers (`units`, `output`); every model entry point is a function of this crate.

pub mod chips;
pub mod explain;
pub mod hlo;
pub mod layout;
mod layout_svg;
pub mod limits;
pub mod op;
pub mod preprocess;
pub mod run;
pub mod select;
pub mod sweep;
pub mod systolic;

/// Numbers formatted for people (bytes, µs, rates, percentages): sim-core's one formatter.
pub use sim_core::units;

/// Files written whole or not at all, as one output set per command (sim-core's `output`).
pub mod output {
    pub use sim_core::output::{
        check_dir, check_writable, create_dir_all, remove_pending, write_atomic, write_with, OutputSet,
    };
}

/// An error of an API call. Its `Display` (alternate form, `{:#}`) is the message the CLI prints after
/// `error: `; the error it came from stays reachable through `source()`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad input or usage (the CLI exits 2): the failing call's error with the context added on the way.
    #[error(transparent)]
    Input(#[from] anyhow::Error),
    /// A preprocessing limit is exceeded with id dropping off (the CLI exits 1; jax-tpu-embedding aborts).
    #[error(transparent)]
    LimitExceeded(#[from] sim_sparsecore::preprocess::LimitExceeded),
}

/// What kind of failure an error is, which decides the CLI's exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input or the usage is wrong (exit 2).
    BadInput,
    /// The input is valid and a check on it failed (exit 1).
    CheckFailed,
}

impl ApiError {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ApiError::Input(_) => ErrorKind::BadInput,
            ApiError::LimitExceeded(_) => ErrorKind::CheckFailed,
        }
    }

    /// The whole message: every error of the chain, outermost first, joined by `: `.
    pub fn message(&self) -> String {
        format!("{self:#}")
    }
}

impl ErrorKind {
    /// The kind of any error a command returns: an [`ApiError`]'s own kind (context added around it
    /// included), bad input for everything else.
    pub fn of(e: &anyhow::Error) -> ErrorKind {
        e.downcast_ref::<ApiError>().map_or(ErrorKind::BadInput, ApiError::kind)
    }

    /// The process exit code of the kind: 2 bad input, 1 a check failed.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::BadInput => 2,
            ErrorKind::CheckFailed => 1,
        }
    }
}

/// The result of an API call.
pub type Result<T> = std::result::Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn limit_exceeded() -> sim_sparsecore::preprocess::LimitExceeded {
        sim_sparsecore::preprocess::LimitExceeded {
            stack: "t".into(),
            kind: sim_sparsecore::preprocess::LimitKind::MaxIds,
            partition: 3,
            device: 0,
            sparsecore: 1,
            observed: 9,
            limit: 8,
        }
    }

    #[test]
    fn the_chain_is_kept_and_printed_once() {
        let inner = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e: ApiError = anyhow::Error::from(inner).context("reading spec.json").into();
        assert_eq!(e.message(), "reading spec.json: no such file");
        let source = std::error::Error::source(&e).expect("the io error is kept as the source");
        assert_eq!(source.to_string(), "no such file");
        // Context the CLI adds around an API error: one chain, each message once.
        let outer = anyhow::Error::from(e).context("--out x");
        assert_eq!(format!("{outer:#}"), "--out x: reading spec.json: no such file");
    }

    #[test]
    fn exit_codes_follow_the_kind_not_the_message() {
        let bad: anyhow::Error = ApiError::from(anyhow::anyhow!("Observed max ids per partition")).into();
        assert_eq!(ErrorKind::of(&bad).exit_code(), 2);
        let failed = anyhow::Error::from(ApiError::from(limit_exceeded()));
        assert_eq!(ErrorKind::of(&failed), ErrorKind::CheckFailed);
        assert_eq!(ErrorKind::of(&failed.context("while preprocessing")).exit_code(), 1);
        let plain = Err::<(), _>(std::fmt::Error).context("not an api error").unwrap_err();
        assert_eq!(ErrorKind::of(&plain), ErrorKind::BadInput);
        let message = ApiError::from(limit_exceeded()).message();
        assert!(
            message.starts_with("Observed max ids per partition: 9 for table: t"),
            "{message}"
        );
    }
}
