//! The compile-time verdict of the XLA TPU compiler for a SparseCore embedding table: the static
//! SparseCore allocations a lookup ("fwd") or a backward pass with an SGD update ("grad_sgd") needs,
//! derived from the compiler's own reports (reference/tpu-compiler/sparsecore.jsonl) and checked in
//! the order the compiler checks them:
//! 1. HBM per tensor: the table (vocabulary padded to 8 x SparseCores, f32) must be <= 16 GiB.
//! 2. Spmem (E3001): fixed + row-dependent / replicas <= total Spmem for some logical replica count
//!    up to 16. fwd: fixed 0, row-dependent 8 B x max_unique. grad_sgd: fixed 36 B x max_unique +
//!    a per-chip constant, row-dependent 12 B x max_ids.
//! 3. TileSpmem row: a CSR row of max_unique ids x (feature width + 1) f32 / 8 must fit the tile's
//!    available TileSpmem (40 B reserved) after splitting the feature vector up to width / 8 ways.
//! 4. Window for wide rows: one whole embedding row (padded feature width x 4 B), double-buffered,
//!    must fit the same available TileSpmem; vector splitting does not split the row's DMA window.
//!    No calibration record fails here (reference/chips.md lists the error, "Valid window was not
//!    found", among those the probe saw): the rule is an assumption chosen to agree with every
//!    record (v5p compiles dim 32768, v6e compiles dim 16384) and to reject the widest rows on the
//!    chip with the smallest TileSpmem (v6e, dim 32768).

use serde::{Deserialize, Serialize};
use sim_core::units::{bytes, bytes_of};

/// The compiler allows SparseCore tensors up to this size.
pub const HBM_PER_TENSOR_LIMIT_BYTES: u64 = 16 << 30;
/// Largest logical replica count the compiler tries for a table (observed).
pub const MAX_REPLICAS: u64 = 16;
/// TileSpmem bytes the compiler keeps back from the "row" check (observed: TileSpmem - Available).
pub const TILESPMEM_ROW_RESERVE_BYTES: u64 = 40;

/// Buffers of one embedding row the wide-row window holds (double buffering).
pub const ROW_WINDOW_BUFFERS: u64 = 2;

/// The SparseCore facts of a chip the verdict needs (from the chip preset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScCompileParams {
    /// SparseCores per compiler device (v5p 4, v6e 2, tpu7x 2).
    pub num_sc_per_device: u64,
    /// TileSpmem bytes a program can use per tile (the compiler's "TileSpmem bytes").
    pub tilespmem_bytes: u64,
    /// Constant part of the backward pass's fixed Spmem allocation.
    pub spmem_fixed_overhead_bytes: u64,
}

/// Which program is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgramKind {
    /// Embedding lookup.
    Fwd,
    /// Backward pass with an SGD update.
    GradSgd,
}

/// One table on one device, the configuration of the calibration records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompileCase {
    /// fwd or grad_sgd.
    pub kind: ProgramKind,
    /// Vocabulary size.
    pub vocab: u64,
    /// Feature width (embedding dim).
    pub dim: u64,
    /// Global batch (samples).
    pub batch: u64,
    /// max_ids_per_partition.
    pub max_ids: u64,
    /// max_unique_ids_per_partition.
    pub max_unique: u64,
}

/// Why a configuration does or does not compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictClass {
    /// Compiles.
    Ok,
    /// The table exceeds 16 GiB per tensor.
    HbmPerTensor,
    /// A CSR row does not fit TileSpmem.
    TilespmemRow,
    /// E3001: no viable logical replica count for Spmem.
    SpmemReplicaCount,
    /// No VMEM window for rows this wide.
    VmemWindow,
    /// Anything else.
    Other,
}

/// The verdict with the numbers behind it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompileVerdict {
    /// Whether the program compiles.
    pub compiles: bool,
    /// Class of the verdict.
    pub class: VerdictClass,
    /// The compiler-style message plus what to change.
    pub message: String,
    /// Bytes of one CSR row per tile after the widest vector split.
    pub tilespmem_bytes_needed: u64,
    /// TileSpmem bytes available for it.
    pub tilespmem_bytes_available: u64,
    /// Spmem fixed-size allocation.
    pub spmem_fixed_bytes: u64,
    /// Spmem row-dependent allocation (before dividing by replicas).
    pub spmem_row_dependent_bytes: u64,
    /// Spmem total.
    pub spmem_total_bytes: u64,
    /// Table bytes in HBM (padded vocabulary x dim x 4).
    pub table_hbm_bytes: u64,
    /// Bytes of the wide-row window: one padded embedding row, double-buffered.
    pub row_window_bytes: u64,
    /// Largest max_ids_per_partition that compiles with the other values kept.
    pub largest_max_ids: u64,
    /// Largest max_unique_ids_per_partition that compiles with the other values kept.
    pub largest_max_unique: u64,
}

fn spmem(case: &CompileCase, p: &ScCompileParams) -> (u64, u64) {
    match case.kind {
        ProgramKind::Fwd => (0, case.max_unique.saturating_mul(8)),
        ProgramKind::GradSgd => (
            case.max_unique
                .saturating_mul(36)
                .saturating_add(p.spmem_fixed_overhead_bytes),
            case.max_ids.saturating_mul(12),
        ),
    }
}

fn row_bytes(case: &CompileCase) -> u64 {
    let bytes = u128::from(case.max_unique)
        .saturating_mul(u128::from(case.dim) + 1)
        .saturating_mul(4)
        / 8;
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

fn max_split(case: &CompileCase) -> u64 {
    (case.dim / 8).max(1)
}

/// Vocabulary padded to a multiple of 8 x SparseCores (jax-tpu-embedding's padding).
fn padded_vocab(case: &CompileCase, p: &ScCompileParams) -> u64 {
    let unit = p.num_sc_per_device.max(1).saturating_mul(8);
    case.vocab.div_ceil(unit).saturating_mul(unit)
}

fn padded_dim(case: &CompileCase) -> u64 {
    case.dim.div_ceil(8).saturating_mul(8)
}

fn row_window_bytes(case: &CompileCase) -> u64 {
    padded_dim(case).saturating_mul(4 * ROW_WINDOW_BUFFERS)
}

fn fits(case: &CompileCase, p: &ScCompileParams) -> VerdictClass {
    let padded_vocab = padded_vocab(case, p);
    if padded_vocab.saturating_mul(case.dim).saturating_mul(4) > HBM_PER_TENSOR_LIMIT_BYTES {
        return VerdictClass::HbmPerTensor;
    }
    let (fixed, row_dep) = spmem(case, p);
    if fixed.saturating_add(row_dep.div_ceil(MAX_REPLICAS)) > p.tilespmem_bytes {
        return VerdictClass::SpmemReplicaCount;
    }
    if row_bytes(case).div_ceil(max_split(case)) > p.tilespmem_bytes.saturating_sub(TILESPMEM_ROW_RESERVE_BYTES) {
        return VerdictClass::TilespmemRow;
    }
    if row_window_bytes(case) > p.tilespmem_bytes.saturating_sub(TILESPMEM_ROW_RESERVE_BYTES) {
        return VerdictClass::VmemWindow;
    }
    VerdictClass::Ok
}

/// Largest value in 1..=hi (a multiple of 8 when possible) for which `ok` holds, assuming monotonicity.
fn largest(hi: u64, ok: impl Fn(u64) -> bool) -> u64 {
    if !ok(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1u64, hi.max(1));
    if ok(hi) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo >= 8 {
        lo / 8 * 8
    } else {
        lo
    }
}

/// The compile-time verdict for one table on one device.
pub fn compile_check(case: &CompileCase, p: &ScCompileParams) -> CompileVerdict {
    let class = fits(case, p);
    let padded_vocab = padded_vocab(case, p);
    let table_hbm_bytes = padded_vocab.saturating_mul(case.dim).saturating_mul(4);
    let (fixed, row_dep) = spmem(case, p);
    let needed = row_bytes(case).div_ceil(max_split(case));
    let available = p.tilespmem_bytes.saturating_sub(TILESPMEM_ROW_RESERVE_BYTES);
    let search_hi = case.max_ids.max(case.max_unique).saturating_mul(2).max(1 << 24);
    let largest_max_unique = largest(search_hi, |u| {
        fits(
            &CompileCase {
                max_unique: u,
                max_ids: case.max_ids.max(u),
                ..*case
            },
            p,
        ) == VerdictClass::Ok
    });
    let largest_max_ids = largest(search_hi, |m| {
        fits(
            &CompileCase {
                max_ids: m,
                max_unique: case.max_unique.min(m),
                ..*case
            },
            p,
        ) == VerdictClass::Ok
    });
    let sample_count = case.batch / p.num_sc_per_device.max(1);
    // The compiler splits the feature vector into 8-wide pieces for the backward pass (split =
    // width / 8 in every E3001 record); the lookup reports split factor 1.
    let split = match case.kind {
        ProgramKind::Fwd => 1,
        ProgramKind::GradSgd => max_split(case),
    };
    // With max_ids this large no max_unique fits: the advice is then about max_ids alone.
    let advice = if largest_max_unique == 0 {
        format!("No max_unique_ids_per_partition compiles with max_ids_per_partition = {}: lower max_ids_per_partition to at most {largest_max_ids}.", case.max_ids)
    } else {
        format!("Lower max_unique_ids_per_partition to at most {largest_max_unique} (or max_ids_per_partition to at most {largest_max_ids}).")
    };
    let message = match class {
        VerdictClass::Ok => format!(
            "compiles: Spmem {} (fixed {} + row-dependent {} / {MAX_REPLICAS} replicas), CSR row {} TileSpmem, table {} per tensor",
            bytes_of(fixed.saturating_add(row_dep.div_ceil(MAX_REPLICAS)), p.tilespmem_bytes),
            bytes(fixed),
            bytes(row_dep),
            bytes_of(needed, available),
            bytes_of(table_hbm_bytes, HBM_PER_TENSOR_LIMIT_BYTES)
        ),
        VerdictClass::HbmPerTensor => format!(
            "SparseCore only supports 16 GiB of HBM per tensor, got {table_hbm_bytes} in f32[{},{}]. Reduce the vocabulary or the embedding dim, or shard the table over more devices.",
            padded_vocab / p.num_sc_per_device.max(1),
            case.dim
        ),
        VerdictClass::SpmemReplicaCount => format!(
            "E3001: CompileTimeSparseCoreInvalidReplicaCount: No viable logical replica count for the embedding table with metadata: max_nz_per_row = {}, max_unique_nz_per_row = {}, feature_width = {}, sample_count = {sample_count} (last tried split factor for vector splitting = {split}, fixed_size_allocation_bytes = {fixed}, row_dependent_size_allocation_bytes = {row_dep}, total_spmem_size_bytes = {}). {advice}",
            case.max_ids, case.max_unique, case.dim, p.tilespmem_bytes
        ),
        VerdictClass::TilespmemRow => format!(
            "Can't fit a single row. TileSpmem bytes: {}; Reserved bytes: 0; Available bytes: {available}; Row bytes: {}. Lower max_unique_ids_per_partition to at most {largest_max_unique}.",
            p.tilespmem_bytes,
            row_bytes(case)
        ),
        VerdictClass::VmemWindow => format!(
            "Valid window was not found: one row of feature_width = {} (f32, {} B) double-buffered needs {} B, TileSpmem has {available} B available. Lower the embedding dim to at most {} (or split the table's features).",
            case.dim,
            padded_dim(case).saturating_mul(4),
            row_window_bytes(case),
            available / (ROW_WINDOW_BUFFERS * 4) / 8 * 8
        ),
        VerdictClass::Other => String::new(),
    };
    CompileVerdict {
        compiles: class == VerdictClass::Ok,
        class,
        message,
        tilespmem_bytes_needed: needed,
        tilespmem_bytes_available: available,
        spmem_fixed_bytes: fixed,
        spmem_row_dependent_bytes: row_dep,
        spmem_total_bytes: p.tilespmem_bytes,
        table_hbm_bytes,
        row_window_bytes: row_window_bytes(case),
        largest_max_ids,
        largest_max_unique,
    }
}
