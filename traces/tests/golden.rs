//! Golden trace of a tiny hand-built recorder: every event kind, exact decimal times, escaping, natural chip order.

use sim_core::recorder::{ArgValue, Recorder, Span, SpanId, Track};
use sim_core::time::SimTime;

fn tiny() -> Recorder {
    let mut rec = Recorder::new();
    let mxu = Track {
        process: "chip 0".into(),
        thread: "TC MXU".into(),
    };
    let dma = Track {
        process: "chip 0".into(),
        thread: "TC DMA".into(),
    };
    let host = Track {
        process: "host".into(),
        thread: "PCIe".into(),
    };
    let a = rec.span(Span {
        track: host,
        name: "h2d \"ids\"".into(),
        category: "pcie".into(),
        start: SimTime(0),
        end: SimTime(1_500_000),
        args: vec![
            ("bytes".into(), ArgValue::Int(4096)),
            ("ratio".into(), ArgValue::Float(1.25)),
        ],
        tag: None,
    });
    let b = rec.span(Span {
        track: dma,
        name: "DMA in".into(),
        category: "dma".into(),
        start: SimTime(1_500_000),
        end: SimTime(2_000_007),
        args: vec![
            ("padded_bytes".into(), ArgValue::Int(8192)),
            ("buffer".into(), ArgValue::Text("x".into())),
        ],
        tag: None,
    });
    rec.span(Span {
        track: mxu,
        name: "matmul".into(),
        category: "tc".into(),
        start: SimTime(2_000_007),
        end: SimTime(3_000_000),
        args: vec![("cycles".into(), ArgValue::Int(940))],
        tag: None,
    });
    rec.flow(a, b, "ids ready");
    rec.flow(SpanId(0), SpanId(99), "dangling: skipped");
    rec.counter("chip 0", "HBM GB/s", SimTime(1_500_000), 16.384);
    // "chip 10" must come after "chip 2" (natural order), and a counter-only process still gets a name.
    rec.span(Span {
        track: Track {
            process: "chip 10".into(),
            thread: "ICI".into(),
        },
        name: "all-to-all".into(),
        category: "ici".into(),
        start: SimTime(2_000_000),
        end: SimTime(2_000_000),
        args: vec![],
        tag: None,
    });
    rec.counter("chip 2", "HBM bytes in use", SimTime(0), 1024.0);
    rec
}

#[test]
fn tiny_recorder_matches_golden_json() {
    let got = traces::to_chrome_trace_string(&tiny());
    let path = format!("{}/tests/data/tiny.json", env!("CARGO_MANIFEST_DIR"));
    // Regenerate after an intended format change with `UPDATE_GOLDEN=1 cargo test -p traces`, then review the diff.
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(got, want);
    let v: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(traces::rules::check(&v), Vec::<String>::new());
}
