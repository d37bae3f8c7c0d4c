//! `tpusim select`.

/// Arguments of `tpusim select`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim select`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim select` is not built yet")
}
