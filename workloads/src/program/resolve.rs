//! Stage 1: the workload, the chip and its parameters resolved into a validated plan.

use std::collections::BTreeMap;

use sim_core::summary::{LimitsFrom, LimitsOrigin};
use sim_sparsecore::limits::resolve::ResolvedLimits;
use sim_sparsecore::limits::StackLimit;
use sim_sparsecore::model::{Optimizer, ScParams};
use sim_sparsecore::preprocess::{PreprocessSpec, Stack};
use sim_tpu::chips::{Chip, ChipSpec};
use sim_tpu::params::StepParams;
use sim_tpu::tensorcore::ChipModel;
use sim_tpu::topology::SliceShape;

use crate::ids::preprocess_spec;
use crate::spec::{Workload, WorkloadError};

/// One SparseCore stack of the plan.
#[derive(Clone, Debug)]
pub struct StackPlan {
    /// The stack as preprocessing builds it.
    pub def: Stack,
    /// Stored row width (the stack's dim).
    pub dim: u64,
    /// Bytes per element.
    pub elem_bytes: u64,
    /// Optimizer of its tables.
    pub optimizer: Optimizer,
    /// Activation width it contributes per sample (sum of its features' dims): its share of the
    /// all-to-all.
    pub width: u64,
}

/// Everything the later stages need, resolved once.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The whole workload.
    pub w: Workload,
    /// Its SparseCore part (tables placed on SparseCores and their features).
    pub sc_w: Workload,
    /// The chip with overrides applied.
    pub chip: Chip,
    /// The TensorCore model of the chip.
    pub model: ChipModel,
    /// The SparseCore model's parameters.
    pub sc: ScParams,
    /// The ICI slice.
    pub slice: SliceShape,
    /// One chip's preprocessing spec (SparseCore tables only), limits applied.
    pub pspec: PreprocessSpec,
    /// SparseCore stacks in build order.
    pub stacks: Vec<StackPlan>,
    /// TensorCores of the chip that split one compiler device's kernels (cost = device cost / this).
    pub tc_share: u64,
    /// One replica per chip (TensorCores split every kernel) or one per TensorCore.
    pub megacore: bool,
    /// Data-parallel replicas on one chip.
    pub replicas_per_chip: u64,
    /// SparseCores per compiler device.
    pub sc_per_device: u32,
    /// Compiler devices per chip.
    pub devices_per_chip: u32,
    /// Serialised table groups (SparseCore passes with a barrier between them).
    pub serial_groups: u64,
    /// Per stack name: where its limits came from.
    pub limits_from: BTreeMap<String, Vec<LimitsFrom>>,
}

impl Plan {
    /// The chip's values.
    pub fn spec(&self) -> &ChipSpec {
        &self.chip.spec
    }

    /// The step-model parameters.
    pub fn params(&self) -> &StepParams {
        &self.chip.params
    }

    /// Whether the workload has SparseCore tables.
    pub fn has_sparsecore_tables(&self) -> bool {
        !self.sc_w.tables.is_empty()
    }

    /// Activation width per sample over the SparseCore features (the all-to-all's width).
    pub fn sc_width(&self) -> u64 {
        self.stacks.iter().map(|s| s.width).sum()
    }
}

/// The SparseCore model parameters of a chip (with its step parameters).
pub fn sc_params(chip: &Chip) -> ScParams {
    let c = &chip.spec;
    ScParams {
        sparsecores: c.sparsecores_per_chip,
        tiles: c.sc_tiles_per_sc,
        lanes_f32: c.sc_simd_lanes_f32,
        lanes_bf16: c.sc_simd_lanes_bf16,
        clock_hz: c.sc_clock_mhz * 1_000_000,
        dma_granule_bytes: c.sc_dma_granule_bytes,
        tile_dma_bytes_per_cycle: chip.params.sc_tile_dma_bytes_per_cycle(),
        cycles_per_id: chip.params.sc_cycles_per_id,
        hbm_share: c.sc_hbm_share,
    }
}

fn spec_err(e: impl std::fmt::Display) -> WorkloadError {
    WorkloadError::Spec(e.to_string())
}

/// Resolves the workload on its chip (with `chip_overrides`, a chip file's JSON).
pub fn resolve(w: &Workload, chip_overrides: Option<&serde_json::Value>) -> Result<Plan, WorkloadError> {
    w.validate()?;
    let mut chip = Chip::preset(&w.chip).map_err(spec_err)?;
    if let Some(o) = chip_overrides {
        chip = chip.with_overrides(o).map_err(spec_err)?;
    }
    let spec = chip.spec.clone();
    let sc_w = w.sparsecore_part();
    if !sc_w.tables.is_empty() && spec.sparsecores_per_chip == 0 {
        return Err(WorkloadError::Spec(format!(
            "{} has no SparseCores: embedding lookups need v4, v5p, v6e or tpu7x, or tables placed on the TensorCore (placement = \"tensorcore\")",
            spec.name
        )));
    }
    let model = ChipModel::for_chip(&chip).map_err(spec_err)?;
    let sc = sc_params(&chip);
    let slice = SliceShape::for_chip(&spec, w.chips as u64, w.topology.as_deref()).map_err(spec_err)?;
    let sc_per_device = spec.sc_per_device().max(1);
    // The chip's SparseCores all work for it: a device may be half a chip (tpu7x).
    let devices_per_chip = (spec.sparsecores_per_chip / sc_per_device).max(1);
    let mut pspec = preprocess_spec(&sc_w, sc_per_device);
    pspec.global_device_count = w.chips * devices_per_chip;
    let resolved = resolve_stack_limits(&sc_w, w, &pspec, sc_per_device)?;
    pspec = resolved.spec;
    let limits_from = resolved.sources;
    if !sc_w.tables.is_empty() && !pspec.num_scs().is_power_of_two() {
        return Err(WorkloadError::Spec("chips x SparseCores must be a power of two".into()));
    }
    crate::ids::apply_table_limits(&mut pspec, &sc_w);
    let stacks = sim_sparsecore::preprocess::build_stacks(&pspec)
        .into_iter()
        .filter(|s| !s.features.is_empty())
        .map(|def| {
            let t = sc_w
                .tables
                .iter()
                .find(|t| t.name == def.tables[0].name)
                .ok_or_else(|| WorkloadError::Run(format!("stack {}: unknown table", def.name)))?;
            let width = sc_w
                .features
                .iter()
                .filter(|f| def.tables.iter().any(|x| x.name == f.table))
                .map(|f| sc_w.tables.iter().find(|t| t.name == f.table).map_or(0, |t| t.dim))
                .sum();
            Ok(StackPlan {
                dim: def.stack_embedding_dim,
                elem_bytes: t.dtype.bytes(),
                optimizer: t.optimizer,
                width,
                def,
            })
        })
        .collect::<Result<Vec<_>, WorkloadError>>()?;
    let serial = w.xla_sc_num_serialized_tables_to_optimize_hbm as usize;
    let serial_groups = if serial == 0 {
        1
    } else {
        stacks.len().div_ceil(serial).max(1)
    } as u64;
    let tc_share = (spec.tensorcores_per_chip / spec.model_device_tensorcores.max(1)).max(1) as u64;
    let megacore = w.megacore.unwrap_or(spec.megacore);
    let replicas_per_chip = if megacore { 1 } else { tc_share };
    Ok(Plan {
        w: w.clone(),
        sc_w,
        chip,
        model,
        sc,
        slice,
        pspec,
        stacks,
        tc_share,
        megacore,
        replicas_per_chip,
        sc_per_device,
        devices_per_chip,
        serial_groups,
        limits_from,
    })
}

/// The ordered table lists automatic stacking cuts stacks from (`ids::auto_stacks`: tables of one
/// padded dim, optimizer, combiner and dtype, in table order), and every table in order.
fn stacking_classes(w: &Workload) -> Vec<Vec<String>> {
    let mut classes: Vec<(String, Vec<String>)> = Vec::new();
    for t in &w.tables {
        let key = format!(
            "{}/{:?}/{:?}/{:?}",
            t.dim.div_ceil(8) * 8,
            t.optimizer,
            t.combiner,
            t.dtype
        );
        match classes.iter_mut().find(|c| c.0 == key) {
            Some(c) => c.1.push(t.name.clone()),
            None => classes.push((key, vec![t.name.clone()])),
        }
    }
    let mut out: Vec<Vec<String>> = classes.into_iter().map(|c| c.1).collect();
    out.push(w.tables.iter().map(|t| t.name.clone()).collect());
    out
}

/// The limits of every stack from the keys that name its tables (`sim_sparsecore::limits::resolve`):
/// the workload's `limits.stacks` first, then its limits file or FDO directory, over the defaults.
/// A `limits.stacks` key naming no table of the workload is an error.
fn resolve_stack_limits(
    sc_w: &Workload,
    w: &Workload,
    pspec: &PreprocessSpec,
    sc_per_device: u32,
) -> Result<ResolvedLimits, WorkloadError> {
    use sim_sparsecore::limits::files::{limits_from_fdo, load_fdo_dir};
    use sim_sparsecore::limits::resolve::{resolve_limits, KeyedLimits};
    let l = &w.limits;
    let default_ids = u64::from(l.max_ids_per_partition.unwrap_or(256));
    let default_unique = u64::from(l.max_unique_ids_per_partition.unwrap_or(256));
    let mut sources = vec![KeyedLimits {
        origin: LimitsOrigin::Workload,
        limits: l
            .stacks
            .iter()
            .map(|(k, d)| {
                let limit = StackLimit {
                    max_ids_per_partition: d.max_ids_per_partition.map_or(default_ids, u64::from),
                    max_unique_ids_per_partition: d.max_unique_ids_per_partition.map_or(default_unique, u64::from),
                    suggested_coo_buffer_size_per_device: None,
                };
                (k.clone(), limit)
            })
            .collect(),
    }];
    if let Some(path) = &l.file {
        sources.push(if path.is_dir() {
            KeyedLimits {
                origin: LimitsOrigin::Fdo,
                limits: limits_from_fdo(&load_fdo_dir(path).map_err(spec_err)?, sc_per_device as u64),
            }
        } else {
            KeyedLimits {
                origin: LimitsOrigin::File,
                limits: sim_sparsecore::limits::LimitsFile::read(path).map_err(spec_err)?.stacks,
            }
        });
    }
    let resolved = resolve_limits(pspec, &stacking_classes(sc_w), &sources);
    let all_classes = stacking_classes(w);
    let names_tables = |k: &str| {
        w.tables.iter().any(|t| t.name == k)
            || all_classes
                .iter()
                .any(|c| (2..=c.len()).any(|n| c.windows(n).any(|g| sim_sparsecore::preprocess::stack_name(g) == k)))
    };
    // Keys of a limits file or FDO stats that resolved to nothing: a typo is an error naming the file
    // and the closest valid name (a table, a stack, or tables joined by '_').
    if let Some(path) = &l.file {
        let origin = format!("limits.file = {}", path.display());
        let unknown = resolved
            .unknown
            .iter()
            .filter(|(o, _)| *o != LimitsOrigin::Workload)
            .map(|(_, k)| k.as_str());
        sim_sparsecore::crosscheck::check_limit_names(pspec, unknown, &origin).map_err(WorkloadError::Spec)?;
    }
    if let Some((_, k)) = resolved
        .unknown
        .iter()
        .find(|(o, k)| *o == LimitsOrigin::Workload && !names_tables(k))
    {
        let names: Vec<&str> = w.tables.iter().map(|t| t.name.as_str()).collect();
        return Err(WorkloadError::Spec(format!(
            "limits.stacks.{k}: names no table (a key is a table, or a stack named by its tables joined by '_'; tables: {})",
            names.join(", ")
        )));
    }
    Ok(resolved)
}
