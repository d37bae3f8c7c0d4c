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
//! 4. Window for wide rows ("Valid window was not found ... scratchpad allocation size is N"). No
//!    calibration record fails here; the rule was read off the compiler itself (libtpu 0.0.52, the
//!    records' version, compiling AOT in a scratch venv, as reference/tpu-compiler/README.md allows)
//!    and agrees with every record. Widths are padded to 8 (pd).
//!    - grad_sgd: the fusion that deduplicates gradient rows (%accumulated_gradient_vectors_tuple)
//!      takes whole rows, never a column slice. Its window needs 32 x (pd + 1) B; the compiler
//!      offers TileSpmem - 32 - 8 x pd (the 8 x pd is the row window of the gradient gather,
//!      [1, pd] double-buffered: 8 x pd + 8 B in SC_v5p_058, SC_v6e_057). So 40 x pd + 64 <= TileSpmem:
//!      largest dim 13096 on v5p, 6544 on v6e, 13096 on tpu7x. Probed: 13096 compiles and 13104
//!      fails on v5p; 6544 / 6552 on v6e; 13088 / 13104 on tpu7x; the budget did not move with
//!      max_ids, max_unique, batch or vocabulary. Records: 8192 and 10240 compile on v5p
//!      (SC_v5p_058, _076), 4096 on v6e (SC_v6e_057), 10240 and 12288 on tpu7x (SC_tpu7x_076, _077).
//!    - fwd: the lookup's gather splits rows into column windows (SparseGather windows [96, 1024]
//!      at dim 32768 in SC_v5p_044), so the lookup has no width limit of its own: v6e compiles dim
//!      32768 and all three chips dim 262144 (small vocabulary). But when max_unique is large the
//!      compiler leaves the fused lookup for a gather plus a scatter into the activations
//!      (%activations), and the scatter takes whole rows: lanes rows (8 f32 lanes on v5p and v6e,
//!      16 on tpu7x) double-buffered, plus the tile's share of the activations (sample_count / 16
//!      tiles rows): (2 x lanes + share) x pd x 4 + 8 x lanes B <= TileSpmem + 32. Exact on every
//!      probe (v6e 2728 / 2736, v5p 6544 / 6560 at max_unique 8192 / 16384, batch 32..4096) but
//!      one: v5p compiled 6552 (not a multiple of 16) with a one-row window, which is not modelled.
//!      Which lookup the compiler picks is the least certain part: the scatter is used from
//!      32 x max_unique + 2 x min(sample_count, max_unique) + 880 x SparseCores + the Spmem
//!      constant > TileSpmem (fitted to five probed edges: v6e 8096 / 8104 at batch 256, 8072 /
//!      8080 at batch 1024, 8104 / 8112 at batch 32; v5p 16232 / 16240; tpu7x 15808 / 15816; all
//!      within one step of 8 ids; the cap keeps SC_v6e_071, batch 262144 and max_unique 256,
//!      fused, and agrees with probes at batch 4096, 65536 and 262144 near max_unique 8000).
//!      It also moves with max_ids above max_unique (v6e max_ids 16384, max_unique 8096 takes the
//!      scatter), which is not modelled.
//!
//! The 32 B the grad window budget keeps back is tpu7x's 128 B in the compiler's report (its
//! scatter budget is TileSpmem + 0, not + 32); the difference changes no verdict at the widths the
//! tpu7x compiler accepts (multiples of 16: other widths abort it in the grad_sgd scatter emitter).
//! grad_sgd widths that are not a multiple of 8 fail E3001 (no vector split), not modelled here;
//! nor is the row check with max_ids far above max_unique at wide rows (v6e, dim 4096, max_ids
//! 65536, max_unique 8096: the compiler's Row bytes are max_unique x (dim + 1) x 4, not / 8).
//!
//! Checked against 136 probes of the compiler (testdata/limits/window_probes.jsonl, written by
//! tools/sc-window-probe): 121 agree. Of the 15 that do not, two show the fwd trigger above is
//! incomplete: at wide rows the switch to the scatter comes earlier (v5p at 15608 / 15616 for dim
//! 8192, tpu7x at 15680 / 15688 for dim 4096), so it depends on the width too; and at batch 4096
//! the v6e scatter window edge is 960 / 968, not the 448 / 456 the share term gives. In both the
//! verdict here is "compiles" where the compiler fails. The test lists each disagreement.

use serde::{Deserialize, Serialize};
use sim_core::units::{bytes, bytes_of};

/// The compiler allows SparseCore tensors up to this size.
pub const HBM_PER_TENSOR_LIMIT_BYTES: u64 = 16 << 30;
/// Largest logical replica count the compiler tries for a table (observed).
pub const MAX_REPLICAS: u64 = 16;
/// TileSpmem bytes the compiler keeps back from the "row" check (observed: TileSpmem - Available).
pub const TILESPMEM_ROW_RESERVE_BYTES: u64 = 40;

/// grad_sgd: bytes per padded feature of the gradient-deduplication window (32 x (pd + 1)).
pub const GRAD_WINDOW_BYTES_PER_FEATURE: u64 = 32;
/// grad_sgd: bytes per padded feature of the gradient gather's row window, already allocated.
pub const GRAD_GATHER_ROW_BYTES_PER_FEATURE: u64 = 8;
/// grad_sgd: TileSpmem bytes kept back from the window budget (observed on v5p and v6e).
pub const GRAD_WINDOW_RESERVE_BYTES: u64 = 32;
/// fwd: bytes the activation scatter's budget exceeds TileSpmem by (observed on v5p and v6e).
pub const FWD_SCATTER_EXTRA_BYTES: u64 = 32;
/// Tiles (vector subcores) per SparseCore: the activations are shared out over them.
pub const TILES_PER_SC: u64 = 16;
/// fwd: Spmem/TileSpmem bytes per unique id the fused lookup needs (fitted, see the module doc).
pub const FWD_FUSED_BYTES_PER_UNIQUE: u64 = 32;
/// fwd: bytes per sample of the device's batch share the fused lookup needs (fitted).
pub const FWD_FUSED_BYTES_PER_SAMPLE: u64 = 2;
/// fwd: bytes per SparseCore the fused lookup needs (fitted).
pub const FWD_FUSED_BYTES_PER_SC: u64 = 880;

/// The SparseCore facts of a chip the verdict needs (from the chip preset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScCompileParams {
    /// SparseCores per compiler device (v5p 4, v6e 2, tpu7x 2).
    pub num_sc_per_device: u64,
    /// TileSpmem bytes a program can use per tile (the compiler's "TileSpmem bytes").
    pub tilespmem_bytes: u64,
    /// Constant part of the backward pass's fixed Spmem allocation.
    pub spmem_fixed_overhead_bytes: u64,
    /// f32 SIMD lanes of a tile (v5p 8, v6e 8, tpu7x 16): rows of the activation scatter's window.
    pub simd_lanes_f32: u64,
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
    /// "Valid window was not found": a whole-row window does not fit the scratchpad.
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
    /// Bytes the whole-row window needs (grad_sgd: gradient deduplication; fwd: the activation
    /// scatter when the compiler uses it), 0 when the program has none.
    pub row_window_bytes: u64,
    /// Scratchpad bytes the compiler offers that window (0 when there is none).
    pub row_window_bytes_available: u64,
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

/// Samples of the device's batch one SparseCore handles (the compiler's sample_count).
fn sample_count(case: &CompileCase, p: &ScCompileParams) -> u64 {
    case.batch / p.num_sc_per_device.max(1)
}

/// fwd: whether the compiler leaves the fused lookup for a gather plus an activation scatter.
fn fwd_uses_scatter(case: &CompileCase, p: &ScCompileParams) -> bool {
    let need = u128::from(case.max_unique) * u128::from(FWD_FUSED_BYTES_PER_UNIQUE)
        // Capped at max_unique: SC_v6e_071 (batch 262144, max_unique 256) stays fused.
        + u128::from(sample_count(case, p).min(case.max_unique))
            * u128::from(FWD_FUSED_BYTES_PER_SAMPLE)
        + u128::from(p.num_sc_per_device) * u128::from(FWD_FUSED_BYTES_PER_SC)
        + u128::from(p.spmem_fixed_overhead_bytes);
    need > u128::from(p.tilespmem_bytes)
}

/// fwd: rows of the activations each tile holds while scattering.
fn activation_rows_per_tile(case: &CompileCase, p: &ScCompileParams) -> u64 {
    sample_count(case, p).div_ceil(TILES_PER_SC)
}

/// The whole-row window: (bytes needed, bytes offered), or None when the program has none.
fn row_window(case: &CompileCase, p: &ScCompileParams) -> Option<(u64, u64)> {
    let pd = padded_dim(case);
    match case.kind {
        ProgramKind::GradSgd => Some((
            pd.saturating_add(1).saturating_mul(GRAD_WINDOW_BYTES_PER_FEATURE),
            p.tilespmem_bytes
                .saturating_sub(GRAD_WINDOW_RESERVE_BYTES)
                .saturating_sub(pd.saturating_mul(GRAD_GATHER_ROW_BYTES_PER_FEATURE)),
        )),
        ProgramKind::Fwd if fwd_uses_scatter(case, p) => {
            let rows = p
                .simd_lanes_f32
                .saturating_mul(2)
                .saturating_add(activation_rows_per_tile(case, p));
            Some((
                rows.saturating_mul(pd)
                    .saturating_mul(4)
                    .saturating_add(p.simd_lanes_f32.saturating_mul(8)),
                p.tilespmem_bytes.saturating_add(FWD_SCATTER_EXTRA_BYTES),
            ))
        }
        ProgramKind::Fwd => None,
    }
}

/// The largest padded width whose whole-row window fits, the other values kept.
fn largest_window_dim(case: &CompileCase, p: &ScCompileParams) -> u64 {
    let dim = match case.kind {
        // 32 (pd + 1) <= T - 32 - 8 pd  <=>  40 pd <= T - 64
        ProgramKind::GradSgd => {
            p.tilespmem_bytes
                .saturating_sub(GRAD_WINDOW_RESERVE_BYTES + GRAD_WINDOW_BYTES_PER_FEATURE)
                / (GRAD_WINDOW_BYTES_PER_FEATURE + GRAD_GATHER_ROW_BYTES_PER_FEATURE)
        }
        // (2 lanes + share) 4 pd + 8 lanes <= T + 32
        ProgramKind::Fwd => {
            let rows = p
                .simd_lanes_f32
                .saturating_mul(2)
                .saturating_add(activation_rows_per_tile(case, p));
            p.tilespmem_bytes
                .saturating_add(FWD_SCATTER_EXTRA_BYTES)
                .saturating_sub(p.simd_lanes_f32.saturating_mul(8))
                / rows.saturating_mul(4).max(1)
        }
    };
    dim / 8 * 8
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
    if let Some((need, offered)) = row_window(case, p) {
        if need > offered {
            return VerdictClass::VmemWindow;
        }
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
    let sample_count = sample_count(case, p);
    let (window_need, window_offered) = row_window(case, p).unwrap_or((0, 0));
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
        VerdictClass::VmemWindow if case.kind == ProgramKind::GradSgd => format!(
            "Valid window was not found for %accumulated_gradient_vectors_tuple: the fusion deduplicating gradient rows takes whole rows of f32[{}]. scratchpad allocation size is {window_offered}; the window needs {window_need} B. Lower the embedding dim to at most {} (or split the table's features into narrower tables).",
            padded_dim(case),
            largest_window_dim(case, p)
        ),
        VerdictClass::VmemWindow => format!(
            "Valid window was not found for %activations = f32[{sample_count},{}] scatter (max_unique_ids_per_partition = {} leaves the fused lookup for a gather plus a scatter of whole rows). scratchpad allocation size is {window_offered}; the window needs {window_need} B. Lower max_unique_ids_per_partition to at most {largest_max_unique} (keeps the fused lookup), or the embedding dim to at most {}.",
            padded_dim(case),
            case.max_unique,
            largest_window_dim(case, p)
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
        row_window_bytes: window_need,
        row_window_bytes_available: window_offered,
        largest_max_ids,
        largest_max_unique,
    }
}
