//! The SparseCore guide's knobs as a run report: each knob's setting and what it did in this run.

use std::collections::BTreeMap;

use crate::spec::{Dtype, MinibatchDimension, Pipelining, Workload};
use sim_core::summary::RunSummary;

/// Figures of a run the knob report needs beyond the summary.
#[derive(Clone, Debug, Default)]
pub struct KnobCosts {
    /// Stacks: name, tables.
    pub stacks: Vec<(String, usize)>,
    /// SparseCore passes the serialised table groups make.
    pub serial_groups: u64,
    /// Peak SparseCore HBM stack, bytes.
    pub sc_stack_peak: u64,
    /// Per stack: the guide's forward and backward HBM stack estimates, bytes.
    pub stack_hbm: Vec<(String, u64, u64)>,
    /// Heap held by prefetched inputs, bytes.
    pub prefetched_bytes: u64,
    /// Host time of the id bound check per step, ps.
    pub id_check_ps: u64,
    /// SparseCore time of NaN checks per step, ps.
    pub nan_check_ps: u64,
    /// SparseCore time of simulated quantization per step, ps.
    pub quantization_ps: u64,
    /// Per table: largest ids / unique ids one SparseCore sent the table in a step.
    pub table_ids_per_sc: BTreeMap<String, (u64, u64)>,
    /// Ids outside their vocabulary over the run.
    pub out_of_range: u64,
    /// Largest fill of a stack's static CSR buffer (padded ids / max_ids_per_chip_per_sample x rows).
    pub chip_buffer_fill: f64,
    /// Fixed latency of one all-to-all on the run's slice (launch and hops), ps.
    pub collective_latency_ps: u64,
}

/// The run's facts the knob report reads (it never runs anything itself).
#[derive(Clone, Debug, Default)]
pub struct KnobFacts {
    /// The run's summary.
    pub summary: RunSummary,
    /// The straggler sentence.
    pub straggler: String,
    /// Padding per buffer: name, padded bytes, unpadded bytes.
    pub padding_per_buffer: Vec<(String, u64, u64)>,
    /// Start-up time, ps.
    pub startup_ps: u64,
    /// Where the first NaN appeared (functional mode with NaN detection).
    pub nan: Option<String>,
}

fn mib(b: u64) -> String {
    sim_core::units::bytes(b)
}

fn us(ps: u64) -> String {
    sim_core::units::duration_us(ps as f64 / 1e6)
}

fn table_map(m: &BTreeMap<String, u32>) -> String {
    if m.is_empty() {
        "none".into()
    } else {
        m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
    }
}

/// Knob, setting, effect: one row per knob of the SparseCore guide.
pub fn knob_report(w: &Workload, r: &KnobFacts, c: &KnobCosts) -> Vec<(String, String, String)> {
    let mut k: Vec<(String, String, String)> = Vec::new();
    stacking_rows(w, r, c, &mut k);
    limit_rows(w, r, c, &mut k);
    table_rows(w, r, c, &mut k);
    k
}

/// The knobs of stacking and serialisation.
fn stacking_rows(w: &Workload, r: &KnobFacts, c: &KnobCosts, k: &mut Vec<(String, String, String)>) {
    #[allow(unused_variables)]
    let s = &r.summary;
    let mut row = |name: &str, setting: String, effect: String| k.push((name.to_string(), setting, effect));
    let sizes: Vec<usize> = c.stacks.iter().map(|x| x.1).collect();
    row(
        "disable_table_stacking",
        w.disable_table_stacking.to_string(),
        format!(
            "{} stacks of {} tables: {} SparseCore passes per step before minibatching and {} all-to-alls each way{}; tables per stack {:?}",
            c.stacks.len(),
            sizes.iter().sum::<usize>(),
            c.stacks.len(),
            c.stacks.len(),
            if w.chips > 1 {
                format!(
                    " ({} of collective latency per direction)",
                    us(c.stacks.len() as u64 * c.collective_latency_ps)
                )
            } else {
                String::new()
            },
            sizes
        ),
    );
    row(
        "xla_sc_num_serialized_tables_to_optimize_hbm",
        w.xla_sc_num_serialized_tables_to_optimize_hbm.to_string(),
        format!(
            "SparseCore HBM stack peak {} in {} serial group(s) (each extra group a barrier); forward / backward per stack: {}",
            mib(c.sc_stack_peak),
            c.serial_groups,
            c.stack_hbm
                .iter()
                .take(6)
                .map(|(n, f, b)| format!("{n} {} / {}", mib(*f), mib(*b)))
                .chain((c.stack_hbm.len() > 6).then(|| format!("{} more", c.stack_hbm.len() - 6)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    row(
        "tf_xla_disable_full_embedding_pipelining",
        (w.pipelining == Pipelining::Sequential).to_string(),
        format!(
            "step {}, TC/SC overlap {}{}",
            sim_core::units::duration_us(s.step_time_us),
            sim_core::units::percent(s.overlap_fraction),
            if w.pipelining == Pipelining::Pipelined {
                format!(", embeddings {}", sim_core::summary::STALENESS)
            } else {
                String::new()
            }
        ),
    );
}

/// The limit knobs and what they cost.
fn limit_rows(w: &Workload, r: &KnobFacts, c: &KnobCosts, k: &mut Vec<(String, String, String)>) {
    #[allow(unused_variables)]
    let s = &r.summary;
    let mut row = |name: &str, setting: String, effect: String| k.push((name.to_string(), setting, effect));
    let observed_ids = s.limits.iter().map(|l| l.observed_max_ids).max().unwrap_or(0);
    let observed_unique = s.limits.iter().map(|l| l.observed_max_unique_ids).max().unwrap_or(0);
    row(
        "max_ids_per_partition / max_unique_ids_per_partition",
        format!(
            "{} / {}{}",
            w.limits.max_ids_per_partition.unwrap_or(256),
            w.limits.max_unique_ids_per_partition.unwrap_or(256),
            if w.limits.file.is_some() {
                " (limits file per stack)"
            } else {
                ""
            }
        ),
        format!(
            "observed up to {observed_ids} / {observed_unique}; {} minibatch(es) per step",
            s.minibatches_per_step
        ),
    );
    row(
        "max_ids_per_chip_per_sample",
        w.limits.max_ids_per_chip_per_sample.to_string(),
        format!("static CSR buffer at most {:.0}% full", c.chip_buffer_fill * 100.0),
    );
    let tables: Vec<String> = c
        .table_ids_per_sc
        .iter()
        .filter(|(t, _)| {
            w.limits.max_ids_per_table.contains_key(*t) || w.limits.max_unique_ids_per_table.contains_key(*t)
        })
        .map(|(t, (i, u))| format!("{t}: {i} ids / {u} unique per SparseCore"))
        .collect();
    row(
        "max_ids_per_table / max_unique_ids_per_table",
        format!(
            "{} / {}",
            table_map(&w.limits.max_ids_per_table),
            table_map(&w.limits.max_unique_ids_per_table)
        ),
        if tables.is_empty() {
            "not set: stacks use the per-partition limits".into()
        } else {
            format!(
                "observed {}; they cap the stacks' per-partition limits",
                tables.join(", ")
            )
        },
    );
    row(
        "allow_id_dropping",
        w.limits.allow_id_dropping.to_string(),
        format!("{} ids dropped per step", s.dropped_ids_per_step),
    );
    row(
        "minibatching_dimension",
        format!("{:?}", w.limits.minibatching_dimension).to_lowercase(),
        format!(
            "{} pass(es) per step for the most split stack{}",
            s.minibatches_per_step,
            if w.limits.minibatching_dimension == MinibatchDimension::Sample {
                "; unique ids are deduplicated per sample group"
            } else {
                ""
            }
        ),
    );
    row(
        "host threads / maximum_parallel_iterations",
        format!("{} / {}", w.host.threads, w.host.prefetch),
        format!(
            "host busy {:.0}%; prefetched inputs hold {} of HBM heap",
            s.busy_fraction.host * 100.0,
            mib(c.prefetched_bytes)
        ),
    );
}

/// The per-table knobs (shuffle, dtype, initialisation, checks).
fn table_rows(w: &Workload, r: &KnobFacts, c: &KnobCosts, k: &mut Vec<(String, String, String)>) {
    #[allow(unused_variables)]
    let s = &r.summary;
    let mut row = |name: &str, setting: String, effect: String| k.push((name.to_string(), setting, effect));
    row("shuffle_ids", w.shuffle_ids.to_string(), r.straggler.clone());
    let bf16 = w.tables.iter().filter(|t| t.dtype == Dtype::Bf16).count();
    row(
        "table dtype",
        format!("{bf16} of {} tables bf16", w.tables.len()),
        format!("{} HBM bytes per step per chip", s.hbm_bytes_per_step),
    );
    let (padded, unpadded) = r
        .padding_per_buffer
        .iter()
        .filter(|(n, _, _)| n.starts_with("table "))
        .fold((0u64, 0u64), |a, (_, p, u)| (a.0 + p, a.1 + u));
    row(
        "padding (dims to 8 f32, vocabularies to the SparseCore count)",
        "fixed".into(),
        format!(
            "{} of table HBM is padding ({:.1}%); {:.1}% of HBM traffic per step",
            mib(padded.saturating_sub(unpadded)),
            padded.saturating_sub(unpadded) as f64 * 100.0 / padded.max(1) as f64,
            s.hbm_padding_bytes_per_step as f64 * 100.0 / s.hbm_bytes_per_step.max(1) as f64
        ),
    );
    row(
        "quantization_config_num_buckets / _low / _high",
        w.quantization.as_ref().map_or("off".into(), |q| {
            format!(
                "{} / {} / {}",
                q.quantization_config_num_buckets, q.quantization_config_low, q.quantization_config_high
            )
        }),
        if w.quantization.is_some() {
            format!(
                "+{} SparseCore time per step{}",
                us(c.quantization_ps),
                s.loss.last().map_or(String::new(), |l| format!("; final loss {l:.4}"))
            )
        } else {
            "rows used at full precision".into()
        },
    );
    row(
        "initialize_tables_on_host / enable_fast_table_initialization",
        format!(
            "{} / {}",
            w.initialize_tables_on_host, w.enable_fast_table_initialization
        ),
        format!(
            "start-up {:.1} ms ({})",
            r.startup_ps as f64 / 1e9,
            if w.enable_fast_table_initialization || !w.initialize_tables_on_host {
                "tables written on the device at HBM bandwidth"
            } else {
                "tables filled on the host and copied over PCIe"
            }
        ),
    );
    row(
        "xla_sparse_core_enable_id_bound_check",
        w.xla_sparse_core_enable_id_bound_check.to_string(),
        if w.xla_sparse_core_enable_id_bound_check {
            format!(
                "+{} host time per step; {} ids out of range",
                us(c.id_check_ps),
                c.out_of_range
            )
        } else {
            format!("{} ids out of range went unchecked", c.out_of_range)
        },
    );
    row(
        "xla_sc_detect_nan",
        w.xla_sc_detect_nan.to_string(),
        if w.xla_sc_detect_nan {
            format!(
                "+{} SparseCore time per step; {}",
                us(c.nan_check_ps),
                r.nan.clone().unwrap_or_else(|| "no NaN seen".into())
            )
        } else {
            "no checks".into()
        },
    );
}
