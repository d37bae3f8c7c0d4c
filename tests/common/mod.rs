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

/// Runs the built tpusim with `args`, which must exit 0, and parses its stdout as JSON.
#[allow(dead_code)] // not every test binary reads JSON
pub fn tpusim_json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = tpusim(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// A fresh-enough scratch directory for one test process: `<tmp>/tpusim-<name>-<pid>`, created.
#[allow(dead_code)] // not every test binary writes files
pub fn scratch_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tpusim-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
