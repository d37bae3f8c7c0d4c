//! `tpusim layout`.

/// Arguments of `tpusim layout`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim layout`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim layout` is not built yet")
}
