//! Stage 1: the workload, the chip and its parameters resolved into a validated plan.

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
    if let Some(path) = &w.limits.file {
        let limits = if path.is_dir() {
            sim_sparsecore::limits::files::limits_from_fdo(
                &sim_sparsecore::limits::files::load_fdo_dir(path).map_err(spec_err)?,
                sc_per_device as u64,
            )
        } else {
            sim_sparsecore::limits::LimitsFile::read(path).map_err(spec_err)?.stacks
        };
        let origin = format!("limits.file = {}", path.display());
        sim_sparsecore::crosscheck::check_limit_names(&pspec, limits.keys().map(String::as_str), &origin)
            .map_err(WorkloadError::Spec)?;
        pspec = sim_sparsecore::limits::estimate::apply_limits(&pspec, &limits);
    }
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
    })
}
