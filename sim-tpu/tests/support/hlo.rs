//! Hand-written HLO modules costed on a preset chip (shared by the hlo rule tests).

#![allow(dead_code)]

use sim_tpu::hlo::{cost_module, HloModule, ModuleCost};
use sim_tpu::tensorcore::ChipModel;

/// `text` costed on preset `chip`.
pub fn cost_on(text: &str, chip: &str) -> ModuleCost {
    cost_module(&HloModule::parse(text).unwrap(), &ChipModel::preset(chip).unwrap()).unwrap()
}

/// A module of one rank-2 dot `lhs x rhs -> out` of two parameters, contracting the left's dim 1 with the
/// right's dim 0.
pub fn dot_module(lhs: &str, rhs: &str, out: &str) -> String {
    format!(
        "HloModule m\n\nENTRY main {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  \
         ROOT d = {out} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    )
}
