// Throwaway: predictions of compile_check for probe design (not committed).
use sim_sparsecore::limits::{compile_check, CompileCase, ProgramKind, ScCompileParams};
use std::io::BufRead;

#[path = "../tests/common/mod.rs"]
mod common;

fn main() {
    for line in std::io::stdin().lock().lines() {
        let q: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let p: ScCompileParams = common::params(q["chip"].as_str().unwrap());
        let g = |k: &str, d: u64| q[k].as_u64().unwrap_or(d);
        let kind = if q["kind"].as_str().unwrap_or("fwd") == "fwd" { ProgramKind::Fwd } else { ProgramKind::GradSgd };
        let mk = |field: &str, v: u64| {
            let mut c = CompileCase { kind, vocab: g("vocab", 10000), dim: g("dim", 0), batch: g("batch", 256), max_ids: g("max_ids", 0), max_unique: g("max_unique", 0) };
            match field {
                "max_unique" => { c.max_unique = v; if q["max_ids"].is_null() { c.max_ids = v; } }
                "max_ids" => c.max_ids = v,
                "dim" => c.dim = v,
                _ => {}
            }
            c
        };
        if let Some(field) = q["scan"].as_str() {
            let (lo, hi, step) = (g("lo", 8), g("hi", 0), g("step", 8));
            let mut last = None;
            let mut v = lo;
            while v <= hi {
                let r = compile_check(&mk(field, v), &p);
                if r.compiles { last = Some(v); } else if last.is_some() { break; }
                v += step;
            }
            let next = last.map(|l| compile_check(&mk(field, l + step), &p));
            println!("{} -> last {:?}, next {:?}", line_summary(&q), last, next.map(|n| n.class));
        } else {
            let r = compile_check(&mk("", 0), &p);
            println!("{} -> {:?}", line_summary(&q), r.class);
        }
    }
}

fn line_summary(q: &serde_json::Value) -> String {
    q.to_string()
}
