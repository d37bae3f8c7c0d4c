//! `tpusim explain`.

/// Arguments of `tpusim explain`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim explain`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim explain` is not built yet")
}
