//! `tpusim demo`.

/// Arguments of `tpusim demo`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim demo`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim demo` is not built yet")
}
