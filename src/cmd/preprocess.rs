//! `tpusim preprocess`.

/// Arguments of `tpusim preprocess`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tpusim preprocess`.
pub fn run(_args: Args) -> anyhow::Result<u8> {
    anyhow::bail!("`tpusim preprocess` is not built yet")
}
