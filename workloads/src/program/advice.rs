//! Stage 6: what the run says: why it does not fit (first), the bottleneck from the critical path,
//! the straggler, and warnings.

use sim_core::summary::{FitKind, FitReason, RuntimeVerdict, StackVerdict};

use super::graph::Stage;
use super::measure::Measured;
use super::memory::Memory;
use super::resolve::Plan;
use super::work::RunWork;
use crate::spec::Pipelining;

/// The bottleneck: the stage that holds most of the critical path, and the sentence saying so.
#[derive(Clone, Debug)]
pub struct Bottleneck {
    /// The stage, if the run has a critical path.
    pub stage: Option<Stage>,
    /// The sentence: misfits first, then the bottleneck and what to change.
    pub sentence: String,
}

/// Reasons the run does not fit, in order of what to fix first.
pub fn fit_reasons(p: &Plan, mem: &Memory, limits: &[StackVerdict], work: &RunWork) -> Vec<FitReason> {
    let mut out = Vec::new();
    for l in limits {
        match l.runtime {
            RuntimeVerdict::DoesNotCompile => out.push(FitReason {
                kind: FitKind::CompileLimits,
                message: format!("stack {}: {}", l.stack, l.message),
                needed_bytes: None,
                capacity_bytes: None,
            }),
            RuntimeVerdict::WouldAbort => out.push(FitReason {
                kind: FitKind::RuntimeLimits,
                message: format!("stack {} would abort: {}", l.stack, l.message),
                needed_bytes: None,
                capacity_bytes: None,
            }),
            _ => {}
        }
    }
    for (space, kind) in [
        ("hbm", FitKind::Hbm),
        ("vmem", FitKind::Vmem),
        ("tilespmem", FitKind::Tilespmem),
    ] {
        let (Some(&need), Some(&cap)) = (mem.peak.get(space), mem.capacity.get(space)) else {
            continue;
        };
        if need > cap {
            out.push(FitReason {
                kind,
                message: format!("needs {} ({need} B)", sim_core::units::bytes_of(need, cap)),
                needed_bytes: Some(need),
                capacity_bytes: Some(cap),
            });
        }
    }
    if p.w.xla_sparse_core_enable_id_bound_check && work.out_of_range_count > 0 {
        out.push(FitReason {
            kind: FitKind::IdBoundCheck,
            message: format!("{} ids outside their table's vocabulary", work.out_of_range_count),
            needed_bytes: None,
            capacity_bytes: None,
        });
    }
    out
}

/// Whether the busiest SparseCore is a straggler (15% over the mean SparseCore).
pub fn straggling(m: &Measured) -> Option<(usize, f64)> {
    let mean = m.busy.sc;
    let (i, &peak) = m
        .sc_each
        .iter()
        .enumerate()
        .fold((0, &0.0), |acc, x| if x.1 > acc.1 { x } else { acc });
    (peak > mean * 1.15).then_some((i, peak))
}

fn advice(stage: Stage, p: &Plan, m: &Measured) -> String {
    match stage {
        Stage::ScForward | Stage::ScBackward if straggling(m).is_some() => {
            "its busiest SparseCore is a straggler: spread hot ids (shuffle_ids = true) or give the hottest features their own tables".into()
        }
        Stage::ScForward | Stage::ScBackward => match p.w.pipelining {
            Pipelining::Sequential => "enable pipelining to overlap it with the TensorCore, or shard the tables over more chips".into(),
            Pipelining::Pipelined => "shard the tables over more chips, use bf16 tables, or cut the valency of the heaviest features".into(),
        },
        Stage::AllToAll => format!(
            "the embedding all-to-all on the {} slice: place small tables on the TensorCore (placement = \"tensorcore\"), use bf16 tables, or a slice with wraparound in every dimension",
            p.slice
        ),
        Stage::AllReduce => "all-reduce the dense gradients in bf16 (dense.gradient_dtype = \"bf16\"), or fewer dense parameters".into(),
        Stage::CollectiveLatency => "fewer, larger collectives: stack tables (fewer all-to-alls) or fewer chips on the slice's longest dimension".into(),
        Stage::TcForward | Stage::TcBackward => {
            // Pipelining hides only the SparseCore time the critical path holds.
            let sc: u64 = m
                .critical_path
                .iter()
                .filter(|(s, _)| matches!(s, Stage::ScForward | Stage::ScBackward))
                .map(|x| x.1)
                .sum();
            if p.w.pipelining == Pipelining::Sequential && sc * 7 >= m.step_ps {
                "enable pipelining to hide SparseCore time behind it, use a larger batch per chip for MXU efficiency, or narrower dense layers".into()
            } else {
                "use a larger batch per chip for MXU efficiency, more chips, or narrower dense layers".into()
            }
        }
        Stage::TcUpdate => {
            if p.replicas_per_chip > 1 {
                "one replica per chip (megacore = true) splits the update over both TensorCores; or fewer dense parameters".into()
            } else {
                "fewer dense parameters or a larger batch per chip to amortise the update".into()
            }
        }
        Stage::KernelLaunch => "a larger batch per chip amortises the fixed cost of each kernel".into(),
        Stage::TcProgram => "see `tpusim hlo` on your program for the kernels that dominate it; more chips shrink the batch each replica runs".into(),
        Stage::Host => host_advice(p, m),
        Stage::Pcie => "send fewer ids per step (dedup on the host) or use a chip with a faster host link".into(),
    }
}

/// Host-bound: how many preprocessing threads would bring the host's time per step under the
/// busiest device unit's (host time scales as 1/threads).
fn host_advice(p: &Plan, m: &Measured) -> String {
    let threads = p.w.host.threads.max(1) as f64;
    let step = m.step_ps as f64;
    let host = m.busy.host * step;
    let sc = m.sc_each.iter().copied().fold(0.0, f64::max);
    let (unit, busy) = if m.busy.tc >= sc {
        ("TensorCore", m.busy.tc)
    } else {
        ("busiest SparseCore", sc)
    };
    let device = busy * step;
    if device <= 0.0 || host <= device {
        return "add host preprocessing threads (host.threads) or prefetch depth".into();
    }
    let need = (threads * host / device).ceil() as u64;
    format!(
        "the host preprocesses a step in {} with host.threads = {}; about {need} threads would bring that under the {unit}'s {} per step",
        us(host as u64),
        p.w.host.threads,
        us(device as u64)
    )
}

fn us(ps: u64) -> String {
    sim_core::units::duration_us(ps as f64 / 1e6)
}

/// The bottleneck sentence: what does not fit comes first; then the stage holding most of the
/// steady-state critical path, the stages after it, and what to change.
pub fn bottleneck(p: &Plan, m: &Measured, reasons: &[FitReason]) -> Bottleneck {
    let mut sentence = String::new();
    if !reasons.is_empty() {
        let what: Vec<&str> = reasons.iter().map(|r| r.message.trim_end_matches('.')).collect();
        sentence.push_str(&format!("Does not fit: {}. Once it fits: ", what.join("; ")));
    }
    let Some(&(stage, ps)) = m.critical_path.first() else {
        sentence.push_str("No steady-state step to measure.");
        return Bottleneck { stage: None, sentence };
    };
    let others: Vec<String> = m
        .critical_path
        .iter()
        .skip(1)
        .take(3)
        .filter(|(_, t)| *t > 0)
        .map(|(s, t)| format!("{} {}", s.describe(), us(*t)))
        .collect();
    let straggler = match (stage, straggling(m)) {
        (Stage::ScForward | Stage::ScBackward, Some((i, b))) => format!(" (SC {i} busy {:.0}%)", b * 100.0),
        _ => String::new(),
    };
    sentence.push_str(&format!(
        "{}-bound: {} of the {} step on the critical path{}{}; {}.",
        stage.describe(),
        us(ps),
        us(m.step_ps),
        straggler,
        if others.is_empty() {
            String::new()
        } else {
            format!(", then {}", others.join(", "))
        },
        if reasons.is_empty() {
            advice(stage, p, m)
        } else {
            // A larger batch would not fit either: advise only what does not grow it.
            advice(stage, p, m)
                .replace(
                    "use a larger batch per chip for MXU efficiency, more chips, or narrower dense layers",
                    "use more chips or narrower dense layers",
                )
                .replace(
                    ", use a larger batch per chip for MXU efficiency, or narrower dense layers",
                    ", or narrower dense layers",
                )
        }
    ));
    Bottleneck {
        stage: Some(stage),
        sentence,
    }
}

/// Which SparseCore partition is the straggler, and why.
pub fn straggler_text(p: &Plan, work: &RunWork) -> String {
    let w = &p.w;
    if !p.has_sparsecore_tables() {
        return "no SparseCore tables".into();
    }
    let st = &work.straggler;
    let parts_per_chip = p.spec().sparsecores_per_chip.max(1);
    // One id every chip sends the same partition cannot be spread by shuffling.
    let single_id = match &st.hottest {
        Some((table, id, n)) if (*n * w.chips as u64) as f64 >= 0.5 * st.excess_ids => Some(format!(
            "one id (table {table}, id {id}, in {n} of the chip's samples) makes most of it; shuffling cannot split one id: minibatch along samples (limits.minibatching_dimension = \"sample\"), lower its valency or give it its own table"
        )),
        _ => None,
    };
    if st.ratio > 1.25 {
        format!(
            "SC {} of chip {} (partition {}) is the straggler: {:.2}x the mean partition's ids; {}",
            st.partition % parts_per_chip,
            st.chip,
            st.partition,
            st.ratio,
            match (&single_id, w.shuffle_ids) {
                (Some(s), _) => s.clone(),
                (None, false) => "hot ids share its partition; shuffle_ids = true spreads them".into(),
                (None, true) => "ids are already shuffled: several hot ids still share it; raise the number of chips or split the hottest features".into(),
            }
        )
    } else {
        format!(
            "no straggler: the busiest partition (SC {} of chip {}) takes {:.2}x the mean partition's ids",
            st.partition % parts_per_chip,
            st.chip,
            st.ratio.max(1.0)
        )
    }
}

/// Advice that is not a verdict: stacking outside the guide's range, out of HBM, ids out of range.
pub fn warnings(p: &Plan, work: &RunWork, mem: &Memory) -> Vec<String> {
    let w = &p.w;
    let mut out = Vec::new();
    let off: Vec<String> = p
        .stacks
        .iter()
        .filter(|s| !(5..=100).contains(&s.def.tables.len()))
        .map(|s| {
            let n = s.def.tables.len();
            format!("{} ({n} table{})", s.def.name, if n == 1 { "" } else { "s" })
        })
        .collect();
    if !off.is_empty() && p.sc_w.tables.len() >= 5 {
        out.push(format!(
            "{} of {} stacks hold fewer than 5 or more than 100 tables, outside the 5-100 the SparseCore guide recommends{}: {}",
            off.len(),
            p.stacks.len(),
            if w.disable_table_stacking { " (disable_table_stacking = true)" } else { "" },
            off.join(", ")
        ));
    }
    let (need, cap) = (mem.peak["hbm"], mem.capacity["hbm"]);
    if need > cap {
        out.push(format!(
            "out of HBM: {need} B needed of {cap} B ({}); shard over more chips, serialise tables (xla_sc_num_serialized_tables_to_optimize_hbm), lower maximum_parallel_iterations or the limits",
            mem.breakdown
                .iter()
                .map(|(k, v)| format!("{k} {v} B"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if work.out_of_range_count > 0 {
        let first = work
            .out_of_range
            .iter()
            .map(|(step, o)| {
                format!(
                    "step {step} feature {} sample {}: id {} in table {} of {} rows",
                    o.feature, o.sample, o.id, o.table, o.vocab
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        out.push(if w.xla_sparse_core_enable_id_bound_check {
            format!(
                "id bound check failed: {} ids outside their table's vocabulary ({first})",
                work.out_of_range_count
            )
        } else {
            format!(
                "{} ids outside their table's vocabulary went unchecked ({first}); set xla_sparse_core_enable_id_bound_check = true to stop on them",
                work.out_of_range_count
            )
        });
    }
    out
}
