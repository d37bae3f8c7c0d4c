//! Writes the trace of a small hand-built recorder: `cargo run -p traces --example hand_built -- OUT.json`.

use std::fs::File;

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "hand_built_trace.json".to_string());
    traces::write_trace(&traces::sample::sample_recorder(), File::create(&path)?)?;
    eprintln!("wrote {path}");
    Ok(())
}
