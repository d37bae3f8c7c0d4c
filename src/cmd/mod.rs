//! One module per subcommand. Each has `Args` (clap) and `run(Args) -> anyhow::Result<u8>`:
//! `Ok(0)` done, `Ok(1)` a check failed, `Err(_)` bad input or usage (exit 2, message on stderr).

pub mod chips;
pub mod demo;
pub mod explain;
pub mod hlo;
pub mod init;
pub mod layout;
pub mod limits;
pub mod op;
pub mod preprocess;
pub mod run;
pub mod select;
pub mod sweep;
pub mod systolic;
