//! `tpusim sweep`.

/// Arguments of `tpusim sweep`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim sweep`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim sweep` is not built yet")
}
