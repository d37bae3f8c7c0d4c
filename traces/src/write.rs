//! The streaming writer: one JSON event per line.

use std::io::{self, Write};

use sim_core::recorder::{ArgValue, Recorder};
use sim_core::time::SimTime;

use crate::ids::TrackIds;

/// Microseconds as an exact decimal string of integer picoseconds: `1234567` -> `"1.234567"`, `5000000` -> `"5"`.
pub fn us_from_ps(ps: u64) -> String {
    let (whole, frac) = (ps / SimTime::PS_PER_US, ps % SimTime::PS_PER_US);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

/// A float as JSON: shortest round-trip form; NaN and infinities (not JSON) become `null`.
fn json_f64(v: f64) -> String {
    if v.is_finite() {
        serde_json::to_string(&v).expect("a finite float always serialises")
    } else {
        "null".to_string()
    }
}

fn json_args(args: &[(String, ArgValue)]) -> String {
    let body: Vec<String> = args
        .iter()
        .map(|(k, v)| {
            let v = match v {
                ArgValue::Int(i) => i.to_string(),
                ArgValue::Float(f) => json_f64(*f),
                ArgValue::Text(t) => json_str(t),
            };
            format!("{}:{v}", json_str(k))
        })
        .collect();
    format!("{{{}}}", body.join(","))
}

/// Writes the Chrome trace-event JSON of a recorder to `w` (object form: `{"traceEvents": [...]}`).
///
/// Spans whose end precedes their start, and flows naming spans that do not exist, are skipped rather than
/// written as events a viewer would reject.
pub fn write_trace<W: Write>(rec: &Recorder, w: W) -> io::Result<()> {
    let mut w = io::BufWriter::new(w);
    let ids = TrackIds::new(rec);
    let mut first = true;
    let mut event = |w: &mut io::BufWriter<W>, body: String| -> io::Result<()> {
        let sep = if first { "" } else { ",\n" };
        first = false;
        write!(w, "{sep}{body}")
    };
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    for (p, name) in ids.processes.iter().enumerate() {
        let pid = p + 1;
        event(
            &mut w,
            format!(
                r#"{{"ph":"M","pid":{pid},"name":"process_name","args":{{"name":{}}}}}"#,
                json_str(name)
            ),
        )?;
        event(
            &mut w,
            format!(r#"{{"ph":"M","pid":{pid},"name":"process_sort_index","args":{{"sort_index":{pid}}}}}"#),
        )?;
        for (t, thread) in ids.threads[p].iter().enumerate() {
            let tid = t + 1;
            event(
                &mut w,
                format!(
                    r#"{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_name","args":{{"name":{}}}}}"#,
                    json_str(thread)
                ),
            )?;
            event(
                &mut w,
                format!(
                    r#"{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_sort_index","args":{{"sort_index":{tid}}}}}"#
                ),
            )?;
        }
    }
    // Spans by start, longer first at equal start (so parents precede children), then recording order.
    let mut order: Vec<usize> = (0..rec.spans.len())
        .filter(|&i| rec.spans[i].end >= rec.spans[i].start)
        .collect();
    order.sort_by_key(|&i| (rec.spans[i].start, std::cmp::Reverse(rec.spans[i].end), i));
    for i in order {
        let s = &rec.spans[i];
        let (pid, tid) = ids.ids(&s.track).expect("every span's track has ids");
        let mut args = vec![("span_id".to_string(), ArgValue::Int(i as i64))];
        args.extend(s.args.iter().cloned());
        event(
            &mut w,
            format!(
                r#"{{"ph":"X","pid":{pid},"tid":{tid},"ts":{},"dur":{},"name":{},"cat":{},"args":{}}}"#,
                us_from_ps(s.start.ps()),
                us_from_ps(s.end.ps() - s.start.ps()),
                json_str(&s.name),
                json_str(&s.category),
                json_args(&args)
            ),
        )?;
    }
    for (n, f) in rec.flows.iter().enumerate() {
        let (Some(from), Some(to)) = (rec.spans.get(f.from.0), rec.spans.get(f.to.0)) else {
            continue;
        };
        let (Some((fp, ft)), Some((tp, tt))) = (ids.ids(&from.track), ids.ids(&to.track)) else {
            continue;
        };
        // Bind the start to the source span's last picosecond, which lies inside it (unless it is empty).
        let from_ts = if from.end > from.start {
            from.end.ps() - 1
        } else {
            from.start.ps()
        };
        let id = n + 1;
        let name = json_str(&f.name);
        event(
            &mut w,
            format!(
                r#"{{"ph":"s","pid":{fp},"tid":{ft},"ts":{},"id":{id},"name":{name},"cat":"flow"}}"#,
                us_from_ps(from_ts)
            ),
        )?;
        event(
            &mut w,
            format!(
                r#"{{"ph":"f","bp":"e","pid":{tp},"tid":{tt},"ts":{},"id":{id},"name":{name},"cat":"flow"}}"#,
                us_from_ps(to.start.ps())
            ),
        )?;
    }
    let mut counters: Vec<usize> = (0..rec.counters.len()).collect();
    counters.sort_by_key(|&i| (rec.counters[i].time, i));
    for i in counters {
        let c = &rec.counters[i];
        let pid = ids.pid(&c.process).expect("every counter's process has an id");
        event(
            &mut w,
            format!(
                r#"{{"ph":"C","pid":{pid},"ts":{},"name":{},"args":{{"value":{}}}}}"#,
                us_from_ps(c.time.ps()),
                json_str(&c.name),
                json_f64(c.value)
            ),
        )?;
    }
    w.write_all(b"\n]}\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_are_exact_decimals() {
        assert_eq!(us_from_ps(0), "0");
        assert_eq!(us_from_ps(5_000_000), "5");
        assert_eq!(us_from_ps(1_234_567), "1.234567");
        assert_eq!(us_from_ps(1_500_000), "1.5");
        assert_eq!(us_from_ps(7), "0.000007");
        assert_eq!(us_from_ps(u64::MAX), "18446744073709.551615");
    }
}
