//! `tpusim init`: writes a commented starting workload (to stdout, or `-o FILE`), which runs as is.

use std::path::PathBuf;

use anyhow::Context;

/// Arguments of `tpusim init`.
#[derive(clap::Args)]
pub struct Args {
    /// Write the workload to this file instead of printing it (an existing file is kept unless --force).
    #[arg(short = 'o', long = "out", alias = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists.
    #[arg(long, requires = "output")]
    pub force: bool,
}

/// Runs `tpusim init`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let text = tpusim_api::run::starter_workload();
    let Some(path) = args.output else {
        print!("{text}");
        return Ok(0);
    };
    if path.is_dir() {
        anyhow::bail!(
            "-o {}: is a directory; give a file name such as workload.toml",
            path.display()
        );
    }
    if path.exists() && !args.force {
        anyhow::bail!("-o {}: the file exists; add --force to replace it", path.display());
    }
    tpusim_api::output::write_atomic(&path, text).with_context(|| format!("-o {}", path.display()))?;
    eprintln!("wrote {}: run it with `tpusim run {}`", path.display(), path.display());
    Ok(0)
}
