//! traces: Chrome trace-event JSON (opens in Perfetto, chrome://tracing and speedscope) from recorded
//! spans, flows and counters. One process per chip (plus the host), one thread per unit, complete
//! ("X") events with the span's numbers as args, counter ("C") tracks, and flow arrows ("s"/"f").
//!
//! Timestamps are microseconds printed exactly from integer picoseconds, so the same recording
//! always gives the same bytes.
//!
//! Architecture invariant: traces never runs a simulation; it only formats what was recorded.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::{json, Value};
use sim_core::recorder::{ArgValue, Recorder, Track};

/// Microseconds with six decimals from integer picoseconds ("1234567" ps -> "1.234567").
pub fn us_from_ps(ps: u64) -> String {
    format!("{}.{:06}", ps / 1_000_000, ps % 1_000_000)
}

/// Text and number chunks of a name, so processes sort naturally ("chip 2" before "chip 10").
type NaturalKey = Vec<(String, u128)>;

fn natural_key(s: &str) -> NaturalKey {
    let mut out = Vec::new();
    let (mut text, mut num) = (String::new(), None::<u128>);
    for ch in s.chars() {
        match ch.to_digit(10) {
            Some(d) => num = Some(num.unwrap_or(0).saturating_mul(10).saturating_add(u128::from(d))),
            None => {
                if let Some(n) = num.take() {
                    out.push((std::mem::take(&mut text), n));
                }
                text.push(ch);
            }
        }
    }
    out.push((text, num.unwrap_or(0)));
    out
}

fn arg_json(v: &ArgValue) -> Value {
    match v {
        ArgValue::Int(i) => json!(i),
        ArgValue::Float(f) => json!(f),
        ArgValue::Text(t) => json!(t),
    }
}

/// Writes the recording as Chrome trace-event JSON.
pub fn write_chrome_trace<W: Write>(rec: &Recorder, mut w: W) -> io::Result<()> {
    // Deterministic ids: processes sorted with the host first, threads sorted within a process.
    let mut procs: BTreeMap<(u8, NaturalKey, String), BTreeMap<String, u32>> = BTreeMap::new();
    let key = |p: &str| (if p == "host" { 0u8 } else { 1 }, natural_key(p), p.to_string());
    for s in &rec.spans {
        procs
            .entry(key(&s.track.process))
            .or_default()
            .insert(s.track.thread.clone(), 0);
    }
    for c in &rec.counters {
        procs.entry(key(&c.process)).or_default();
    }
    let mut pid_of = BTreeMap::new();
    let mut tid_of: BTreeMap<Track, (u32, u32)> = BTreeMap::new();
    let mut events: Vec<String> = Vec::new();
    for (pi, ((_, _, p), threads)) in procs.iter().enumerate() {
        let pid = pi as u32 + 1;
        pid_of.insert(p.clone(), pid);
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": p}}).to_string());
        events.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
                .to_string(),
        );
        for (ti, t) in threads.keys().enumerate() {
            let tid = ti as u32 + 1;
            tid_of.insert(
                Track {
                    process: p.clone(),
                    thread: t.clone(),
                },
                (pid, tid),
            );
            events.push(
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": t}}).to_string(),
            );
            events.push(
                json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
                    .to_string(),
            );
        }
    }
    for s in &rec.spans {
        let (pid, tid) = tid_of[&s.track];
        let args: serde_json::Map<String, Value> = s.args.iter().map(|(k, v)| (k.clone(), arg_json(v))).collect();
        let head =
            json!({"ph": "X", "name": s.name, "cat": s.category, "pid": pid, "tid": tid, "args": args}).to_string();
        // ts and dur are spliced in as exact decimals.
        events.push(format!(
            "{},\"ts\":{},\"dur\":{}}}",
            &head[..head.len() - 1],
            us_from_ps(s.start.0),
            us_from_ps(s.end.0.saturating_sub(s.start.0))
        ));
    }
    for c in &rec.counters {
        let pid = pid_of[&c.process];
        let head = json!({"ph": "C", "name": c.name, "pid": pid, "tid": 0, "args": {"value": c.value}}).to_string();
        events.push(format!("{},\"ts\":{}}}", &head[..head.len() - 1], us_from_ps(c.time.0)));
    }
    for (i, f) in rec.flows.iter().enumerate() {
        let (Some(a), Some(b)) = (rec.spans.get(f.from.0), rec.spans.get(f.to.0)) else {
            continue;
        };
        let (pa, ta) = tid_of[&a.track];
        let (pb, tb) = tid_of[&b.track];
        let id = i + 1;
        let s = json!({"ph": "s", "name": f.name, "cat": "flow", "id": id, "pid": pa, "tid": ta}).to_string();
        events.push(format!(
            "{},\"ts\":{}}}",
            &s[..s.len() - 1],
            us_from_ps(a.end.0.saturating_sub(1).max(a.start.0))
        ));
        let e =
            json!({"ph": "f", "bp": "e", "name": f.name, "cat": "flow", "id": id, "pid": pb, "tid": tb}).to_string();
        events.push(format!("{},\"ts\":{}}}", &e[..e.len() - 1], us_from_ps(b.start.0)));
    }
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            w.write_all(b",\n")?;
        }
        w.write_all(e.as_bytes())?;
    }
    w.write_all(b"\n]}\n")?;
    Ok(())
}

/// The trace as a string.
pub fn to_chrome_trace_string(rec: &Recorder) -> String {
    let mut v = Vec::new();
    write_chrome_trace(rec, &mut v).expect("writing to memory");
    String::from_utf8(v).expect("JSON is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim_core::recorder::Span;
    use sim_core::time::SimTime;

    fn sample() -> Recorder {
        let mut r = Recorder::new();
        let t = |p: &str, th: &str| Track {
            process: p.into(),
            thread: th.into(),
        };
        let a = r.span(Span {
            track: t("chip 0", "SC 0"),
            name: "SC bwd step 0".into(),
            category: "sc_bwd".into(),
            start: SimTime(1_000_000),
            end: SimTime(3_500_001),
            args: vec![("step".into(), ArgValue::Int(0))],
        });
        let b = r.span(Span {
            track: t("chip 0", "SC 0"),
            name: "SC fwd step 2".into(),
            category: "sc_fwd".into(),
            start: SimTime(4_000_000),
            end: SimTime(5_000_000),
            args: vec![],
        });
        r.span(Span {
            track: t("host", "preprocess"),
            name: "pre".into(),
            category: "host".into(),
            start: SimTime(0),
            end: SimTime(999),
            args: vec![],
        });
        r.flow(a, b, "stale gradients");
        r.counter("chip 0", "HBM GB/s", SimTime(1_000_000), 2.5);
        r
    }

    #[test]
    fn exact_times_processes_and_flows() {
        let text = to_chrome_trace_string(&sample());
        let v: Value = serde_json::from_str(&text).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        let x: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 3);
        assert!(text.contains("\"ts\":1.000000,\"dur\":2.500001"), "{text}");
        assert!(text.contains("\"ts\":0.000000,\"dur\":0.000999"));
        // The host is process 1.
        let host = ev
            .iter()
            .find(|e| e["name"] == "process_name" && e["args"]["name"] == "host")
            .unwrap();
        assert_eq!(host["pid"], 1);
        assert_eq!(ev.iter().filter(|e| e["ph"] == "s" || e["ph"] == "f").count(), 2);
        assert_eq!(ev.iter().filter(|e| e["ph"] == "C").count(), 1);
        assert_eq!(to_chrome_trace_string(&sample()), text);
        assert_eq!(us_from_ps(1_234_567), "1.234567");
    }
}
