//! Perfetto's JSON import rules, as a checker: what a trace must satisfy for Perfetto's importer
//! to take every event where it was meant to go (no slices moved to overflow tracks, no unmatched
//! ends, no flows left unbound). Used by the tests on generated traces; usable on any trace file.
//!
//! Times are read as Perfetto reads them: microseconds times 1000, rounded to whole nanoseconds.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// One rule a trace breaks, with the event that breaks it.
pub type Violation = String;

fn ns(v: &Value) -> Option<i64> {
    v.as_f64()
        .filter(|x| x.is_finite())
        .map(|x| (x * 1000.0).round() as i64)
}

/// (pid, tid) of an event; missing ids read as 0 as Perfetto does.
fn thread_of(e: &Value) -> (i64, i64) {
    (e["pid"].as_i64().unwrap_or(0), e["tid"].as_i64().unwrap_or(0))
}

/// A complete slice on a thread: start and end in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slice {
    /// Start, ns.
    pub start_ns: i64,
    /// End, ns.
    pub end_ns: i64,
}

/// The complete ("X") slices of each (pid, tid), sorted by start (longer first).
pub fn slices_by_thread(events: &[Value]) -> BTreeMap<(i64, i64), Vec<Slice>> {
    let mut out: BTreeMap<(i64, i64), Vec<Slice>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        if let (Some(ts), Some(dur)) = (ns(&e["ts"]), ns(&e["dur"])) {
            out.entry(thread_of(e)).or_default().push(Slice {
                start_ns: ts,
                end_ns: ts + dur,
            });
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)));
    }
    out
}

/// Checks a Chrome trace-event JSON value against Perfetto's import rules:
/// - the trace is an object with a `traceEvents` array (or a bare array) of objects with a `ph`;
/// - every event but metadata has a numeric `ts`; "X" events a numeric `dur` >= 0;
/// - "X" events on one (pid, tid) are strictly nested or disjoint (partial overlaps are what
///   Perfetto moves to overflow tracks);
/// - "B"/"E" events on one thread balance, an "E" never comes without an open "B";
/// - events of one thread ("B"/"E") and samples of one counter appear in time order;
/// - every pid has a `process_name` and every thread with slices or flows a `thread_name`;
/// - counters ("C") have a non-empty `args` object of finite numbers;
/// - flow starts ("s") fall inside a slice of their thread, flow ends ("f") carry `bp: "e"` and
///   fall inside a slice of theirs, every flow id has one start and one end, the end not before
///   the start.
///
/// Returns every violation found (empty: the trace imports cleanly).
pub fn check(trace: &Value) -> Vec<Violation> {
    let mut bad = Vec::new();
    let events: &[Value] = match trace {
        Value::Array(a) => a,
        Value::Object(o) => match o.get("traceEvents").and_then(Value::as_array) {
            Some(a) => a,
            None => return vec!["no traceEvents array".into()],
        },
        _ => return vec!["a trace is an object or an array".into()],
    };
    let mut process_names = BTreeSet::new();
    let mut thread_names = BTreeSet::new();
    let mut used_pids = BTreeSet::new();
    let mut used_threads = BTreeSet::new();
    let mut open: BTreeMap<(i64, i64), Vec<String>> = BTreeMap::new();
    let mut last_thread_ts: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    let mut last_counter_ts: BTreeMap<(i64, String), i64> = BTreeMap::new();
    // Per flow id: (ts in ns, (pid, tid)) of its starts and of its ends.
    type FlowEnds = BTreeMap<String, Vec<(i64, (i64, i64))>>;
    let mut flow_starts = FlowEnds::new();
    let mut flow_ends = FlowEnds::new();
    for (i, e) in events.iter().enumerate() {
        let Some(ph) = e["ph"].as_str() else {
            bad.push(format!("event {i}: no ph"));
            continue;
        };
        let th = thread_of(e);
        if ph == "M" {
            match e["name"].as_str() {
                Some("process_name") if e["args"]["name"].is_string() => {
                    process_names.insert(th.0);
                }
                Some("thread_name") if e["args"]["name"].is_string() => {
                    thread_names.insert(th);
                }
                _ => {}
            }
            continue;
        }
        let Some(ts) = ns(&e["ts"]) else {
            bad.push(format!("event {i} ({ph}): no numeric ts"));
            continue;
        };
        used_pids.insert(th.0);
        match ph {
            "X" => {
                used_threads.insert(th);
                match ns(&e["dur"]) {
                    Some(d) if d >= 0 => {}
                    _ => bad.push(format!("event {i} (X {}): dur missing or negative", e["name"])),
                }
            }
            "B" | "E" => {
                used_threads.insert(th);
                if last_thread_ts.get(&th).is_some_and(|&t| t > ts) {
                    bad.push(format!("event {i} ({ph}): thread {th:?} goes back in time"));
                }
                last_thread_ts.insert(th, ts);
                let stack = open.entry(th).or_default();
                if ph == "B" {
                    stack.push(e["name"].to_string());
                } else if stack.pop().is_none() {
                    bad.push(format!("event {i}: E without an open B on {th:?}"));
                }
            }
            "C" => {
                let name = e["name"].as_str().unwrap_or("").to_string();
                match e["args"].as_object() {
                    Some(a) if !a.is_empty() && a.values().all(|v| v.as_f64().is_some_and(f64::is_finite)) => {}
                    _ => bad.push(format!("event {i} (C {name}): args must be finite numbers")),
                }
                let k = (th.0, name);
                if last_counter_ts.get(&k).is_some_and(|&t| t > ts) {
                    bad.push(format!("event {i}: counter {:?} goes back in time", k.1));
                }
                last_counter_ts.insert(k, ts);
            }
            "s" | "f" | "t" => {
                used_threads.insert(th);
                let id = e["id"].to_string();
                if ph == "f" && e["bp"] != "e" {
                    bad.push(format!(
                        "event {i}: flow end {id} without bp \"e\" binds to the next slice"
                    ));
                }
                let map = if ph == "s" { &mut flow_starts } else { &mut flow_ends };
                if ph != "t" {
                    map.entry(id).or_default().push((ts, th));
                }
            }
            _ => {}
        }
    }
    for (th, stack) in &open {
        if !stack.is_empty() {
            bad.push(format!("{} B events left open on {th:?}", stack.len()));
        }
    }
    for pid in used_pids.difference(&process_names) {
        bad.push(format!("pid {pid} has no process_name"));
    }
    for th in used_threads.difference(&thread_names) {
        bad.push(format!("thread {th:?} has no thread_name"));
    }
    let slices = slices_by_thread(events);
    for (th, v) in &slices {
        let mut stack: Vec<Slice> = Vec::new();
        for s in v {
            while stack.last().is_some_and(|t| t.end_ns <= s.start_ns) {
                stack.pop();
            }
            if let Some(t) = stack.last() {
                if s.end_ns > t.end_ns {
                    bad.push(format!(
                        "thread {th:?}: slice [{}, {}] ns overlaps [{}, {}] ns partially",
                        s.start_ns, s.end_ns, t.start_ns, t.end_ns
                    ));
                    continue;
                }
            }
            stack.push(*s);
        }
    }
    let inside = |th: &(i64, i64), ts: i64| {
        slices
            .get(th)
            .is_some_and(|v| v.iter().any(|s| s.start_ns <= ts && ts < s.end_ns))
    };
    for (id, starts) in &flow_starts {
        let ends = flow_ends.get(id).map_or(&[][..], |v| v.as_slice());
        if starts.len() != 1 || ends.len() != 1 {
            bad.push(format!("flow {id}: {} starts and {} ends", starts.len(), ends.len()));
            continue;
        }
        let ((ts, th), (tf, thf)) = (starts[0], ends[0]);
        if !inside(&th, ts) {
            bad.push(format!("flow {id}: start at {ts} ns is inside no slice of {th:?}"));
        }
        if !inside(&thf, tf) {
            bad.push(format!("flow {id}: end at {tf} ns is inside no slice of {thf:?}"));
        }
        if tf < ts {
            bad.push(format!("flow {id}: ends at {tf} ns before it starts at {ts} ns"));
        }
    }
    for id in flow_ends.keys().filter(|k| !flow_starts.contains_key(*k)) {
        bad.push(format!("flow {id}: an end without a start"));
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn named(mut ev: Vec<Value>) -> Value {
        ev.insert(
            0,
            json!({"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}}),
        );
        ev.insert(
            1,
            json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t"}}),
        );
        json!({ "traceEvents": ev })
    }

    #[test]
    fn nested_and_disjoint_pass_partial_overlap_fails() {
        let ok = named(vec![
            json!({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0}),
            json!({"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 2.0, "dur": 8.0}),
            json!({"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": 10.0, "dur": 1.0}),
        ]);
        assert_eq!(check(&ok), Vec::<String>::new());
        let overlap = named(vec![
            json!({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0}),
            json!({"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5.0, "dur": 10.0}),
        ]);
        assert_eq!(
            check(&overlap),
            vec!["thread (1, 1): slice [5000, 15000] ns overlaps [0, 10000] ns partially".to_string()]
        );
    }

    #[test]
    fn unbalanced_unnamed_unbound_and_bad_counters_fail() {
        let t = named(vec![
            json!({"ph": "E", "name": "x", "pid": 1, "tid": 1, "ts": 1.0}),
            json!({"ph": "B", "name": "y", "pid": 1, "tid": 1, "ts": 2.0}),
            json!({"ph": "X", "name": "z", "pid": 2, "tid": 3, "ts": 0.0, "dur": 1.0}),
            json!({"ph": "C", "name": "c", "pid": 1, "tid": 0, "ts": 3.0, "args": {"value": "high"}}),
            json!({"ph": "s", "name": "f", "id": 7, "pid": 1, "tid": 1, "ts": 5.0}),
            json!({"ph": "f", "name": "f", "id": 7, "pid": 1, "tid": 1, "ts": 4.0}),
        ]);
        let v = check(&t);
        let want = [
            "event 2: E without an open B on (1, 1)",
            "event 5 (C c): args must be finite numbers",
            "event 7: flow end 7 without bp \"e\" binds to the next slice",
            "1 B events left open on (1, 1)",
            "pid 2 has no process_name",
            "thread (2, 3) has no thread_name",
            "flow 7: start at 5000 ns is inside no slice of (1, 1)",
            "flow 7: end at 4000 ns is inside no slice of (1, 1)",
            "flow 7: ends at 4000 ns before it starts at 5000 ns",
        ];
        assert_eq!(v, want.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    }
}
