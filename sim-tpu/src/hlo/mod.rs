//! `tpusim hlo`: cost a whole XLA HLO module (as `jax.jit(f).lower(*args).as_text(dialect="hlo")` prints it, or an
//! optimized module) on a TPU chip.
//!
//! Pipeline: [`HloModule::parse`] (text -> module, errors with line and column) -> [`graph`] (the entry with
//! `call`s inlined) -> [`fusion`] (the kernels the TPU compiler would emit) -> [`cost`] (each kernel through the
//! TensorCore model on padded tiles; the total; argument, output and temp bytes under TPU layouts, [`bytes`]).
//!
//! ```
//! use sim_tpu::hlo::{cost_module, HloModule};
//! use sim_tpu::tensorcore::ChipModel;
//! let text = "HloModule m\n\nENTRY main {\n  a = f32[1024,1024]{1,0} parameter(0)\n  \
//!             b = f32[1024,1024]{1,0} parameter(1)\n  ROOT d = f32[1024,1024]{1,0} dot(a, b), \
//!             lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
//! let m = HloModule::parse(text).unwrap();
//! let c = cost_module(&m, &ChipModel::preset("v5e").unwrap()).unwrap();
//! assert_eq!(c.argument_bytes, 2 * 4 << 20);
//! assert_eq!(c.kernels.len(), 1);
//! assert_eq!(c.kernels[0].flops, 2 * 1024u64.pow(3));
//! ```

pub mod bytes;
pub mod corpus;
pub mod cost;
pub mod fusion;
pub mod graph;
mod inplace;
pub mod ir;
pub mod loops;
mod matvec;
pub mod ops;
pub mod parse;
mod prefetch;
mod relayout;
mod scalar;
pub mod score;

pub use cost::{cost_module, cost_module_with, hlo_params, HloParams, KernelCost, ModuleCost};
pub use fusion::KernelKind;
pub use ir::{Attr, Computation, HloModule, Instruction, Operands};

use crate::band::{KernelDomain, TotalBand};
use crate::chips::Chip;
use crate::tensorcore::ChipModel;

/// Errors reading or costing a module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HloError {
    /// The text does not follow the HLO grammar.
    #[error("line {line}, column {column}: expected {expected}, found {found}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// 1-based column (bytes).
        column: usize,
        /// What the reader expected.
        expected: String,
        /// What it found.
        found: String,
    },
    /// The text parses but is not a valid module (undefined operand, duplicate name, ...).
    #[error("line {line}, column {column}: {message}")]
    Invalid {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A valid module tpusim cannot cost (unknown chip, unbounded dims, calls nested too deeply, ...).
    #[error("{0}")]
    Unsupported(String),
}

impl HloError {
    /// Line and column, for errors that point into the text.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            HloError::Parse { line, column, .. } | HloError::Invalid { line, column, .. } => Some((*line, *column)),
            HloError::Unsupported(_) => None,
        }
    }
}

impl HloModule {
    /// Parses a whole module from HLO text.
    pub fn parse(text: &str) -> Result<HloModule, HloError> {
        parse::parse_module(text)
    }
}

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

mod erased {
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
    Ok(HloReport {
        band,
        domains,
        footprint_bytes: cost.footprint_bytes(),
        fits: cost.fits(hbm),
        hbm_capacity_bytes: hbm,
        bottleneck: cost.bottleneck(),
        warnings,
        cost,
    })
}
