//! Early steady state: a run whose steps repeat (NPZ ids) stops simulating once the schedule
//! repeats and writes the remaining periods out; its results must be the full simulation's, byte
//! for byte, and it must actually have skipped steps.

use std::path::PathBuf;

use workloads::spec::{IdDist, Placement};
use workloads::{simulate, Pipelining, RunOptions, RunResult, Workload};

fn testdata() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata"))
}

/// The NPZ example (three features read from the preprocess example's batches), `steps` steps,
/// every feature cycling through `files` (names in testdata/preprocess/example).
fn npz(steps: u32, files: &[&str]) -> Workload {
    let dir = testdata().join("workloads");
    let mut w = Workload::parse(&std::fs::read_to_string(dir.join("npz-example.toml")).unwrap()).unwrap();
    w.resolve_paths(&dir);
    w.steps = steps;
    let paths: Vec<PathBuf> = files
        .iter()
        .map(|f| testdata().join("preprocess/example").join(f))
        .collect();
    for f in &mut w.features {
        f.ids = IdDist::Npz(paths.clone());
    }
    w
}

/// Everything a run gives a user, as text: the JSON summary, then the rest of the report and the
/// whole recording (what traces are written from).
fn outputs(r: &RunResult) -> (String, String) {
    let summary = serde_json::to_string_pretty(&r.summary).unwrap();
    let rest = format!(
        "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        r.bottleneck_stage,
        r.bottleneck,
        r.chip_constants,
        r.padding_per_buffer,
        r.step_times,
        r.knobs,
        r.warnings,
        r.memory_breakdown,
        r.startup_ps,
        r.straggler,
        r.nan,
        r.recorder.spans,
        r.recorder.flows,
        r.recorder.counters,
    );
    (summary, rest)
}

/// Runs `w` with early steady state and in full; checks the outputs are identical and returns the
/// steps the early run wrote out instead of simulating.
fn early_vs_full(w: &Workload, record: bool) -> u64 {
    let opts = RunOptions {
        record,
        ..Default::default()
    };
    let early = simulate(w, &opts).unwrap();
    let full = simulate(
        w,
        &RunOptions {
            simulate_every_step: true,
            ..opts
        },
    )
    .unwrap();
    assert_eq!(full.extrapolated_steps, 0);
    let (a, b) = (outputs(&early), outputs(&full));
    assert_eq!(a.0, b.0, "{}: the JSON summaries differ", w.name);
    assert!(a.1 == b.1, "{}: the reports or recordings differ", w.name);
    early.extrapolated_steps
}

#[test]
fn one_npz_file_for_every_feature_stops_early_with_the_full_result() {
    let w = npz(60, &["ids_hot.npz"]);
    let skipped = early_vs_full(&w, true);
    // Every step alike: all but a few warm-up and final steps are written out.
    assert!(skipped >= 50, "{skipped} of 60 steps written out");
}

#[test]
fn two_npz_files_repeat_every_two_steps() {
    let w = npz(60, &["ids.npz", "ids_hot.npz"]);
    let skipped = early_vs_full(&w, false);
    assert!(skipped >= 48, "{skipped} of 60 steps written out");
    // Periods of two steps: whole periods are written out.
    assert!(skipped.is_multiple_of(2));
}

#[test]
fn features_with_different_file_counts_repeat_at_their_common_multiple() {
    // Two features cycle through two files, one through three: the steps repeat every six.
    let mut w = npz(80, &["ids.npz", "ids_hot.npz"]);
    let dir = testdata().join("preprocess/example");
    w.features[2].ids = IdDist::Npz(vec![dir.join("ids.npz"), dir.join("ids.npz"), dir.join("ids_hot.npz")]);
    let skipped = early_vs_full(&w, false);
    assert!(
        skipped >= 54 && skipped.is_multiple_of(6),
        "{skipped} of 80 steps written out"
    );
}

#[test]
fn pipelining_modes_and_prefetch_depths_give_the_full_result() {
    for pipelining in [Pipelining::Sequential, Pipelining::Pipelined] {
        for prefetch in [1, 2, 4] {
            let mut w = npz(50, &["ids.npz", "ids_hot.npz"]);
            w.pipelining = pipelining;
            w.host.prefetch = prefetch;
            let skipped = early_vs_full(&w, false);
            assert!(
                skipped >= 36,
                "{pipelining:?} prefetch {prefetch}: {skipped} steps written out"
            );
        }
    }
}

#[test]
fn several_chips_with_collectives_give_the_full_result() {
    // Four chips: all-to-alls and the all-reduce share the ICI links; the NPZ rows stay the
    // batch per chip.
    let mut w = npz(50, &["ids.npz", "ids_hot.npz"]);
    (w.chips, w.global_batch, w.topology) = (4, 256, None);
    let skipped = early_vs_full(&w, true);
    assert!(skipped >= 40, "{skipped} of 50 steps written out");
}

#[test]
fn generated_ids_are_simulated_step_by_step() {
    // New ids every step: nothing repeats for certain, nothing is skipped.
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.steps = 12;
    assert_eq!(early_vs_full(&w, false), 0);
}

#[test]
fn tensorcore_tables_only_repeat_whatever_the_ids() {
    // No SparseCore work: every step is the same TensorCore program.
    let mut w = Workload::preset("dlrm-small").unwrap();
    w.steps = 40;
    for t in &mut w.tables {
        t.placement = Placement::Tensorcore;
    }
    assert!(early_vs_full(&w, false) >= 30);
}

#[test]
fn short_runs_written_out_agree_with_full_runs() {
    // 3 steps asked for are simulated between 4 warm-up and 4 drain steps: 11 steps, enough for
    // periods of two to repeat; what is written out (checked byte for byte against the full run)
    // is at most the steps after the first repeat.
    let out = early_vs_full(&npz(3, &["ids.npz", "ids_hot.npz"]), false);
    assert!(out <= 11 - 4, "{out}");
}
