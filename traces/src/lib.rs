//! traces: Chrome trace-event JSON (opens in Perfetto, chrome://tracing and speedscope) from recorded spans,
//! flows and counters.
//!
//! Layout of the output: one process per [`Track::process`](sim_core::recorder::Track) (the host first, then chips
//! in natural order: "chip 2" before "chip 10"), one thread per unit in the order the unit first appears in the
//! recorder, each named with `process_name`/`thread_name` metadata and ordered with sort indices. Spans become
//! complete (`"X"`) events carrying their args; counters become `"C"` events; flows become `"s"`/`"f"` pairs bound
//! to the source span (at its last picosecond) and the enclosing destination span (`"bp": "e"`).
//!
//! Timestamps are microseconds written as exact decimals of the integer picoseconds (`1234567 ps` ->
//! `1.234567`): no floats touch time, and the same recorder always gives the same bytes.

mod ids;
pub mod sample;
mod write;

pub use ids::TrackIds;
pub use write::{us_from_ps, write_trace};

/// Writes a recorder's trace to a `String` (convenience for tests and small traces).
pub fn trace_string(rec: &sim_core::recorder::Recorder) -> String {
    let mut buf = Vec::new();
    write_trace(rec, &mut buf).expect("writing to a Vec cannot fail");
    String::from_utf8(buf).expect("the writer emits UTF-8 only")
}
