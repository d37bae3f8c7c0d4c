//! `tpusim limits`.

/// Arguments of `tpusim limits`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim limits`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim limits` is not built yet")
}
