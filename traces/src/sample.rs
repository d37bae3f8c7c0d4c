//! A small hand-built recorder (a host and two chips: DMA, MXU, VPU, SparseCore and ICI units, a stale-gradient
//! flow, HBM counters). Used by the `hand_built` example and the golden test until `tpusim run --trace` exists.

use sim_core::recorder::{ArgValue, Recorder, Span, Track};
use sim_core::time::SimTime;

fn span(rec: &mut Recorder, process: &str, thread: &str, name: &str, cat: &str, start_ps: u64, end_ps: u64) -> usize {
    let track = Track {
        process: process.into(),
        thread: thread.into(),
    };
    let args = vec![
        (
            "bytes".to_string(),
            ArgValue::Int(((end_ps - start_ps) / 1000) as i64 * 64),
        ),
        (
            "padded_bytes".to_string(),
            ArgValue::Int(((end_ps - start_ps) / 1000) as i64 * 80),
        ),
        ("cycles".to_string(), ArgValue::Int(((end_ps - start_ps) / 1000) as i64)),
    ];
    let s = Span {
        track,
        name: name.into(),
        category: cat.into(),
        start: SimTime(start_ps),
        end: SimTime(end_ps),
        args,
    };
    rec.span(s).0
}

/// Builds the sample recorder: two pipelined steps on two chips fed by the host.
pub fn sample_recorder() -> Recorder {
    let mut rec = Recorder::new();
    let step_ps = 40_000_000;
    let mut sc_bwd = Vec::new();
    let mut sc_fwd = Vec::new();
    for step in 0..3u64 {
        let t0 = step * step_ps;
        span(
            &mut rec,
            "host",
            "preprocess",
            &format!("preprocess step {step}"),
            "host",
            t0,
            t0 + 9_500_000,
        );
        span(
            &mut rec,
            "host",
            "PCIe",
            &format!("h2d step {step}"),
            "pcie",
            t0 + 9_500_000,
            t0 + 12_250_000,
        );
        for chip in ["chip 0", "chip 1"] {
            let f = span(
                &mut rec,
                chip,
                "SC0 sequencer",
                &format!("SC fwd step {step}"),
                "sc_fwd",
                t0 + 12_250_000,
                t0 + 20_000_000,
            );
            span(
                &mut rec,
                chip,
                "ICI",
                &format!("all-to-all step {step}"),
                "ici",
                t0 + 20_000_000,
                t0 + 22_500_001,
            );
            span(
                &mut rec,
                chip,
                "TC DMA",
                &format!("DMA in step {step}"),
                "dma",
                t0 + 22_500_001,
                t0 + 25_000_000,
            );
            span(
                &mut rec,
                chip,
                "TC MXU",
                &format!("TC fwd+bwd step {step}"),
                "tc",
                t0 + 25_000_000,
                t0 + 33_000_000,
            );
            span(
                &mut rec,
                chip,
                "TC VPU",
                &format!("relu step {step}"),
                "tc",
                t0 + 26_000_000,
                t0 + 27_333_333,
            );
            let b = span(
                &mut rec,
                chip,
                "SC0 sequencer",
                &format!("SC bwd step {step}"),
                "sc_bwd",
                t0 + 33_000_000,
                t0 + 39_000_000,
            );
            if chip == "chip 0" {
                sc_fwd.push(f);
                sc_bwd.push(b);
            }
            rec.counter(chip, "HBM GB/s", SimTime(t0 + 22_500_001), 812.5);
            rec.counter(chip, "HBM GB/s", SimTime(t0 + 25_000_000), 0.0);
        }
    }
    // Pipelined mode: SC forward of step i+2 uses gradients of step i.
    let (from, to) = (
        sim_core::recorder::SpanId(sc_bwd[0]),
        sim_core::recorder::SpanId(sc_fwd[2]),
    );
    rec.flow(from, to, "stale gradients (step 0 -> 2)");
    rec
}
