//! The figures show what sets the step: every stage that ran has a row, the critical path is drawn
//! over the bars, and the bottleneck sentence and the picture come from one run and agree; busy
//! fractions come from steady-state steps and do not depend on how many steps were asked for.

use sim_core::recorder::{ArgValue, Recorder};
use workloads::{simulate, Pipelining, RunOptions, RunResult, Workload};

fn run(preset: &str, steps: u32, pipelining: Pipelining, edit: impl Fn(&mut Workload)) -> RunResult {
    let mut w = Workload::preset(preset).unwrap();
    w.steps = steps;
    w.pipelining = pipelining;
    edit(&mut w);
    let opts = RunOptions {
        record: true,
        ..Default::default()
    };
    simulate(&w, &opts).unwrap()
}

fn text<'a>(args: &'a [(String, ArgValue)], key: &str) -> Option<&'a str> {
    args.iter().find(|(k, _)| k == key).and_then(|(_, v)| match v {
        ArgValue::Text(t) => Some(t.as_str()),
        _ => None,
    })
}

/// Time (ps) the recorded critical path charges to `stage`.
fn critical_ps(rec: &Recorder, stage: &str) -> u64 {
    rec.spans
        .iter()
        .filter(|s| s.track.thread == reports::CRITICAL_THREAD && text(&s.args, "stage") == Some(stage))
        .map(|s| s.end.0 - s.start.0)
        .sum()
}

/// The example: `balanced --pipelining sequential` said SparseCore gradient updates take
/// 829 µs of the step while the bar drawn was ~298 µs (the SparseCore's compute alone, not the
/// pass's HBM traffic). Now the sentence's figure is the recorded critical path summed over the
/// measured steps, and the bottleneck stage's bars in those steps are that long.
#[test]
fn the_sentence_and_the_picture_agree() {
    let r = run("balanced", 4, Pipelining::Sequential, |_| {});
    let s = &r.summary;
    let stage = r.bottleneck_stage.expect("a bottleneck");
    assert_eq!(stage.key(), "sc_backward");
    let first = &s.critical_path[0];
    assert_eq!(first.stage, stage.key());
    // The sentence quotes the figure the summary holds.
    let quoted = sim_core::units::duration_us(first.us_per_step);
    assert!(r.bottleneck.contains(&format!("{quoted} of the")), "{}", r.bottleneck);
    // ... which is the drawn critical path summed over the measured steps.
    let steps = s.steady_steps;
    assert_eq!(steps, 4);
    for c in &s.critical_path {
        let drawn = critical_ps(&r.recorder, &c.stage) / steps;
        assert_eq!(drawn as f64 / 1e6, c.us_per_step, "{}", c.stage);
    }
    // The bottleneck's bars in the measured steps (steps after the warm-up ones) are as long as
    // the sentence says: each bar holds the whole pass, compute and HBM traffic.
    let row = reports::palette::STAGES
        .iter()
        .position(|p| p.key == "sc_backward")
        .unwrap();
    let bars = reports::stage_bars(&r.recorder);
    let warm = s.warmup_steps as i64;
    let mut total = 0u64;
    for step in warm..warm + steps as i64 {
        let pieces = &bars[&(row, step)];
        total += pieces.iter().map(|(a, b)| b - a).sum::<u64>();
    }
    let bar_us = total as f64 / steps as f64 / 1e6;
    assert!(
        bar_us >= first.us_per_step * 0.999 && bar_us <= first.us_per_step * 1.05,
        "bars {bar_us} µs vs sentence {} µs",
        first.us_per_step
    );
    // The figure has a row for every stage on the critical path and draws the path.
    let svg = reports::gantt_svg(&[("sequential", &r.recorder, s.step_time_us)], "t");
    for c in &s.critical_path {
        let p = reports::palette::stage(&c.stage).expect("every stage has a colour");
        if c.stage != "kernel_launch" {
            assert!(svg.contains(&format!("\n{}\n", p.short)), "row {}", p.short);
        }
    }
    assert!(svg.contains("\ncritical\n") && svg.contains("\nHBM\n"));
}

/// A host-bound run (one preprocessing thread) draws the host's bars and names the host.
#[test]
fn a_host_bound_run_shows_the_host() {
    let r = run("balanced", 4, Pipelining::Pipelined, |w| w.host.threads = 1);
    assert_eq!(r.bottleneck_stage.map(|s| s.key()), Some("host"), "{}", r.bottleneck);
    assert!(r.summary.busy_fraction.host > 0.9, "{:?}", r.summary.busy_fraction);
    let svg = reports::gantt_svg(&[("pipelined", &r.recorder, r.summary.step_time_us)], "t");
    assert!(svg.contains("\nhost\n") && svg.contains("\nPCIe\n"));
    let host = reports::palette::hex(reports::palette::stage("host").unwrap().colour);
    // 4 + warm-up + drain steps of host bars, plus the legend's box.
    let bars = svg.matches(&format!("fill=\"{host}\"")).count();
    assert!(bars >= 8, "{bars} host rectangles");
}

/// The example: `balanced` at 4, 6 and 24 steps gave TensorCore busy 41%, 50%, 57% and
/// host busy 0%, 17%, 60%. Measured over steady-state steps they agree within 1%.
#[test]
fn busy_fractions_do_not_depend_on_the_steps_asked_for() {
    let runs: Vec<RunResult> = [4, 6, 24]
        .iter()
        .map(|&n| run("balanced", n, Pipelining::Pipelined, |_| {}))
        .collect();
    for (r, n) in runs.iter().zip([4u64, 6, 24]) {
        assert_eq!(r.summary.steady_steps, n);
        // The host preprocesses a step in about 0.5 ms of the ~0.75 ms step: never idle.
        assert!(r.summary.busy_fraction.host > 0.5, "{n}: {:?}", r.summary.busy_fraction);
    }
    let b = |r: &RunResult| {
        let f = &r.summary.busy_fraction;
        [f.tc, f.sc, f.hbm, f.ici, f.host, r.summary.overlap_fraction]
    };
    let base = b(&runs[2]);
    for r in &runs[..2] {
        for (x, y) in b(r).iter().zip(base) {
            assert!((x - y).abs() <= 0.01, "{:?} vs {base:?}", b(r));
        }
    }
}

/// The vocabulary the figures read is the one the runs record.
#[test]
fn figures_and_runs_share_their_names() {
    assert_eq!(reports::CRITICAL_THREAD, workloads::program::CRITICAL_THREAD);
    assert_eq!(reports::WINDOW_THREAD, workloads::program::WINDOW_THREAD);
    assert_eq!(reports::STAGE_ARG, workloads::program::graph::STAGE_ARG);
    use workloads::program::Stage::*;
    for s in [
        Host,
        Pcie,
        ScForward,
        ScBackward,
        AllToAll,
        AllReduce,
        CollectiveLatency,
        TcForward,
        TcBackward,
        TcUpdate,
        KernelLaunch,
        TcProgram,
    ] {
        assert!(reports::palette::stage(s.key()).is_some(), "{}", s.key());
    }
}

/// The example: the default host.threads = 4 made a 40-table model 6x slower without
/// saying so. A host-bound run names the host, the setting and a thread count; with that many
/// threads the host no longer sets the step.
#[test]
fn a_host_bound_run_says_how_many_threads_would_do() {
    let r = run("balanced", 4, Pipelining::Pipelined, |w| w.host.threads = 4);
    assert_eq!(r.bottleneck_stage.map(|s| s.key()), Some("host"), "{}", r.bottleneck);
    let s = &r.bottleneck;
    assert!(
        s.starts_with("host input pipeline-bound") && s.contains("host.threads = 4"),
        "{s}"
    );
    let need: u32 = s
        .split("about ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no thread count in: {s}"));
    assert!(need > 4, "{s}");
    let fixed = run("balanced", 4, Pipelining::Pipelined, |w| w.host.threads = need);
    assert_ne!(
        fixed.bottleneck_stage.map(|s| s.key()),
        Some("host"),
        "{}",
        fixed.bottleneck
    );
    assert!(fixed.summary.step_time_us < r.summary.step_time_us / 2.0);
}
