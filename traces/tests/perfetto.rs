//! Traces of real runs satisfy Perfetto's JSON import rules ([`traces::rules::check`]), name the
//! simulated chip by its real index, show per-tile SparseCore threads, and agree with the run's
//! summary: busy time per unit added up from the trace over the measured window is the summary's
//! busy fraction, and the HBM and ICI bandwidth counters integrate to its utilisation.

use std::collections::BTreeMap;

use serde_json::Value;
use workloads::{simulate, Pipelining, RunOptions, RunResult, Workload};

fn run(preset: &str, pipelining: Option<Pipelining>) -> (RunResult, String) {
    let mut w = Workload::preset(preset).unwrap();
    if let Some(p) = pipelining {
        w.pipelining = p;
    }
    let opts = RunOptions {
        record: true,
        ..Default::default()
    };
    let r = simulate(&w, &opts).unwrap();
    let text = traces::to_chrome_trace_string(&r.recorder);
    (r, text)
}

/// Whole nanoseconds as Perfetto reads them.
fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

/// Total length of the union of intervals, clipped to the window.
fn union_ns(mut v: Vec<(i64, i64)>, w: (i64, i64)) -> i64 {
    v.iter_mut().for_each(|x| *x = (x.0.max(w.0), x.1.min(w.1)));
    v.retain(|x| x.1 > x.0);
    v.sort_unstable();
    let (mut total, mut cur) = (0, None::<(i64, i64)>);
    for (a, b) in v {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            _ => {
                total += cur.map_or(0, |(s, e)| e - s);
                cur = Some((a, b));
            }
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

struct Trace {
    events: Vec<Value>,
    process: BTreeMap<i64, String>,
    thread: BTreeMap<(i64, i64), String>,
}

impl Trace {
    fn parse(text: &str) -> Self {
        let v: Value = serde_json::from_str(text).unwrap();
        let events = v["traceEvents"].as_array().unwrap().clone();
        let mut process = BTreeMap::new();
        let mut thread = BTreeMap::new();
        for e in events.iter().filter(|e| e["ph"] == "M") {
            let (pid, tid) = (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
            let name = e["args"]["name"].as_str().unwrap_or("").to_string();
            match e["name"].as_str() {
                Some("process_name") => {
                    process.insert(pid, name);
                }
                Some("thread_name") => {
                    thread.insert((pid, tid), name);
                }
                _ => {}
            }
        }
        Trace {
            events,
            process,
            thread,
        }
    }

    fn slices<'a>(&'a self, pred: impl Fn(&str, &str) -> bool + 'a) -> impl Iterator<Item = &'a Value> + 'a {
        self.events.iter().filter(move |e| {
            e["ph"] == "X" && {
                let (pid, tid) = (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
                pred(&self.process[&pid], &self.thread[&(pid, tid)])
            }
        })
    }

    fn busy(&self, w: (i64, i64), pred: impl Fn(&str, &str) -> bool) -> f64 {
        let v = self
            .slices(pred)
            .map(|e| (ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"])))
            .collect();
        union_ns(v, w) as f64 / (w.1 - w.0) as f64
    }

    /// Bytes a "<unit> GB/s" counter says moved inside the window, over what `bytes_per_s` moves.
    fn utilisation(&self, w: (i64, i64), counter: &str, bytes_per_s: f64) -> f64 {
        let c: Vec<(i64, f64)> = self
            .events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == counter)
            .map(|e| (ns(&e["ts"]), e["args"]["value"].as_f64().unwrap()))
            .collect();
        let mut bytes = 0.0;
        for (i, &(t, gb)) in c.iter().enumerate() {
            let until = c.get(i + 1).map_or(w.1, |x| x.0);
            bytes += gb * (until.min(w.1) - t.max(w.0)).max(0) as f64;
        }
        bytes / (bytes_per_s / 1e9 * (w.1 - w.0) as f64)
    }
}

fn check_preset(preset: &str, pipelining: Option<Pipelining>) {
    let label = format!("{preset} {pipelining:?}");
    let (r, text) = run(preset, pipelining);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(traces::rules::check(&v), Vec::<String>::new(), "{label}");
    // Deterministic: the same run gives the same bytes.
    assert_eq!(run(preset, pipelining).1, text, "{label}");
    let t = Trace::parse(&text);

    // The simulated chip is named by its real index, the one the straggler sentence names.
    let chips: Vec<&String> = t.process.values().filter(|p| p.starts_with("chip ")).collect();
    assert_eq!(chips.len(), 1, "{label}: {chips:?}");
    let chip = chips[0].clone();
    assert!(
        r.straggler.contains(&format!("of {chip}")),
        "{label}: trace has {chip}, run says {}",
        r.straggler
    );
    // Per-tile SparseCore threads under each SparseCore.
    let threads: Vec<&String> = t.thread.values().collect();
    assert!(threads.iter().any(|n| *n == "SC 0 tile 0"), "{label}: {threads:?}");
    assert!(threads.iter().any(|n| *n == "SC 0 tile 15"), "{label}");
    // Bandwidth counters for HBM, ICI and PCIe.
    for c in ["HBM GB/s", "ICI x+ GB/s", "PCIe GB/s"] {
        assert!(
            t.events.iter().any(|e| e["ph"] == "C" && e["name"] == c),
            "{label}: no {c} counter"
        );
    }
    // Pipelined runs carry the staleness flows (step i -> i+2), bound inside the SparseCore slices.
    let w = Workload::preset(preset).unwrap();
    let flows = t.events.iter().filter(|e| e["ph"] == "s").count();
    let pipelined = pipelining.unwrap_or(w.pipelining) == Pipelining::Pipelined;
    // Every simulated step: warm-up, the steps asked for and drain.
    let simulated = (r.summary.warmup_steps + w.steps as u64 + r.summary.drain_steps) as usize;
    assert_eq!(flows, if pipelined { simulated - 2 } else { 0 }, "{label}");

    // The summary's figures, added up from the trace over the window it was measured in.
    let win = t
        .slices(|_, th| th == "measured window")
        .next()
        .expect("window span")
        .clone();
    let w = (ns(&win["ts"]), ns(&win["ts"]) + ns(&win["dur"]));
    let b = &r.summary.busy_fraction;
    let tol = 1e-5;
    let tc = t.busy(w, |p, th| p == chip && th == "TC");
    assert!((tc - b.tc).abs() < tol, "{label}: TC {tc} vs {}", b.tc);
    let scs: Vec<String> = t
        .thread
        .values()
        .filter(|n| n.starts_with("SC ") && !n.contains("tile"))
        .cloned()
        .collect();
    let sc = scs.iter().map(|n| t.busy(w, |_, th| th == n)).sum::<f64>() / scs.len() as f64;
    assert!((sc - b.sc).abs() < tol, "{label}: SC {sc} vs {}", b.sc);
    let host = t.busy(w, |p, _| p == "host");
    assert!((host - b.host).abs() < tol, "{label}: host {host} vs {}", b.host);
    let hbm_cap = win["args"]["hbm_bytes_per_s"].as_f64().unwrap();
    let ici_cap = win["args"]["ici_bytes_per_s"].as_f64().unwrap();
    let hbm = t.utilisation(w, "HBM GB/s", hbm_cap);
    // The trace's counter samples sit on whole nanoseconds (floored): thousands of HBM samples in
    // the window move its integral by a few parts in 100,000.
    assert!((hbm - b.hbm).abs() < 5.0 * tol, "{label}: HBM {hbm} vs {}", b.hbm);
    // One counter per ICI link group (dimension and direction), their bytes over the groups' rate.
    let ici_counters: std::collections::BTreeSet<String> = t
        .events
        .iter()
        .filter(|e| e["ph"] == "C")
        .filter_map(|e| e["name"].as_str())
        .filter(|n| n.starts_with("ICI ") && n.ends_with(" GB/s"))
        .map(String::from)
        .collect();
    let ici: f64 = ici_counters.iter().map(|c| t.utilisation(w, c, ici_cap)).sum();
    assert!((ici - b.ici).abs() < tol, "{label}: ICI {ici} vs {}", b.ici);
}

#[test]
fn balanced_pipelined_imports_cleanly_and_agrees_with_the_summary() {
    check_preset("balanced", Some(Pipelining::Pipelined));
}

#[test]
fn balanced_sequential_imports_cleanly_and_agrees_with_the_summary() {
    check_preset("balanced", Some(Pipelining::Sequential));
}

#[test]
fn dlrm_small_imports_cleanly_and_agrees_with_the_summary() {
    check_preset("dlrm-small", None);
}

#[test]
fn dlrm_criteo_imports_cleanly_and_agrees_with_the_summary() {
    check_preset("dlrm-criteo", None);
}

/// Before: consecutive steps' PCIe transfers and concurrent HBM transfers overlapped on one thread.
#[test]
fn concurrent_transfers_are_on_lanes_not_overlapping() {
    let (_, text) = run("balanced", Some(Pipelining::Pipelined));
    let t = Trace::parse(&text);
    assert!(t.thread.values().any(|n| n == "HBM lane 2"), "{:?}", t.thread.values());
    // Every slice of a unit is on the unit's thread or one of its lanes.
    for e in t.slices(|_, th| th.starts_with("HBM")) {
        assert!(e["cat"].as_str().unwrap().starts_with("sc") || e["cat"].as_str().unwrap().starts_with("tc"));
    }
}
