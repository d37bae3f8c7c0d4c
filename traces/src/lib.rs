//! traces: Chrome trace-event JSON (opens in Perfetto and chrome://tracing) from recorded spans, flows and counters.
