//! traces: Chrome trace-event JSON (opens in Perfetto, chrome://tracing and speedscope) from recorded
//! spans, flows and counters. One process per chip (plus the host), one thread per unit, complete
//! ("X") events with the span's numbers as args, counter ("C") tracks, and flow arrows ("s"/"f").
//!
//! Timestamps are microseconds printed exactly from integer picoseconds, so the same recording
//! always gives the same bytes.
//!
//! Architecture invariant: traces never runs a simulation; it only formats what was recorded.

pub mod rules;

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

/// Whole nanoseconds from picoseconds (floor), the resolution Perfetto keeps.
fn ns_from_ps(ps: u64) -> u64 {
    ps / 1000
}

/// Microseconds with three decimals from whole nanoseconds ("1234" ns -> "1.234"): exact in
/// decimal, and read back as the same nanosecond by Perfetto's importer (it rounds ts * 1000).
pub fn us_from_ns(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// Where a thread goes within its process: host work, host link, TensorCore, SparseCores, memory,
/// links, the rest; read from its spans' tags (the lowest rank any of them has), untagged last.
fn thread_ranks(rec: &Recorder) -> BTreeMap<(&str, &str), u8> {
    let mut ranks: BTreeMap<(&str, &str), u8> = BTreeMap::new();
    for s in &rec.spans {
        let r = s.tag.map_or(6, |t| t.unit.rank());
        let e = ranks
            .entry((s.track.process.as_str(), s.track.thread.as_str()))
            .or_insert(r);
        *e = (*e).min(r);
    }
    ranks
}

/// The thread a lane of a track is drawn on: lane 0 keeps the unit's name.
pub fn lane_thread_name(thread: &str, lane: usize) -> String {
    if lane == 0 {
        thread.to_string()
    } else {
        format!("{thread} lane {}", lane + 1)
    }
}

/// One span after quantisation: nanosecond start and end, and the lane of its track.
#[derive(Clone, Copy)]
struct Placed {
    start_ns: u64,
    end_ns: u64,
    lane: usize,
}

/// Puts every span of a track on a lane so that spans sharing a lane never overlap: a span goes on
/// the first lane whose last span ended at or before it starts, visiting spans by (start, longer
/// first, recording order). A unit that runs one thing at a time keeps one lane; a bandwidth
/// resource gets one lane per transfer in flight. Deterministic: a function of the spans only.
fn place_spans(rec: &Recorder) -> Vec<Placed> {
    let mut placed: Vec<Placed> = rec
        .spans
        .iter()
        .map(|s| Placed {
            start_ns: ns_from_ps(s.start.0),
            end_ns: ns_from_ps(s.end.0.max(s.start.0)),
            lane: 0,
        })
        .collect();
    let mut by_track: BTreeMap<&Track, Vec<usize>> = BTreeMap::new();
    for (i, s) in rec.spans.iter().enumerate() {
        by_track.entry(&s.track).or_default().push(i);
    }
    for idx in by_track.values_mut() {
        idx.sort_by_key(|&i| (placed[i].start_ns, std::cmp::Reverse(placed[i].end_ns), i));
        // End of the last span on each lane.
        let mut lane_end: Vec<u64> = Vec::new();
        for &i in idx.iter() {
            let p = placed[i];
            let lane = match lane_end.iter().position(|&e| e <= p.start_ns) {
                Some(l) => l,
                None => {
                    lane_end.push(0);
                    lane_end.len() - 1
                }
            };
            lane_end[lane] = p.end_ns;
            placed[i].lane = lane;
        }
    }
    placed
}

/// A timed event and how it sorts among events at the same instant: slices first (longer first),
/// then counters, flow starts and flow ends, each in the order made.
struct Timed {
    ts_ns: u64,
    rank: u8,
    neg_dur: std::cmp::Reverse<u64>,
    text: String,
}

/// Writes the recording as Chrome trace-event JSON that Perfetto imports without complaint:
/// - one process per chip (named by its real index) and the host, one thread per unit; spans
///   that overlap on a unit (concurrent transfers on HBM, ICI or PCIe) go on lanes, threads named
///   "HBM", "HBM lane 2", ..., so complete ("X") events on a thread never overlap;
/// - times in whole nanoseconds (floor of the recorded picoseconds, so nesting and order are kept);
/// - flows ("s"/"f") bound inside their slices (the start 1 ns before the source ends, the end
///   with `bp: "e"` inside the destination), skipped when either slice lasts less than 2 ns;
/// - counters ("C") with one sample per instant (the last recorded) and repeated values dropped;
/// - events after the metadata sorted by time.
pub fn write_chrome_trace<W: Write>(rec: &Recorder, mut w: W) -> io::Result<()> {
    let placed = place_spans(rec);
    // Deterministic ids: processes sorted with the host first, threads sorted within a process.
    type ThreadKey = (u8, NaturalKey, String, usize);
    let mut procs: BTreeMap<(u8, NaturalKey, String), BTreeMap<ThreadKey, u32>> = BTreeMap::new();
    let key = |p: &str| (if p == "host" { 0u8 } else { 1 }, natural_key(p), p.to_string());
    let ranks = thread_ranks(rec);
    for (s, p) in rec.spans.iter().zip(&placed) {
        let t = &s.track.thread;
        let rank = ranks[&(s.track.process.as_str(), t.as_str())];
        procs
            .entry(key(&s.track.process))
            .or_default()
            .insert((rank, natural_key(t), t.clone(), p.lane), 0);
    }
    for c in &rec.counters {
        procs.entry(key(&c.process)).or_default();
    }
    let mut pid_of = BTreeMap::new();
    let mut tid_of: BTreeMap<(&str, &str, usize), (u32, u32)> = BTreeMap::new();
    let mut meta: Vec<String> = Vec::new();
    for (pi, ((_, _, p), threads)) in procs.iter().enumerate() {
        let pid = pi as u32 + 1;
        pid_of.insert(p.as_str(), pid);
        meta.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": p}}).to_string());
        meta.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
                .to_string(),
        );
        for (ti, (_, _, t, lane)) in threads.keys().enumerate() {
            let tid = ti as u32 + 1;
            tid_of.insert((p.as_str(), t.as_str(), *lane), (pid, tid));
            let name = lane_thread_name(t, *lane);
            meta.push(
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}).to_string(),
            );
            meta.push(
                json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
                    .to_string(),
            );
        }
    }
    let ids = |i: usize| {
        tid_of[&(
            rec.spans[i].track.process.as_str(),
            rec.spans[i].track.thread.as_str(),
            placed[i].lane,
        )]
    };
    let mut timed: Vec<Timed> = Vec::new();
    for (i, s) in rec.spans.iter().enumerate() {
        let (pid, tid) = ids(i);
        let p = placed[i];
        let args: serde_json::Map<String, Value> = s.args.iter().map(|(k, v)| (k.clone(), arg_json(v))).collect();
        let head =
            json!({"ph": "X", "name": s.name, "cat": s.category, "pid": pid, "tid": tid, "args": args}).to_string();
        // ts and dur are spliced in as exact decimals.
        timed.push(Timed {
            ts_ns: p.start_ns,
            rank: 0,
            neg_dur: std::cmp::Reverse(p.end_ns - p.start_ns),
            text: format!(
                "{},\"ts\":{},\"dur\":{}}}",
                &head[..head.len() - 1],
                us_from_ns(p.start_ns),
                us_from_ns(p.end_ns - p.start_ns)
            ),
        });
    }
    // Counters: the last sample at each instant, and only when the value changes.
    let mut last: BTreeMap<(&str, &str), (u64, f64)> = BTreeMap::new();
    let mut samples: Vec<(&str, &str, u64, f64)> = Vec::new();
    for c in rec.counters.iter().filter(|c| c.value.is_finite()) {
        let t = ns_from_ps(c.time.0);
        samples.push((c.process.as_str(), c.name.as_str(), t, c.value));
    }
    // Stable by time within each counter: the recorder appends in time order per counter already.
    samples.sort_by_key(|&(p, n, t, _)| (p, n, t));
    let mut kept: Vec<(&str, &str, u64, f64)> = Vec::new();
    for (i, &(p, n, t, v)) in samples.iter().enumerate() {
        let next_same_instant = samples
            .get(i + 1)
            .is_some_and(|&(p2, n2, t2, _)| (p2, n2, t2) == (p, n, t));
        if next_same_instant {
            continue;
        }
        if last.get(&(p, n)).is_some_and(|&(_, lv)| lv == v) {
            continue;
        }
        last.insert((p, n), (t, v));
        kept.push((p, n, t, v));
    }
    for (p, n, t, v) in kept {
        let pid = pid_of[p];
        let head = json!({"ph": "C", "name": n, "pid": pid, "tid": 0, "args": {"value": v}}).to_string();
        timed.push(Timed {
            ts_ns: t,
            rank: 1,
            neg_dur: std::cmp::Reverse(0),
            text: format!("{},\"ts\":{}}}", &head[..head.len() - 1], us_from_ns(t)),
        });
    }
    let mut flow_id = 0u64;
    for f in &rec.flows {
        if f.from.0 >= rec.spans.len() || f.to.0 >= rec.spans.len() {
            continue;
        }
        let (a, b) = (placed[f.from.0], placed[f.to.0]);
        // Both ends strictly inside their slices, so the importer binds them there.
        if a.end_ns < a.start_ns + 2 || b.end_ns < b.start_ns + 2 {
            continue;
        }
        flow_id += 1;
        let (pa, ta) = ids(f.from.0);
        let (pb, tb) = ids(f.to.0);
        let s_ts = a.end_ns - 1;
        let f_ts = b.start_ns + 1;
        let s = json!({"ph": "s", "name": f.name, "cat": "flow", "id": flow_id, "pid": pa, "tid": ta}).to_string();
        timed.push(Timed {
            ts_ns: s_ts,
            rank: 2,
            neg_dur: std::cmp::Reverse(0),
            text: format!("{},\"ts\":{}}}", &s[..s.len() - 1], us_from_ns(s_ts)),
        });
        let e = json!({"ph": "f", "bp": "e", "name": f.name, "cat": "flow", "id": flow_id, "pid": pb, "tid": tb})
            .to_string();
        timed.push(Timed {
            ts_ns: f_ts,
            rank: 3,
            neg_dur: std::cmp::Reverse(0),
            text: format!("{},\"ts\":{}}}", &e[..e.len() - 1], us_from_ns(f_ts)),
        });
    }
    timed.sort_by_key(|e| (e.ts_ns, e.rank, e.neg_dur));
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    for (i, e) in meta.iter().chain(timed.iter().map(|t| &t.text)).enumerate() {
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
            tag: None,
        });
        let b = r.span(Span {
            track: t("chip 0", "SC 0"),
            name: "SC fwd step 2".into(),
            category: "sc_fwd".into(),
            start: SimTime(4_000_000),
            end: SimTime(5_000_000),
            args: vec![],
            tag: None,
        });
        r.span(Span {
            track: t("host", "preprocess"),
            name: "pre".into(),
            category: "host".into(),
            start: SimTime(0),
            end: SimTime(999),
            args: vec![],
            tag: None,
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
        // Whole nanoseconds, floored: 1_000_000..3_500_001 ps -> 1000..3500 ns.
        assert!(text.contains("\"ts\":1.000,\"dur\":2.500"), "{text}");
        assert!(text.contains("\"ts\":0.000,\"dur\":0.000"));
        // The host is process 1.
        let host = ev
            .iter()
            .find(|e| e["name"] == "process_name" && e["args"]["name"] == "host")
            .unwrap();
        assert_eq!(host["pid"], 1);
        // The flow starts 1 ns before its source ends and ends 1 ns into its destination.
        assert!(text.contains("\"id\":1,\"pid\":2,\"tid\":1,\"ts\":3.499}"), "{text}");
        assert!(text.contains("\"id\":1,\"pid\":2,\"tid\":1,\"ts\":4.001}"), "{text}");
        assert_eq!(ev.iter().filter(|e| e["ph"] == "C").count(), 1);
        assert_eq!(to_chrome_trace_string(&sample()), text);
        assert_eq!(rules::check(&v), Vec::<String>::new());
        assert_eq!(us_from_ps(1_234_567), "1.234567");
        assert_eq!(us_from_ns(1_234), "1.234");
    }

    fn transfer(r: &mut Recorder, start_ns: u64, end_ns: u64) -> sim_core::recorder::SpanId {
        r.span(Span {
            track: Track {
                process: "chip 3".into(),
                thread: "HBM".into(),
            },
            name: format!("x {start_ns}"),
            category: "dma".into(),
            start: SimTime(start_ns * 1000),
            end: SimTime(end_ns * 1000),
            args: vec![],
            tag: None,
        })
    }

    #[test]
    fn concurrent_transfers_go_on_lanes_and_counters_are_deduplicated() {
        let mut r = Recorder::new();
        // Three transfers: the second overlaps the first partially, the third starts when the first ends.
        transfer(&mut r, 0, 10);
        transfer(&mut r, 5, 20);
        transfer(&mut r, 10, 12);
        r.counter("chip 3", "HBM GB/s", SimTime(0), 1.0);
        r.counter("chip 3", "HBM GB/s", SimTime(0), 2.0);
        r.counter("chip 3", "HBM GB/s", SimTime(5_000), 2.0);
        r.counter("chip 3", "HBM GB/s", SimTime(10_000), 0.0);
        let text = to_chrome_trace_string(&r);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(rules::check(&v), Vec::<String>::new());
        let ev = v["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["HBM", "HBM lane 2"]);
        let tid = |n: &str| ev.iter().find(|e| e["name"] == n).unwrap()["tid"].as_i64().unwrap();
        assert_eq!((tid("x 0"), tid("x 5"), tid("x 10")), (1, 2, 1));
        // One sample per instant (the last), none repeating the value before it.
        let c: Vec<f64> = ev
            .iter()
            .filter(|e| e["ph"] == "C")
            .map(|e| e["args"]["value"].as_f64().unwrap())
            .collect();
        assert_eq!(c, [2.0, 0.0]);
    }
}
