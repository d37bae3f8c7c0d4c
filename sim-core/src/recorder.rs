//! What a simulation leaves behind for people to look at: spans on named tracks, flow arrows
//! between spans, and counter samples. The engine appends; traces and reports read.
//!
//! Tracks are named by a process (a chip, or the host) and a thread (a unit inside it), the way
//! Chrome's trace-event format and Perfetto group them.

use serde::{Deserialize, Serialize};

use crate::tag::SpanTag;
use crate::time::SimTime;

/// A value attached to a span: the numbers behind it (bytes, padded bytes, ids, cycles).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArgValue {
    /// An integer count (bytes, cycles, ids).
    Int(i64),
    /// A real-valued figure (a ratio, a utilisation).
    Float(f64),
    /// Free text.
    Text(String),
}

/// Where a span is drawn: process (e.g. "chip 0", "host") and thread (e.g. "TC MXU", "SC1 tile 3").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Track {
    /// Process: a chip or the host.
    pub process: String,
    /// Thread: a unit within the process.
    pub thread: String,
}

/// One interval of work on a track.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Where the span is drawn.
    pub track: Track,
    /// What ran, e.g. "SC fwd step 3 table t0".
    pub name: String,
    /// Category for colouring and filtering, e.g. "sc_fwd", "tc_bwd", "dma", "ici".
    pub category: String,
    /// Start time.
    pub start: SimTime,
    /// End time (>= start).
    pub end: SimTime,
    /// Named numbers behind the span, in insertion order.
    pub args: Vec<(String, ArgValue)>,
    /// What the span is (unit, stage, step), as the task's builder set it; none for untagged work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<SpanTag>,
}

/// Index of a span in a [`Recorder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SpanId(pub usize);

/// An arrow from the end of one span to the start of another (a dependency worth showing).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// Source span.
    pub from: SpanId,
    /// Destination span.
    pub to: SpanId,
    /// Label, e.g. "stale gradients (step i -> i+2)".
    pub name: String,
}

/// One sample of a counter track (e.g. HBM bandwidth in use, bytes in use per memory space).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CounterSample {
    /// Process the counter belongs to.
    pub process: String,
    /// Counter name, with its unit, e.g. "HBM GB/s".
    pub name: String,
    /// When the value takes effect.
    pub time: SimTime,
    /// The value from `time` until the next sample of the same counter.
    pub value: f64,
}

/// Append-only store of spans, flows and counter samples.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Recorder {
    /// Spans in the order they were recorded.
    pub spans: Vec<Span>,
    /// Flow arrows between recorded spans.
    pub flows: Vec<Flow>,
    /// Counter samples in the order they were recorded.
    pub counters: Vec<CounterSample>,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }
    /// Records a span and returns its id.
    pub fn span(&mut self, span: Span) -> SpanId {
        self.spans.push(span);
        SpanId(self.spans.len() - 1)
    }
    /// Records a flow arrow between two recorded spans.
    pub fn flow(&mut self, from: SpanId, to: SpanId, name: impl Into<String>) {
        self.flows.push(Flow {
            from,
            to,
            name: name.into(),
        });
    }
    /// Records a counter sample.
    pub fn counter(&mut self, process: impl Into<String>, name: impl Into<String>, time: SimTime, value: f64) {
        self.counters.push(CounterSample {
            process: process.into(),
            name: name.into(),
            time,
            value,
        });
    }
    /// Latest span end, or zero when empty.
    pub fn end_time(&self) -> SimTime {
        self.spans.iter().map(|s| s.end).max().unwrap_or(SimTime::ZERO)
    }
}
