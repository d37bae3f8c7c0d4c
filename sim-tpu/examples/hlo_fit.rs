//! Fits the fused-kernel constants of `tpusim hlo` (sim-tpu/src/hlo/calibration.json) on the `fit` split of
//! testdata/hlo/programs.json only, per chip, within physical bounds; prints the new file to stdout.
//!
//! `cargo run --release -p sim-tpu --example hlo_fit [-- --temp-only] > sim-tpu/src/hlo/calibration.json`
//!
//! `--corpus [--split random|size|family:NAME]` fits instead on the compiler corpus (testdata/hlo/corpus/) records
//! that split lets constants be fitted on (default `random`: its `fit` side), added to the `fit` records of
//! programs.json; `hlo_calibration --corpus --split S --params FILE` then checks the output on that split.
//!
//! The cycle objective (`sim_tpu::hlo::fit`): each corpus family and the reference sample weigh alike, and a
//! record's log error counts squared within a 40% error and linearly beyond it.
//!
//! `--quick` (for the leave-one-family-out table, 16 fits): keeps the installed temp constants and VMEM budget
//! and runs one round of the coordinate search, with steps down to 10%, instead of three rounds down to 1%.

use std::path::PathBuf;

use sim_tpu::chips::Chip;
use sim_tpu::hlo::corpus::Split;
use sim_tpu::hlo::fit::{self, FitGroup};
use sim_tpu::hlo::score::{quantile, ratio_error, temp_error};
use sim_tpu::hlo::{cost_module_with, hlo_params, HloModule, HloParams};
use sim_tpu::tensorcore::ChipModel;

#[allow(dead_code)]
mod common;

/// Objective differences below this (0.002 in the objective's log units) are noise on 15 records: budgets within it of
/// the best count as scoring the same.
const SCAN_TOLERANCE: f64 = 0.002;

struct Rec {
    module: HloModule,
    est: f64,
    temp: u64,
    scored: bool,
    /// The set it is weighed in (`hlo::fit`).
    group: FitGroup,
    /// Its weight in the cycle objective (`hlo::fit::group_weights` over the scored records; 0 when not scored).
    weight: f64,
}

fn objective(recs: &[Rec], chip: &ChipModel, hp: &HloParams) -> f64 {
    // The weighted robust log-error objective of `hlo::fit` (groups weigh alike, a linear tail past a 40% error).
    // Two threads, each costing a half in record order: the pairs are then summed in record order whatever the
    // split, so the fit stays deterministic.
    let scored: Vec<&Rec> = recs.iter().filter(|r| r.scored).collect();
    let half = scored.len().div_ceil(2);
    let pairs = |part: &[&Rec]| -> Vec<(f64, f64)> {
        part.iter()
            .map(|r| {
                let c = cost_module_with(&r.module, chip, hp).unwrap();
                (r.weight, (c.total_cycles.max(1) as f64 / r.est).ln())
            })
            .collect()
    };
    let (a, b) = scored.split_at(half.min(scored.len()));
    let (mut pa, pb) = std::thread::scope(|s| {
        let h = s.spawn(|| pairs(b));
        (pairs(a), h.join().unwrap())
    });
    pa.extend(pb);
    fit::objective(&pa)
}

/// Coordinate search on a log grid from a few starting points (the objective has local minima), the
/// VMEM budget of `start` kept; on the corpus (`corpus`), from `start`'s constants only.
fn search(start: &HloParams, recs: &[Rec], chip: &ChipModel, corpus: bool, quick: bool) -> HloParams {
    // Quick: one round, steps down to 10% (the leave-one-family-out table's 16 fits); else three rounds to 1%.
    let (rounds, finest) = if quick { (1, 1.1) } else { (3, 1.01) };
    let vmem_budget = start.vmem_temp_bytes;
    // Coordinate search on a log grid from a few starting points (the objective has local minima).
    let mut best_start = (f64::MAX, start.clone());
    let grid = [
        (2.0, 0.5, 0.0),
        (8.0, 0.5, 0.0),
        (2.0, 3.0, 0.0),
        (8.0, 3.0, 0.0),
        (2.0, 0.5, 2.0),
        (8.0, 0.5, 2.0),
        (2.0, 3.0, 2.0),
        (8.0, 3.0, 2.0),
    ];
    // On the corpus (hundreds of records a chip) only the current constants start the search: the grid's
    // sixteen starts would take hours on two shared cores.
    let grid_starts = if corpus { 0 } else { grid.len() };
    let starts = grid[..grid_starts]
        .iter()
        .flat_map(|&(lb, fo, sb)| [(lb, fo, sb, Some(1.0)), (lb, fo, sb, Some(6.0))])
        .chain([(
            start.loop_block_cycles,
            start.fused_op_cycles,
            start.stream_block_cycles,
            start.mxu_fused_op_cycles,
        )]);
    for (lb, fo, sb, mo) in starts {
        let mut hp = start.clone();
        hp.vmem_temp_bytes = vmem_budget;
        hp.loop_block_cycles = lb;
        hp.fused_op_cycles = fo;
        hp.stream_block_cycles = sb;
        hp.mxu_fused_op_cycles = mo;
        let mut best = objective(recs, chip, &hp);
        for _round in 0..rounds {
            for field in 0..7 {
                let mut step = 2.0f64;
                while step > finest {
                    let mut improved = false;
                    for f in [step, 1.0 / step] {
                        let mut h = hp.clone();
                        match field {
                            0 => h.fused_op_cycles = (h.fused_op_cycles * f).clamp(0.05, 64.0),
                            1 => h.loop_block_cycles = (h.loop_block_cycles * f).clamp(0.05, 64.0),
                            2 => h.mxu_epilogue_factor = (h.mxu_epilogue_factor * f).clamp(0.01, 1.0),
                            // From 0 a factor cannot move it: start such searches at 0.25.
                            3 if h.stream_block_cycles == 0.0 => h.stream_block_cycles = 0.25 * f,
                            3 => h.stream_block_cycles = (h.stream_block_cycles * f).clamp(0.0, 64.0),
                            4 => h.launch_factor = (h.launch_factor * f).clamp(0.2, 1.0),
                            6 if h.row_block_cycles == 0.0 => h.row_block_cycles = 0.5 * f,
                            6 => h.row_block_cycles = (h.row_block_cycles * f).clamp(0.0, 64.0),
                            _ => {
                                let v = h.mxu_fused_op_cycles.unwrap_or(h.fused_op_cycles);
                                h.mxu_fused_op_cycles = Some((v * f).clamp(0.05, 64.0));
                            }
                        }
                        let o = objective(recs, chip, &h);
                        if o < best - 1e-9 {
                            best = o;
                            hp = h;
                            improved = true;
                        }
                    }
                    if !improved {
                        step = step.sqrt();
                    }
                }
            }
        }
        if best < best_start.0 {
            best_start = (best, hp);
        }
    }
    best_start.1
}

/// `recs` with their weights: every group of scored records weighs alike (`hlo::fit::group_weights`).
fn weighted(mut recs: Vec<Rec>) -> Vec<Rec> {
    let groups: Vec<FitGroup> = recs.iter().filter(|r| r.scored).map(|r| r.group.clone()).collect();
    let mut w = fit::group_weights(&groups).into_iter();
    for r in recs.iter_mut().filter(|r| r.scored) {
        r.weight = w.next().unwrap_or(0.0);
    }
    recs
}

/// Prints the fit records' cycle errors under `hp` (the reference sample's and the corpus's apart) and the objective.
fn report_fit(recs: &[Rec], chip: &ChipModel, hp: &HloParams) {
    for (label, reference) in [("reference sample", true), ("corpus", false)] {
        let errs: Vec<f64> = recs
            .iter()
            .filter(|r| r.scored && (r.group == FitGroup::Reference) == reference)
            .map(|r| {
                ratio_error(
                    cost_module_with(&r.module, chip, hp).unwrap().total_cycles as f64,
                    r.est,
                )
            })
            .collect();
        eprintln!(
            "{}: fit records ({label}) {} cycles median {:.1}% p90 {:.1}%",
            hp.name,
            errs.len(),
            quantile(&errs, 0.5) * 100.0,
            quantile(&errs, 0.9) * 100.0,
        );
    }
    eprintln!("{}: objective {:.4} {:?}", hp.name, objective(recs, chip, hp), hp);
}

/// The fitted constants rounded to three decimals (as `calibration.json` keeps them).
fn rounded(mut hp: HloParams) -> HloParams {
    hp.fused_op_cycles = (hp.fused_op_cycles * 1000.0).round() / 1000.0;
    hp.loop_block_cycles = (hp.loop_block_cycles * 1000.0).round() / 1000.0;
    hp.mxu_epilogue_factor = (hp.mxu_epilogue_factor * 1000.0).round() / 1000.0;
    hp.launch_factor = (hp.launch_factor * 1000.0).round() / 1000.0;
    hp.mxu_fused_op_cycles = hp.mxu_fused_op_cycles.map(|v| (v * 1000.0).round() / 1000.0);
    hp.stream_block_cycles = (hp.stream_block_cycles * 1000.0).round() / 1000.0;
    hp.row_block_cycles = (hp.row_block_cycles * 1000.0).round() / 1000.0;
    hp
}

/// The command line: `--temp-only` (refit only the temp constants, which do not affect cycles, keeping the cycle
/// constants), `--quick`, and `--corpus [--split S]` (the corpus split to fit on).
fn parse_args() -> (bool, bool, Option<Split>) {
    let args: Vec<String> = std::env::args().collect();
    let temp_only = args.iter().any(|a| a == "--temp-only");
    let quick = args.iter().any(|a| a == "--quick");
    let split = args.iter().any(|a| a == "--corpus").then(|| {
        let s = args.iter().position(|a| a == "--split").and_then(|i| args.get(i + 1));
        Split::parse(s.map(String::as_str).unwrap_or("random")).expect("--split")
    });
    (temp_only, quick, split)
}

fn main() {
    let (temp_only, quick, split) = parse_args();
    let corpus = match &split {
        Some(s) => common::corpus::load(&common::corpus::default_dir())
            .into_iter()
            .filter(|l| s.fits_on(&l.rec))
            .collect(),
        None => Vec::new(),
    };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/hlo");
    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("programs.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for start in hlo_params() {
        let chip = ChipModel::preset(&start.name).unwrap();
        let vmem = Chip::preset(&start.name).unwrap().spec.vmem_bytes_per_tc;
        let recs: Vec<Rec> = records
            .iter()
            .filter(|r| r["chip"] == start.name.as_str() && r["split"] == "fit")
            .map(|r| Rec {
                module: HloModule::parse(&std::fs::read_to_string(dir.join(r["hlo"].as_str().unwrap())).unwrap())
                    .unwrap(),
                est: r["total_estimated_cycles"].as_f64().unwrap(),
                temp: r["temp_bytes"].as_u64().unwrap(),
                scored: r["estimate_complete"].as_bool().unwrap(),
                group: FitGroup::Reference,
                weight: 0.0,
            })
            .chain(corpus.iter().filter(|l| l.rec.chip == start.name).map(|l| Rec {
                module: l.module.clone(),
                est: l.rec.total_estimated_cycles as f64,
                temp: l.rec.temp_bytes,
                scored: l.rec.estimate_complete && l.rec.total_estimated_cycles > 0,
                group: FitGroup::Family(l.rec.family.clone()),
                weight: 0.0,
            }))
            .collect();
        let recs = weighted(recs);
        // Temp constants (first: they do not depend on the cycle constants): on-chip bytes for temporaries
        // (multiples of 1 MiB up to the chip's VMEM, or its CMEM where it has one), then the HBM overhead and the
        // per-row-reduction scratch (multiples of 4 KiB, at most 64 and 124 KiB), with the least median temp error (+ a
        // tenth of the p90, each error capped at 1000 %: a record with no temporaries on one side and megabytes on
        // the other is off by 10^4-10^6 %, and uncapped such records decided v5p's on-chip bytes alone, keeping
        // nothing on chip at a median error of 26 % on the fit records where 48 MiB gives 10 %).
        // `vmem_temp_bytes`, which only decides HBM traffic for cycles, is kept.
        let spec = Chip::preset(&start.name).unwrap().spec;
        let temp_score = |h: &HloParams| {
            let errs: Vec<f64> = recs
                .iter()
                .map(|r| temp_error(cost_module_with(&r.module, &chip, h).unwrap().temp_bytes, r.temp).min(10.0))
                .collect();
            quantile(&errs, 0.5) + 0.1 * quantile(&errs, 0.9)
        };
        // The candidate with the least temp score, each tried on `from` through `set`.
        let best_of =
            |from: &HloParams, candidates: &mut dyn Iterator<Item = u64>, set: &dyn Fn(&mut HloParams, u64)| {
                let mut best = (f64::MAX, 0u64);
                for v in candidates {
                    let mut h = from.clone();
                    set(&mut h, v);
                    let m = temp_score(&h);
                    if m < best.0 - 1e-12 {
                        best = (m, v);
                    }
                }
                best.1
            };
        if quick {
            let hp = rounded(search(&start, &recs, &chip, split.is_some(), true));
            eprintln!("{}: quick fit {:?}", hp.name, hp);
            out.push(hp);
            continue;
        }
        let mut ht = start.clone();
        // Largest first: many budgets score the same on the fit records (none comes near them), and the first of
        // equals is kept, so the budget nearest the on-chip memory the compiler fills wins a tie (the smallest
        // tied one, 66 MiB on v6e, put the largest programs' intermediates in HBM that the compiler keeps on chip).
        ht.temp_fast_bytes = best_of(
            &ht,
            &mut (0..=vmem.max(spec.cmem_bytes) >> 21).rev().map(|mib2| mib2 << 21),
            &|h, v| h.temp_fast_bytes = v,
        );
        // The overhead seen on the compiler's own buffers is 32-64 KiB.
        ht.temp_overhead_bytes = best_of(&ht, &mut (0..=64u64).step_by(4).map(|kib| kib << 10), &|h, v| {
            h.temp_overhead_bytes = v
        });
        ht.temp_row_reduce_bytes = best_of(&ht, &mut (0..=124u64).step_by(4).map(|kib| kib << 10), &|h, v| {
            h.temp_row_reduce_bytes = v
        });
        eprintln!(
            "{}: temp fit {} MiB on chip, overhead {} B, {} B per row reduction",
            ht.name,
            ht.temp_fast_bytes >> 20,
            ht.temp_overhead_bytes,
            ht.temp_row_reduce_bytes
        );
        if temp_only {
            out.push(ht);
            continue;
        }
        let mut start = ht;
        // The VMEM budget for intermediates (cycles only): a 1 MiB grid up to the on-chip memory the compiler
        // places intermediates in (VMEM, or CMEM on v4). Many budgets score the same on the fit split (no fit
        // program comes near them); among those, the one nearest what the compiler can give them, that memory
        // less one kernel's scoped window, is taken: the fit records' optimized modules keep up to nearly all
        // of VMEM in `S(1)` buffers at once.
        let on_chip = vmem.max(spec.cmem_bytes);
        let physical = on_chip.saturating_sub(chip.scoped_vmem_bytes);
        let mut scan = Vec::new();
        for mib in 0..=(on_chip >> 20) {
            let mut h = start.clone();
            h.vmem_temp_bytes = mib << 20;
            scan.push((objective(&recs, &chip, &h), mib << 20));
        }
        let least = scan.iter().map(|s| s.0).fold(f64::MAX, f64::min);
        let flat: Vec<u64> = scan
            .iter()
            .filter(|s| s.0 <= least + SCAN_TOLERANCE)
            .map(|s| s.1)
            .collect();
        if let Some(&b) = flat.iter().min_by_key(|b| b.abs_diff(physical)) {
            start.vmem_temp_bytes = b;
        }
        eprintln!(
            "{}: VMEM budget for intermediates {} MiB (objective {:.4}; flat over {:?} MiB)",
            start.name,
            start.vmem_temp_bytes >> 20,
            least,
            flat.iter().map(|b| b >> 20).collect::<Vec<_>>()
        );
        let hp = rounded(search(&start, &recs, &chip, split.is_some(), false));
        report_fit(&recs, &chip, &hp);
        out.push(hp);
    }
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
