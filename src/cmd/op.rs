//! `tpusim op`.

/// Arguments of `tpusim op`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim op`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim op` is not built yet")
}
