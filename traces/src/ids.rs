//! Process and thread ids for the tracks of a recorder.

use std::cmp::Ordering;
use std::collections::HashMap;

use sim_core::recorder::{Recorder, Track};

/// Numeric ids (pid, tid) assigned to the processes and threads of a recorder, deterministically.
#[derive(Clone, Debug, Default)]
pub struct TrackIds {
    /// Process names in pid order (pid = index + 1).
    pub processes: Vec<String>,
    /// Per process (same index as `processes`): thread names in tid order (tid = index + 1).
    pub threads: Vec<Vec<String>>,
    pid_of: HashMap<String, u32>,
    tid_of: HashMap<Track, u32>,
}

/// Natural order of process names: "host" first, then by text with digit runs compared as numbers.
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let host = |s: &str| s != "host";
    host(a).cmp(&host(b)).then_with(|| chunks(a).cmp(&chunks(b)))
}

/// Splits a name into text and number chunks, so "chip 10" sorts after "chip 2".
fn chunks(s: &str) -> Vec<(String, u128)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut num: Option<u128> = None;
    for ch in s.chars() {
        if let Some(d) = ch.to_digit(10) {
            num = Some(num.unwrap_or(0).saturating_mul(10).saturating_add(d as u128));
        } else {
            if let Some(n) = num.take() {
                out.push((std::mem::take(&mut text), n));
            }
            text.push(ch);
        }
    }
    out.push((text, num.unwrap_or(0)));
    out
}

impl TrackIds {
    /// Assigns ids to every process and thread named by the recorder's spans and counters.
    pub fn new(rec: &Recorder) -> Self {
        let mut names: Vec<&str> = rec
            .spans
            .iter()
            .map(|s| s.track.process.as_str())
            .chain(rec.counters.iter().map(|c| c.process.as_str()))
            .collect();
        names.sort_by(|a, b| natural_cmp(a, b).then_with(|| a.cmp(b)));
        names.dedup();
        let mut ids = TrackIds::default();
        for (i, name) in names.iter().enumerate() {
            ids.processes.push(name.to_string());
            ids.threads.push(Vec::new());
            ids.pid_of.insert(name.to_string(), i as u32 + 1);
        }
        for span in &rec.spans {
            if ids.tid_of.contains_key(&span.track) {
                continue;
            }
            let p = ids.pid_of[&span.track.process] as usize - 1;
            ids.threads[p].push(span.track.thread.clone());
            ids.tid_of.insert(span.track.clone(), ids.threads[p].len() as u32);
        }
        ids
    }
    /// Process id of a process name (None if the recorder never named it).
    pub fn pid(&self, process: &str) -> Option<u32> {
        self.pid_of.get(process).copied()
    }
    /// (pid, tid) of a span's track.
    pub fn ids(&self, track: &Track) -> Option<(u32, u32)> {
        Some((self.pid(&track.process)?, *self.tid_of.get(track)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_first_then_chips_in_natural_order() {
        let mut v = vec!["chip 10", "chip 2", "host", "chip 1"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["host", "chip 1", "chip 2", "chip 10"]);
    }
}
