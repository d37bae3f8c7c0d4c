//! One colour per stage of a training step, for every figure: the report's and demo's Gantt chart,
//! `explain pipelining`, the README figures and the lesson page (whose CSS is written from this
//! table). Stages are keyed as runs record them (the `stage` argument of a span, the JSON names of
//! the critical path).
//!
//! Okabe-Ito colours for the stages a reader compares most (SparseCore and TensorCore passes, the
//! collectives); greys and two darker tints for the rest, so no two rows share a colour.

use plotters::style::RGBColor;

/// How a stage is drawn: its key, the short row label, the legend label and the colour.
#[derive(Clone, Copy, Debug)]
pub struct StageStyle {
    /// The stage as runs record it (`sc_forward`, `all_to_all`, ...).
    pub key: &'static str,
    /// The row label of a Gantt chart.
    pub short: &'static str,
    /// The legend label.
    pub legend: &'static str,
    /// The colour.
    pub colour: RGBColor,
}

const fn style(key: &'static str, short: &'static str, legend: &'static str, colour: RGBColor) -> StageStyle {
    StageStyle {
        key,
        short,
        legend,
        colour,
    }
}

/// Every stage in the order a step runs through them (the Gantt chart's rows, top to bottom).
pub const STAGES: &[StageStyle] = &[
    style("host", "host", "host preprocessing", RGBColor(0x8C, 0x8C, 0x8C)),
    style("pcie", "PCIe", "host-to-device (PCIe)", RGBColor(0x33, 0x22, 0x88)),
    style(
        "sc_forward",
        "SC fwd",
        "SparseCore forward (lookup)",
        RGBColor(0x00, 0x72, 0xB2),
    ),
    style("all_to_all", "all-to-all", "ICI all-to-all", RGBColor(0x56, 0xB4, 0xE9)),
    style("tc_forward", "TC fwd", "TensorCore forward", RGBColor(0xE6, 0x9F, 0x00)),
    style(
        "tc_backward",
        "TC bwd",
        "TensorCore backward",
        RGBColor(0xD5, 0x5E, 0x00),
    ),
    style(
        "tc_program",
        "TC step",
        "TensorCore step (HLO)",
        RGBColor(0x88, 0x22, 0x55),
    ),
    style("all_reduce", "all-reduce", "ICI all-reduce", RGBColor(0xF0, 0xE4, 0x42)),
    style(
        "tc_update",
        "TC update",
        "dense optimizer update",
        RGBColor(0xAA, 0x44, 0x99),
    ),
    style(
        "sc_backward",
        "SC bwd",
        "SparseCore backward (update)",
        RGBColor(0x00, 0x9E, 0x73),
    ),
    style(
        "collective_latency",
        "ICI latency",
        "collective latency",
        RGBColor(0xDD, 0xCC, 0x77),
    ),
    style("kernel_launch", "launch", "kernel launches", RGBColor(0x44, 0x44, 0x44)),
];

/// The HBM row: every transfer on HBM, whatever stage moved it.
pub const HBM: StageStyle = style("hbm", "HBM", "HBM busy", RGBColor(0x11, 0x77, 0x33));

/// The staleness arrows (reddish purple).
pub const ARROW: RGBColor = RGBColor(0xCC, 0x79, 0xA7);

/// The critical path's outline and row label.
pub const CRITICAL: RGBColor = RGBColor(0x00, 0x00, 0x00);

/// The style of a recorded stage key.
pub fn stage(key: &str) -> Option<&'static StageStyle> {
    STAGES.iter().find(|s| s.key == key)
}

/// `#RRGGBB`.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// CSS custom properties `--KEY: #RRGGBB;` for every stage and the arrows (the lesson page's
/// colours).
pub fn css_vars() -> String {
    let mut out: Vec<String> = STAGES
        .iter()
        .map(|s| format!("--{}:{};", s.key.replace('_', "-"), hex(s.colour)))
        .collect();
    out.push(format!("--arrow:{};", hex(ARROW)));
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_has_its_own_colour() {
        let mut all: Vec<String> = STAGES.iter().map(|s| hex(s.colour)).collect();
        all.push(hex(HBM.colour));
        all.push(hex(ARROW));
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        assert_eq!(hex(RGBColor(0x00, 0x72, 0xB2)), "#0072B2");
        assert!(css_vars().contains("--sc-forward:#0072B2;"));
    }
}
