//! Stage 5a: the limits' verdicts per stack: compile-time (the compiler's Spmem/TileSpmem checks),
//! the static CSR buffer, and what the run's steps did.

use sim_core::summary::{RuntimeVerdict, StackVerdict};
use sim_sparsecore::limits::{compile_check, CompileCase, ProgramKind, ScCompileParams};

use super::resolve::Plan;
use super::work::RunWork;

/// Verdicts of every stack.
#[derive(Clone, Debug, Default)]
pub struct LimitsOutcome {
    /// Per stack, in build order.
    pub stacks: Vec<StackVerdict>,
    /// Largest TileSpmem a stack's program needs.
    pub tilespmem_peak: u64,
    /// Largest fill of a stack's static CSR buffer (padded ids over its size).
    pub chip_buffer_fill: f64,
}

/// Checks every stack.
pub fn check(p: &Plan, work: &RunWork) -> LimitsOutcome {
    let w = &p.w;
    let spec = p.spec();
    let b = w.batch_per_chip();
    let params = ScCompileParams {
        num_sc_per_device: p.sc_per_device as u64,
        tilespmem_bytes: spec.sc_tilespmem_bytes_available,
        scratchpad_bytes: spec.sc_tilespmem_scratchpad_bytes,
        spmem_fixed_overhead_bytes: spec.sc_spmem_fixed_overhead_bytes,
        simd_lanes_f32: u64::from(spec.sc_simd_lanes_f32),
    };
    let mut out = LimitsOutcome::default();
    for st in &p.stacks {
        let sd = &st.def;
        let max_ids = sd.max_ids_per_partition as u64;
        let max_unique = sd.max_unique_ids_per_partition as u64;
        // Each device holds its shard of the stack.
        let shard_vocab = sd.stack_vocab_size.div_ceil(p.pspec.global_device_count as u64);
        let case = |kind| CompileCase {
            kind,
            vocab: shard_vocab,
            dim: st.dim,
            batch: b / p.devices_per_chip as u64,
            max_ids,
            max_unique,
        };
        let vf = compile_check(&case(ProgramKind::Fwd), &params);
        let vb = compile_check(&case(ProgramKind::GradSgd), &params);
        out.tilespmem_peak = out
            .tilespmem_peak
            .max(vf.tilespmem_bytes_needed)
            .max(vb.tilespmem_bytes_needed);
        let run = work.stacks.get(&sd.name).cloned().unwrap_or_default();
        let (mut runtime, mut message) = (run.runtime, run.message.clone());
        // The static CSR buffer of the stack on a chip: max_ids_per_chip_per_sample x its samples
        // (stacked features are concatenated along the samples).
        let rows = b * sd.features.len() as u64;
        let chip_buffer = w.limits.max_ids_per_chip_per_sample as u64 * rows;
        out.chip_buffer_fill = out
            .chip_buffer_fill
            .max(run.padded_ids_per_chip as f64 / chip_buffer.max(1) as f64);
        if run.padded_ids_per_chip > chip_buffer {
            runtime = RuntimeVerdict::WouldAbort;
            message = format!(
                "stack {}: Got {} ids after padding but the max_ids_per_chip is set to be {chip_buffer} which is smaller (max_ids_per_chip_per_sample {} x {rows} samples); raise max_ids_per_chip_per_sample to at least {}",
                sd.name,
                run.padded_ids_per_chip,
                w.limits.max_ids_per_chip_per_sample,
                run.padded_ids_per_chip.div_ceil(rows.max(1))
            );
        }
        let compiles = vf.compiles && vb.compiles;
        out.stacks.push(StackVerdict {
            stack: sd.name.clone(),
            compiles,
            runtime: if compiles {
                runtime
            } else {
                RuntimeVerdict::DoesNotCompile
            },
            message: if !vf.compiles {
                vf.message.clone()
            } else if !vb.compiles {
                vb.message.clone()
            } else if !message.is_empty() && runtime != RuntimeVerdict::Ok {
                message
            } else {
                vf.message.clone()
            },
            max_ids_per_partition: max_ids,
            max_unique_ids_per_partition: max_unique,
            observed_max_ids: run.observed_max_ids,
            observed_max_unique_ids: run.observed_max_unique,
        });
    }
    out
}
