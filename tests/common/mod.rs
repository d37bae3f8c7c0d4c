//! Helpers shared by the CLI tests.

use std::process::Command;

/// Runs the built tpusim with `args`: (exit code, stdout, stderr).
pub fn tpusim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tpusim")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// A fresh-enough scratch directory for one test process: `<tmp>/tpusim-<name>-<pid>`, created.
#[allow(dead_code)] // not every test binary writes files
pub fn scratch_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tpusim-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
