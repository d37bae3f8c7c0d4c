//! `tpusim systolic`.

/// Arguments of `tpusim systolic`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim systolic`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim systolic` is not built yet")
}
