//! The error band: coverage and verdicts derived by hand on synthetic records and kernels, and the embedded
//! band data current with the calibration records (`band_fit -- --write` regenerates it).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use sim_tpu::band::build::{coverage, model_band, Sample};
use sim_tpu::band::{BandData, BandKernel, ClassBand, Coverage, KernelClass, ModelBand, ShapeCell};

const COMMAND: &str = "cargo run --release -p sim-tpu --example band_fit -- --write";

fn cell(bytes_log4: u8, intensity_log4: i8) -> ShapeCell {
    ShapeCell {
        bytes_log4,
        intensity_log4,
    }
}

fn kernel(class: &str, c: ShapeCell, cycles: u64) -> BandKernel {
    BandKernel {
        class: KernelClass::of_op(class),
        cell: c,
        cycles,
    }
}

fn band(low: f64, high: f64) -> ClassBand {
    ClassBand {
        records: 5,
        weight: 5.0,
        low_ratio: low,
        high_ratio: high,
        median_error: 0.1,
    }
}

/// Five one-kernel records of one class, model 100 cycles each, compiler 100 e^r for r = -0.2 .. 0.2. Each is
/// checked against a band built from the other four (weight 4 >= 3): the 10th percentile is their smallest r,
/// the 90th their largest. The two extremes fall outside (-0.2 below floor(100 e^-0.1) = 90; 0.2 above
/// ceil(100 e^0.1) = 111), the three middle ones inside: 3 of 5.
#[test]
fn coverage_by_hand_on_synthetic_records() {
    let c = cell(10, 2);
    let samples: Vec<Sample> = [-0.2f64, -0.1, 0.0, 0.1, 0.2]
        .iter()
        .enumerate()
        .map(|(i, r)| Sample {
            group: format!("g{i}"),
            kernels: vec![kernel("matmul", c, 100)],
            estimate: 100.0 * r.exp(),
        })
        .collect();
    let domain: BTreeSet<(KernelClass, ShapeCell)> = [(KernelClass::of_op("matmul"), c)].into();
    assert_eq!(
        coverage(&domain, &samples),
        Coverage {
            records: 5,
            inside: 3,
            share: 0.6
        }
    );
    // Built on all five: 10th percentile the smallest (cumulative weight 1 >= 0.5), 90th the largest (5 >= 4.5).
    let fit = [kernel("matmul", c, 1)];
    let b = model_band(String::new(), &fit, &samples);
    let m = &b.classes[&KernelClass::of_op("matmul")];
    assert_eq!(m.low_ratio, ((-0.2f64).exp() * 1e4).round() / 1e4);
    assert_eq!(m.high_ratio, (0.2f64.exp() * 1e4).round() / 1e4);
    assert_eq!(m.records, 5);
    // A class with less than three records' weight gets no band of its own.
    let two: Vec<Sample> = samples[..2].to_vec();
    assert!(model_band(String::new(), &fit, &two).classes.is_empty());
}

/// Cycle shares weight a record's residual in each class: a record with 3/4 of its cycles in `a` and 1/4 in
/// `b` counts 0.75 towards `a` and 0.25 towards `b`.
#[test]
fn residuals_are_weighted_by_cycle_share() {
    let c = cell(8, 0);
    let samples: Vec<Sample> = (0..4)
        .map(|i| Sample {
            group: format!("g{i}"),
            kernels: vec![kernel("a", c, 75), kernel("b", c, 25)],
            estimate: 100.0 * 1.5,
        })
        .collect();
    let b = model_band(String::new(), &[kernel("a", c, 1)], &samples);
    let a = &b.classes[&KernelClass::of_op("a")];
    assert_eq!((a.records, a.weight, a.low_ratio, a.high_ratio), (4, 3.0, 1.5, 1.5));
    // `b` has weight 1 < 3: no band; the fallback is the pooled band (every record 1.5).
    assert!(!b.classes.contains_key(&KernelClass::of_op("b")));
    assert_eq!((b.fallback.low_ratio, b.fallback.high_ratio), (1.5, 1.5));
    assert!((a.median_error - 0.5).abs() < 1e-9);
}

/// A hand-made band: `mxu` in cell (10, 4) calibrated with band x0.9..x1.2, fallback x0.5..x2.
fn hand_band() -> ModelBand {
    ModelBand {
        source: String::new(),
        classes: BTreeMap::from([(KernelClass::of_op("mxu"), band(0.9, 1.2))]),
        fallback: band(0.5, 2.0),
        domain: [(KernelClass::of_op("mxu"), cell(10, 4))].into(),
        coverage: Coverage {
            records: 0,
            inside: 0,
            share: 0.0,
        },
    }
}

#[test]
fn domain_verdicts_on_hand_made_kernels() {
    let b = hand_band();
    let inside = b.verdict(&KernelClass::of_op("mxu"), cell(10, 4));
    assert!(inside.calibrated);
    assert_eq!((inside.low_ratio, inside.high_ratio), (0.9, 1.2));
    // Same class, another cell (a decode-style matmul, 4^1 FLOPs per byte): outside, fallback band.
    let skinny = b.verdict(&KernelClass::of_op("mxu"), cell(10, 1));
    assert!(!skinny.calibrated);
    assert_eq!((skinny.low_ratio, skinny.high_ratio), (0.5, 2.0));
    // A class the fit never saw, in a cell it did see: outside.
    assert!(!b.verdict(&KernelClass::of_op("loop"), cell(10, 4)).calibrated);

    // 1000 cycles in domain, 1000 + 2000 outside: low 900 + 500 + 1000, high 1200 + 2000 + 4000, 3/4 out.
    let t = b.total(&[
        kernel("mxu", cell(10, 4), 1000),
        kernel("mxu", cell(10, 1), 1000),
        kernel("loop", cell(10, 4), 2000),
    ]);
    assert_eq!((t.total_cycles_low, t.total_cycles_high), (2400, 7200));
    assert_eq!(t.out_of_domain_fraction, 0.75);
    assert!(t.strict_fails());
    // Exactly a fifth out of domain does not fail `--strict`; a cycle more does.
    let fifth = b.total(&[kernel("mxu", cell(10, 4), 4000), kernel("loop", cell(3, 0), 1000)]);
    assert_eq!(fifth.out_of_domain_fraction, 0.2);
    assert!(!fifth.strict_fails());
    let more = b.total(&[kernel("mxu", cell(10, 4), 3999), kernel("loop", cell(3, 0), 1001)]);
    assert!(more.strict_fails());
}

#[test]
fn band_data_is_current_with_the_calibration_records() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let fresh = support::records::band_data(&root, COMMAND).unwrap();
    assert!(
        &fresh == BandData::embedded(),
        "sim-tpu/src/band/band.json is stale: run `{COMMAND}`"
    );
}

/// The band is honest: between 70 % and 90 % of held-out totals fall inside the 80 % band built without them.
#[test]
fn measured_coverage_is_honest() {
    let b = BandData::embedded();
    for (name, m) in [("hlo", &b.hlo), ("op", &b.op)] {
        assert!(m.coverage.records >= 30, "{name}: {} records", m.coverage.records);
        assert!(
            (0.7..=0.9).contains(&m.coverage.share),
            "{name}: coverage {:.3}",
            m.coverage.share
        );
    }
}
