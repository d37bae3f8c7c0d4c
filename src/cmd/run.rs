//! `tpusim run`.

/// Arguments of `tpusim run`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim run`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim run` is not built yet")
}
