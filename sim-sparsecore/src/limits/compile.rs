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

use serde::{Deserialize, Serialize};

/// The compiler allows SparseCore tensors up to this size.
pub const HBM_PER_TENSOR_LIMIT_BYTES: u64 = 16 << 30;
/// Largest logical replica count the compiler tries for a table (observed).
pub const MAX_REPLICAS: u64 = 16;
/// TileSpmem bytes the compiler keeps back from the "row" check (observed: TileSpmem - Available).
pub const TILESPMEM_ROW_RESERVE_BYTES: u64 = 40;

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
    /// Largest max_ids_per_partition that compiles with the other values kept.
    pub largest_max_ids: u64,
    /// Largest max_unique_ids_per_partition that compiles with the other values kept.
    pub largest_max_unique: u64,
}

fn spmem(case: &CompileCase, p: &ScCompileParams) -> (u64, u64) {
    match case.kind {
        ProgramKind::Fwd => (0, 8 * case.max_unique),
        ProgramKind::GradSgd => (36 * case.max_unique + p.spmem_fixed_overhead_bytes, 12 * case.max_ids),
    }
}

fn row_bytes(case: &CompileCase) -> u64 {
    case.max_unique * (case.dim + 1) * 4 / 8
}

fn max_split(case: &CompileCase) -> u64 {
    (case.dim / 8).max(1)
}

fn fits(case: &CompileCase, p: &ScCompileParams) -> VerdictClass {
    let padded_vocab = case.vocab.div_ceil(8 * p.num_sc_per_device) * 8 * p.num_sc_per_device;
    if padded_vocab * case.dim * 4 > HBM_PER_TENSOR_LIMIT_BYTES {
        return VerdictClass::HbmPerTensor;
    }
    let (fixed, row_dep) = spmem(case, p);
    if fixed + row_dep.div_ceil(MAX_REPLICAS) > p.tilespmem_bytes {
        return VerdictClass::SpmemReplicaCount;
    }
    if row_bytes(case).div_ceil(max_split(case)) > p.tilespmem_bytes - TILESPMEM_ROW_RESERVE_BYTES {
        return VerdictClass::TilespmemRow;
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
    let padded_vocab = case.vocab.div_ceil(8 * p.num_sc_per_device) * 8 * p.num_sc_per_device;
    let table_hbm_bytes = padded_vocab * case.dim * 4;
    let (fixed, row_dep) = spmem(case, p);
    let needed = row_bytes(case).div_ceil(max_split(case));
    let available = p.tilespmem_bytes - TILESPMEM_ROW_RESERVE_BYTES;
    let search_hi = (case.max_ids.max(case.max_unique) * 2).max(1 << 24);
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
    let message = match class {
        VerdictClass::Ok => format!(
            "compiles: Spmem {} B of {} B (fixed {fixed} + row-dependent {row_dep} / {MAX_REPLICAS} replicas), CSR row {needed} B of {available} B TileSpmem, table {table_hbm_bytes} B of {HBM_PER_TENSOR_LIMIT_BYTES} B per tensor",
            fixed + row_dep.div_ceil(MAX_REPLICAS),
            p.tilespmem_bytes
        ),
        VerdictClass::HbmPerTensor => format!(
            "SparseCore only supports 16 GiB of HBM per tensor, got {table_hbm_bytes} in f32[{},{}]. Reduce the vocabulary or the embedding dim, or shard the table over more devices.",
            padded_vocab / p.num_sc_per_device,
            case.dim
        ),
        VerdictClass::SpmemReplicaCount => format!(
            "E3001: CompileTimeSparseCoreInvalidReplicaCount: No viable logical replica count for the embedding table with metadata: max_nz_per_row = {}, max_unique_nz_per_row = {}, feature_width = {}, sample_count = {sample_count} (fixed_size_allocation_bytes = {fixed}, row_dependent_size_allocation_bytes = {row_dep}, total_spmem_size_bytes = {}). Lower max_unique_ids_per_partition to at most {largest_max_unique} (or max_ids_per_partition to at most {largest_max_ids}).",
            case.max_ids, case.max_unique, case.dim, p.tilespmem_bytes
        ),
        VerdictClass::TilespmemRow => format!(
            "Can't fit a single row. TileSpmem bytes: {}; Reserved bytes: 0; Available bytes: {available}; Row bytes: {}. Lower max_unique_ids_per_partition to at most {largest_max_unique}.",
            p.tilespmem_bytes,
            row_bytes(case)
        ),
        VerdictClass::VmemWindow | VerdictClass::Other => String::new(),
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
        largest_max_ids,
        largest_max_unique,
    }
}
