//! tpusim: the command-line interface. Thin: parses arguments, calls `tpusim-api` (its only door to the
//! model crates), prints.
//! Exit codes: 0 ok, 1 a check failed, 2 bad input or usage.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Cycle-approximate simulator of Google TPU chips.
#[derive(Parser)]
#[command(name = "tpusim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// XLA shapes and TPU layouts: canonical text, sizes, padding, index maps, pictures.
    Layout(cmd::layout::Args),
    /// SparseCore host preprocessing of embedding ids, as jax-tpu-embedding does it.
    Preprocess(cmd::preprocess::Args),
    /// Embedding limits: estimate from data, validate before compiling, compile-time check.
    Limits(cmd::limits::Args),
    /// Chip presets and their sources.
    Chips(cmd::chips::Args),
    /// Cost an XLA HLO module (e.g. from jax) on a chip: op profile, bytes, HBM fit, what-ifs.
    Hlo(cmd::hlo::Args),
    /// Cost of one TensorCore or SparseCore op on a chip.
    Op(cmd::op::Args),
    /// Kernel selection for a small op graph: formats, precisions and the conversions inserted.
    Select(cmd::select::Args),
    /// SCALE-Sim-compatible systolic-array compute cycles.
    Systolic(cmd::systolic::Args),
    /// Write a commented starting workload (runs as is with `tpusim run`).
    Init(cmd::init::Args),
    /// Simulate training steps of a recommender workload.
    Run(cmd::run::Args),
    /// Capacity sweeps over chips, chip counts and batch sizes.
    Sweep(cmd::sweep::Args),
    /// Teaching views: pipelining, limits.
    Explain(cmd::explain::Args),
    /// Run the built-in demo and write its report, trace and plots.
    Demo(cmd::demo::Args),
}

impl Command {
    /// Whether the command may write files (whose temporaries an interrupt must remove).
    fn writes_files(&self) -> bool {
        !matches!(
            self,
            Command::Preprocess(_) | Command::Chips(_) | Command::Op(_) | Command::Select(_)
        )
    }
}

fn main() -> ExitCode {
    // A closed stdout (`tpusim run ... | head -1`) ends the program as any Unix filter ends: by SIGPIPE,
    // quietly, instead of a panic in the middle of printing.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(2),
            };
        }
    };
    // Ctrl-C or SIGTERM: no half-written file stays behind (outputs are renamed into place only
    // when complete); the pending temporary files are removed and the run stops with 130. Commands
    // that only print need no handler (it costs a thread at start-up).
    if cli.command.writes_files() {
        let _ = ctrlc::set_handler(|| {
            tpusim_api::output::remove_pending();
            eprintln!("interrupted: no output was left half-written");
            std::process::exit(130);
        });
    }
    // Every file the command writes is one output set: in place together when it succeeds (exit 0
    // or 1), none of them when it fails.
    let outputs = tpusim_api::output::OutputSet::begin();
    let result = match cli.command {
        Command::Layout(a) => cmd::layout::run(a),
        Command::Preprocess(a) => cmd::preprocess::run(a),
        Command::Limits(a) => cmd::limits::run(a),
        Command::Chips(a) => cmd::chips::run(a),
        Command::Hlo(a) => cmd::hlo::run(a),
        Command::Op(a) => cmd::op::run(a),
        Command::Select(a) => cmd::select::run(a),
        Command::Systolic(a) => cmd::systolic::run(a),
        Command::Init(a) => cmd::init::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Sweep(a) => cmd::sweep::run(a),
        Command::Explain(a) => cmd::explain::run(a),
        Command::Demo(a) => cmd::demo::run(a),
    };
    let result = result.and_then(|code| {
        if code <= 1 {
            outputs.commit()?;
        } else {
            drop(outputs);
        }
        Ok(code)
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(tpusim_api::ErrorKind::of(&e).exit_code())
        }
    }
}
