//! `tpusim chips`.

/// Arguments of `tpusim chips`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim chips`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim chips` is not built yet")
}
