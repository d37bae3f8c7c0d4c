//! `tpusim hlo`'s report of a module on a chip: its cost, the capacity verdict, the bottleneck, warnings
//! and the error band from `crate::band` (kept apart from the costing so the band, which classifies
//! costed kernels, and the costing do not import each other).

use super::{cost_module, HloError, HloModule, ModuleCost};
use crate::band::{KernelDomain, TotalBand};
use crate::chips::Chip;
use crate::tensorcore::ChipModel;

/// Everything `tpusim hlo` reports for one module on one chip.
///
/// As JSON: the [`ModuleCost`] fields, each kernel with its `domain` ([`KernelDomain`]), then the capacity
/// verdict, the bottleneck, the warnings and the band ([`TotalBand`]: `total_cycles_low`, `total_cycles_high`,
/// `out_of_domain_fraction`).
#[derive(Clone, Debug, PartialEq)]
pub struct HloReport {
    /// The costs.
    pub cost: ModuleCost,
    /// HBM capacity of the chip, bytes.
    pub hbm_capacity_bytes: u64,
    /// Arguments + outputs + temporaries, bytes.
    pub footprint_bytes: u64,
    /// Whether the footprint fits HBM.
    pub fits: bool,
    /// One sentence on what limits the program.
    pub bottleneck: String,
    /// Warnings (unmodelled opcodes and the rule they were costed by).
    pub warnings: Vec<String>,
    /// The total's 80% band from held-out residuals and the share of cycles outside the calibrated domain.
    pub band: TotalBand,
    /// Each kernel's calibrated-domain verdict, in kernel order.
    pub domains: Vec<KernelDomain>,
}

impl serde::Serialize for HloReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let value = |x: &dyn erased::ToValue| x.to_value().map_err(S::Error::custom);
        let serde_json::Value::Object(mut m) = value(&self.cost)? else {
            return Err(S::Error::custom("a module cost is a JSON object"));
        };
        if let Some(serde_json::Value::Array(ks)) = m.get_mut("kernels") {
            for (k, d) in ks.iter_mut().zip(&self.domains) {
                if let serde_json::Value::Object(o) = k {
                    o.insert("domain".into(), value(d)?);
                }
            }
        }
        m.insert("hbm_capacity_bytes".into(), self.hbm_capacity_bytes.into());
        m.insert("footprint_bytes".into(), self.footprint_bytes.into());
        m.insert("fits".into(), self.fits.into());
        m.insert("bottleneck".into(), self.bottleneck.clone().into());
        m.insert("warnings".into(), value(&self.warnings)?);
        if let serde_json::Value::Object(b) = value(&self.band)? {
            m.extend(b);
        }
        m.serialize(s)
    }
}

/// Serialization to a JSON value through a trait object (one helper for the parts of `hlo`'s reports).
pub(super) mod erased {
    /// Serialization to a JSON value through a trait object (one helper for the report's parts).
    pub trait ToValue {
        fn to_value(&self) -> Result<serde_json::Value, serde_json::Error>;
    }

    impl<T: serde::Serialize> ToValue for T {
        fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
            serde_json::to_value(self)
        }
    }
}

/// Costs `module` on `chip` (a preset with any overrides) and adds the capacity verdict and the bottleneck.
pub fn report(module: &HloModule, chip: &Chip) -> Result<HloReport, HloError> {
    let model = ChipModel::for_chip(chip).map_err(|e| HloError::Unsupported(e.to_string()))?;
    let cost = cost_module(module, &model)?;
    Ok(report_from_cost(cost, chip))
}

/// The report of a module already costed on `chip`: warnings, capacity verdict, bottleneck and band.
pub fn report_from_cost(cost: ModuleCost, chip: &Chip) -> HloReport {
    let hbm = chip.spec.hbm_bytes;
    let mut warnings = Vec::new();
    if let Some(n) = cost.unmodelled.get("while") {
        warnings.push(format!(
            "while loops whose trip count cannot be read from the loop (x{n}): each costed as one trip of its body \
             (a counted loop starts its counter at a constant, adds a constant, and compares it with a constant)"
        ));
    }
    if let Some(n) = cost.unmodelled.get("conditional") {
        warnings.push(format!(
            "conditionals (x{n}): each costed as its most expensive branch (which one runs is known only at run time)"
        ));
    }
    let others: Vec<String> = cost
        .unmodelled
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "while" | "conditional"))
        .map(|(k, n)| format!("{k} x{n}"))
        .collect();
    if !others.is_empty() {
        warnings.push(format!(
            "unmodelled opcodes ({}): each costed as launch + its operand and result bytes at the HBM rate (a gather's \
             table only the rows it reads, a scatter's target once)",
            others.join(", ")
        ));
    }
    let (band, domains) = crate::band::hlo_band(&cost, &crate::band::BandData::embedded().hlo);
    HloReport {
        band,
        domains,
        footprint_bytes: cost.footprint_bytes(),
        fits: cost.fits(hbm),
        hbm_capacity_bytes: hbm,
        bottleneck: cost.bottleneck(),
        warnings,
        cost,
    }
}
