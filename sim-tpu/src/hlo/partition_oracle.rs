//! The partitioner against the XLA TPU compiler (`tools/partition-probe/`, `testdata/shard/partition/`):
//! each record's annotated module partitioned by tpusim and costed on its slice, beside the compiler's own
//! per-device module costed the same way, the compiler's per-instruction estimate total and its
//! `memory_analysis()`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::collective::CollectiveKind;
use super::spmd::report::{report_on_slice, report_on_slice_partitioned, SliceReport};
use super::{HloError, HloModule};
use crate::chips::Chip;
use crate::topology::SliceShape;

/// The compiler's per-device memory.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Memory {
    /// Argument bytes.
    pub argument_size_in_bytes: u64,
    /// Output bytes.
    pub output_size_in_bytes: u64,
    /// Temporary bytes.
    pub temp_size_in_bytes: u64,
}

/// One probe record.
#[derive(Clone, Debug, Deserialize)]
pub struct Record {
    /// `model.pattern.chip:shape`.
    pub case: String,
    /// `mlp`, `block` or `moe`.
    pub model: String,
    /// `dp`, `fsdp`, `tp`, `moe` or `2d`.
    pub pattern: String,
    /// `chip:shape`.
    pub topology: String,
    /// The annotated module.
    pub pre_hlo: String,
    /// The compiler's per-device module.
    pub post_hlo: String,
    /// Sum of the compiler's per-instruction estimated cycles (a `while` body counted once).
    pub estimated_cycles: u64,
    /// The same with each `while` body counted once per trip (records whose module loops: windowed
    /// einsums; `tools/partition-probe/loop_estimates.py`).
    #[serde(default)]
    pub estimated_cycles_loops_counted: Option<u64>,
    /// The compiler's memory analysis.
    pub memory: Memory,
}

/// Slices whose records were looked at while the partitioner's rules were written; the others are held out.
pub const DESIGN_TOPOLOGIES: &[&str] = &["v5p:2x2x1"];

/// Collectives of one kind: how many, their bytes per device summed, the largest group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KindTotal {
    /// Instructions.
    pub count: u64,
    /// Bytes per device, summed (all-gather: gathered bytes).
    pub bytes: u64,
    /// Largest group.
    pub group: u64,
}

/// One record compared.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The case.
    pub case: String,
    /// Whether its slice was held out.
    pub held_out: bool,
    /// tpusim's partition: collectives by kind.
    pub ours: BTreeMap<CollectiveKind, KindTotal>,
    /// The compiler's per-device module: collectives by kind.
    pub compiler: BTreeMap<CollectiveKind, KindTotal>,
    /// Per-device compute cycles of tpusim's partition.
    pub compute_cycles: u64,
    /// Per-device compute cycles tpusim gives the compiler's module.
    pub compiler_module_compute_cycles: u64,
    /// The compiler's own estimate total, loops counted per trip.
    pub compiler_estimated_cycles: u64,
    /// tpusim's argument, output and temp bytes of its partition.
    pub memory: Memory,
    /// The compiler's.
    pub compiler_memory: Memory,
    /// Partitioner warnings.
    pub warnings: usize,
    /// Whether the compiler ran collectives inside `while` loops (windowed einsums: a dot looped over the
    /// devices' blocks with collective-permutes), which its per-device module then holds instead of gathers
    /// and reductions.
    pub compiler_windowed: bool,
}

/// Whether some `while` of `m` has a collective in its body.
fn loops_collectives(m: &HloModule) -> bool {
    m.computations.iter().flat_map(|c| &c.instructions).any(|i| {
        i.opcode == "while"
            && i.attr("body")
                .and_then(|b| m.computation(b.trim().trim_start_matches('%')))
                .is_some_and(|b| {
                    b.instructions
                        .iter()
                        .any(|x| CollectiveKind::of_opcode(&x.opcode).is_some())
                })
    })
}

fn totals(r: &SliceReport) -> BTreeMap<CollectiveKind, KindTotal> {
    let mut m: BTreeMap<CollectiveKind, KindTotal> = BTreeMap::new();
    for c in &r.collectives {
        let t = m.entry(c.kind).or_default();
        t.count += 1;
        t.bytes += c.bytes;
        t.group = t.group.max(c.group_size);
    }
    m
}

fn memory(r: &SliceReport) -> Memory {
    Memory {
        argument_size_in_bytes: r.device.cost.argument_bytes,
        output_size_in_bytes: r.device.cost.output_bytes,
        temp_size_in_bytes: r.device.cost.temp_bytes,
    }
}

impl Record {
    /// Partitions and costs the record's annotated module, and costs the compiler's per-device module.
    pub fn compare(&self) -> Result<Comparison, HloError> {
        let (chip_name, shape) = self
            .topology
            .split_once(':')
            .ok_or_else(|| HloError::Unsupported(format!("{}: topology without `:`", self.case)))?;
        let chip = Chip::preset(chip_name).map_err(|e| HloError::Unsupported(e.to_string()))?;
        let slice = SliceShape::from_text(&chip.spec, shape).map_err(|e| HloError::Unsupported(e.to_string()))?;
        let pre = HloModule::parse(&self.pre_hlo)?;
        let ours = report_on_slice_partitioned(&pre, &self.pre_hlo, &chip, &slice, None)?;
        let post = HloModule::parse(&self.post_hlo)?;
        let theirs = report_on_slice(&post, &chip, &slice, None)?;
        Ok(Comparison {
            case: self.case.clone(),
            held_out: !DESIGN_TOPOLOGIES.contains(&self.topology.as_str()),
            ours: totals(&ours),
            compiler: totals(&theirs),
            compute_cycles: ours.step.compute_cycles,
            compiler_module_compute_cycles: theirs.step.compute_cycles,
            compiler_estimated_cycles: self.estimated_cycles_loops_counted.unwrap_or(self.estimated_cycles),
            memory: memory(&ours),
            compiler_memory: self.memory.clone(),
            warnings: ours.partition.as_ref().map_or(0, |p| p.warnings.len()),
            compiler_windowed: loops_collectives(&post),
        })
    }
}
