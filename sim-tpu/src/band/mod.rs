//! An error band on every answer of `tpusim hlo` and `tpusim op`.
//!
//! Each kernel gets a calibrated-domain verdict: its class (the kernel kind of `tpusim hlo`, the op name of
//! `tpusim op`) and its shape cell ([`ShapeCell`]: HBM bytes and FLOPs per byte, each in factors of 4) were
//! covered by the records the model was fitted on, or not. Each class carries the 10th and 90th percentiles of
//! the held-out log residuals `ln(compiler / model)` of records where it ran ([`ClassBand`]); a total's 80% band
//! is the sum over its kernels of their cycles times their class's band, kernels outside the domain taking the
//! widest band of any class ([`ModelBand::fallback`]).
//!
//! The band data (`band.json` beside this file) is generated from the calibration records' fit/held-out split
//! by `cargo run --release -p sim-tpu --example band_fit -- --write` ([`build`]); a test checks it is current.

pub mod build;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::hlo::{KernelKind, ModuleCost};

/// The band's level: the share of held-out totals it is built to contain.
pub const BAND_LEVEL: f64 = 0.8;

/// `tpusim hlo --strict` and `tpusim op --strict` fail when more than this share of cycles is out of domain.
pub const STRICT_OUT_OF_DOMAIN_FRACTION: f64 = 0.2;

/// What a kernel is, for the band: the kernel kind in `tpusim hlo` (`mxu`, `loop`, ...), the op name in
/// `tpusim op` (`matmul`, `conv2d_nhwc`, ...).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KernelClass(String);

impl KernelClass {
    /// The class of a `tpusim hlo` kernel.
    pub fn of_kind(kind: KernelKind) -> KernelClass {
        let name = match kind {
            KernelKind::Loop => "loop",
            KernelKind::Reduce => "reduce",
            KernelKind::Mxu => "mxu",
            KernelKind::Unmodelled => "unmodelled",
            KernelKind::While => "while",
            KernelKind::Conditional => "conditional",
        };
        KernelClass(name.to_string())
    }

    /// The class of a `tpusim op` op (its schema name, e.g. `matmul`), or of an op family outside the
    /// TensorCore model (`sc_gather`).
    pub fn of_op(name: &str) -> KernelClass {
        KernelClass(name.to_string())
    }

    /// The class name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where a kernel sits in shape space: `floor(log4(HBM bytes))` and `floor(log4(FLOPs per HBM byte))`, the
/// latter clamped to -4..=8 (a copy has no FLOPs; a large square matmul about 4^4 per byte, a decode-style
/// matmul with M = 8 about 4^1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ShapeCell {
    /// `floor(log4(max(1, HBM bytes)))`.
    pub bytes_log4: u8,
    /// `floor(log4(FLOPs / HBM bytes))`, clamped to -4..=8.
    pub intensity_log4: i8,
}

impl ShapeCell {
    /// The cell of a kernel moving `hbm_bytes` (padded) and doing `flops`.
    pub fn of(hbm_bytes: u64, flops: u64) -> ShapeCell {
        let bytes = hbm_bytes.max(1);
        let bytes_log4 = ((63 - bytes.leading_zeros()) / 2) as u8;
        let intensity = if flops == 0 {
            -4
        } else {
            ((flops as f64 / bytes as f64).log2() / 2.0).floor().clamp(-4.0, 8.0) as i8
        };
        ShapeCell {
            bytes_log4,
            intensity_log4: intensity,
        }
    }
}

/// A class's held-out residuals: the band's ratios on the model's cycles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassBand {
    /// Held-out records that carry weight on this class (a record counts once per class it has cycles in).
    pub records: u64,
    /// The sum of those records' weights (the class's share of each record's cycles).
    pub weight: f64,
    /// `exp` of the weighted 10th percentile of `ln(compiler / model)`: the low end of the band is the model's
    /// cycles times this.
    pub low_ratio: f64,
    /// `exp` of the weighted 90th percentile: the high end.
    pub high_ratio: f64,
    /// The weighted median of `max(model/compiler, compiler/model) - 1` on those records.
    pub median_error: f64,
}

/// The band's measured coverage: held-out totals inside the band built without them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Records checked (each against a band built from the other groups' records only).
    pub records: u64,
    /// Of which the compiler's total fell inside the band.
    pub inside: u64,
    /// `inside / records`.
    pub share: f64,
}

/// The band of one model (`tpusim hlo` or `tpusim op`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelBand {
    /// What the residuals and cells were computed on.
    pub source: String,
    /// Per-class bands from held-out residuals; a class with too little held-out weight is absent (its kernels
    /// take the fallback).
    pub classes: BTreeMap<KernelClass, ClassBand>,
    /// The band of a kernel outside the domain or of a class without enough residuals: the lowest low and the
    /// highest high of any class.
    pub fallback: ClassBand,
    /// The calibrated domain: (class, cell) pairs of kernels in the records the model was fitted on.
    pub domain: BTreeSet<(KernelClass, ShapeCell)>,
    /// Coverage measured by leaving one group of records (a program, an op case) out at a time.
    pub coverage: Coverage,
}

/// The band data of both models.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandData {
    /// The command that regenerates this data.
    pub command: String,
    /// The band's level (0.8: the 10th to the 90th percentile).
    pub level: f64,
    /// `tpusim hlo`'s band.
    pub hlo: ModelBand,
    /// `tpusim op`'s band.
    pub op: ModelBand,
}

impl BandData {
    /// The embedded band data (`band.json`), parsed once.
    pub fn embedded() -> &'static BandData {
        static DATA: std::sync::OnceLock<BandData> = std::sync::OnceLock::new();
        // Checked by a unit test, so this cannot fail in a released binary.
        DATA.get_or_init(|| serde_json::from_str(include_str!("band.json")).expect("embedded band.json is valid"))
    }
}

/// One kernel's verdict, as `--json` prints it in each kernel's `domain` field.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelDomain {
    /// The kernel's class.
    pub class: KernelClass,
    /// Its shape cell.
    pub cell: ShapeCell,
    /// Whether the class and cell were covered by the fit records.
    pub calibrated: bool,
    /// The band's ratio on its cycles, low end (its class's held-out residuals, or the fallback).
    pub low_ratio: f64,
    /// High end.
    pub high_ratio: f64,
    /// Held-out median error of its class (the fallback's when outside the domain).
    pub heldout_median_error: f64,
}

/// A total with its band and the share of cycles outside the calibrated domain.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TotalBand {
    /// Low end of the 80% band, cycles.
    pub total_cycles_low: u64,
    /// High end, cycles.
    pub total_cycles_high: u64,
    /// Share of the cycles in kernels outside the calibrated domain (0 when there are no cycles).
    pub out_of_domain_fraction: f64,
}

impl TotalBand {
    /// Whether `--strict` fails: more than a fifth of the cycles out of domain.
    pub fn strict_fails(&self) -> bool {
        self.out_of_domain_fraction > STRICT_OUT_OF_DOMAIN_FRACTION
    }

    /// The band in microseconds, given the total's cycles and microseconds (the same clock).
    pub fn time_us(&self, total_cycles: u64, time_us: f64) -> (f64, f64) {
        let per = if total_cycles == 0 {
            0.0
        } else {
            time_us / total_cycles as f64
        };
        (self.total_cycles_low as f64 * per, self.total_cycles_high as f64 * per)
    }
}

/// One kernel as the band sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct BandKernel {
    /// Its class.
    pub class: KernelClass,
    /// Its cell.
    pub cell: ShapeCell,
    /// The model's cycles.
    pub cycles: u64,
}

impl ModelBand {
    /// The verdict on one kernel.
    pub fn verdict(&self, class: &KernelClass, cell: ShapeCell) -> KernelDomain {
        // Loops, conditionals and unmodelled ops are never in the domain: their cost rests on a trip count or a
        // branch the fit never checked, whatever cell a fit record's loop happened to share.
        let control = matches!(class.as_str(), "while" | "conditional" | "unmodelled");
        let calibrated = !control && self.domain.contains(&(class.clone(), cell));
        let b = match self.classes.get(class) {
            Some(b) if calibrated => b,
            _ => &self.fallback,
        };
        KernelDomain {
            class: class.clone(),
            cell,
            calibrated,
            low_ratio: b.low_ratio,
            high_ratio: b.high_ratio,
            heldout_median_error: b.median_error,
        }
    }

    /// The band of a total made of `kernels`, run one after another.
    pub fn total(&self, kernels: &[BandKernel]) -> TotalBand {
        let (mut low, mut high, mut out, mut all) = (0.0f64, 0.0f64, 0u64, 0u64);
        for k in kernels {
            let v = self.verdict(&k.class, k.cell);
            low += k.cycles as f64 * v.low_ratio;
            high += k.cycles as f64 * v.high_ratio;
            all = all.saturating_add(k.cycles);
            if !v.calibrated {
                out = out.saturating_add(k.cycles);
            }
        }
        TotalBand {
            total_cycles_low: low.floor() as u64,
            total_cycles_high: high.ceil() as u64,
            out_of_domain_fraction: if all == 0 { 0.0 } else { out as f64 / all as f64 },
        }
    }
}

/// The band's view of a costed module's kernels.
pub fn hlo_kernels(cost: &ModuleCost) -> Vec<BandKernel> {
    cost.kernels
        .iter()
        .map(|k| BandKernel {
            class: KernelClass::of_kind(k.kind),
            cell: ShapeCell::of(k.hbm_bytes, k.flops),
            cycles: k.cycles,
        })
        .collect()
}

/// A costed module's band and per-kernel verdicts (in kernel order).
pub fn hlo_band(cost: &ModuleCost, band: &ModelBand) -> (TotalBand, Vec<KernelDomain>) {
    let kernels = hlo_kernels(cost);
    let verdicts = kernels.iter().map(|k| band.verdict(&k.class, k.cell)).collect();
    (band.total(&kernels), verdicts)
}

/// One op's band and verdict (`tpusim op`): its class is its op name, its cell from its HBM bytes and FLOPs.
pub fn op_band(op_name: &str, hbm_bytes: u64, flops: u64, cycles: u64) -> (TotalBand, KernelDomain) {
    let band = &BandData::embedded().op;
    let k = BandKernel {
        class: KernelClass::of_op(op_name),
        cell: ShapeCell::of(hbm_bytes, flops),
        cycles,
    };
    (band.total(std::slice::from_ref(&k)), band.verdict(&k.class, k.cell))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_band_data_parses() {
        let b = BandData::embedded();
        assert_eq!(b.level, BAND_LEVEL);
        assert!(!b.hlo.domain.is_empty() && !b.op.domain.is_empty());
    }

    #[test]
    fn cells_by_hand() {
        // 1 MiB = 4^10 bytes; 2*1024^3 FLOPs over 6 MiB: 341 per byte, 4^4 = 256 <= 341 < 1024.
        assert_eq!(
            ShapeCell::of(6 << 20, 2 << 30),
            ShapeCell {
                bytes_log4: 11,
                intensity_log4: 4
            }
        );
        assert_eq!(ShapeCell::of(1 << 20, 0).intensity_log4, -4);
        assert_eq!(ShapeCell::of(1 << 20, 0).bytes_log4, 10);
        assert_eq!(ShapeCell::of(0, 0).bytes_log4, 0);
        // A quarter FLOP per byte (an f32 add: 1 FLOP per 12 bytes is 4^-1.79 -> -2).
        assert_eq!(ShapeCell::of(12, 1).intensity_log4, -2);
        assert_eq!(ShapeCell::of(4, 1).intensity_log4, -1);
    }
}
