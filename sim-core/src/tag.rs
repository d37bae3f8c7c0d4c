//! A span's typed identity: which unit ran it, which stage of a training step it belongs to, which
//! step. The step builder sets it on every task it wires; measurement, figures and traces read it,
//! so no consumer decides what a span is from its thread or category text, which stay display text.
//!
//! This is vocabulary, not chip facts: the kinds of units and stages a step is made of. It lives
//! here, beside the recorder, so traces and reports (which depend on sim-core alone) read the same
//! type the builder writes.

use serde::{Deserialize, Serialize};

/// What a task's time is spent on (the critical path is told in these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Host preprocessing.
    Host,
    /// Host-to-device transfer.
    Pcie,
    /// SparseCore forward (lookups).
    ScForward,
    /// SparseCore backward (gradient reduction and table update).
    ScBackward,
    /// All-to-all of embedding activations and gradients over ICI.
    AllToAll,
    /// All-reduce of dense gradients over ICI.
    AllReduce,
    /// Fixed collective costs: launch and per-hop latency.
    CollectiveLatency,
    /// TensorCore forward kernels.
    TcForward,
    /// TensorCore backward kernels.
    TcBackward,
    /// Gradient reduction between replicas and the optimizer update.
    TcUpdate,
    /// Fixed cost of each TensorCore kernel.
    KernelLaunch,
    /// The user's HLO step on the TensorCore (forward, backward and optimizer together).
    TcProgram,
}

impl Stage {
    /// The JSON name (also the figures' palette key).
    pub fn key(self) -> &'static str {
        match self {
            Stage::Host => "host",
            Stage::Pcie => "pcie",
            Stage::ScForward => "sc_forward",
            Stage::ScBackward => "sc_backward",
            Stage::AllToAll => "all_to_all",
            Stage::AllReduce => "all_reduce",
            Stage::CollectiveLatency => "collective_latency",
            Stage::TcForward => "tc_forward",
            Stage::TcBackward => "tc_backward",
            Stage::TcUpdate => "tc_update",
            Stage::KernelLaunch => "kernel_launch",
            Stage::TcProgram => "tc_program",
        }
    }

    /// Words for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::Host => "host input pipeline",
            Stage::Pcie => "host-to-device transfer",
            Stage::ScForward => "SparseCore lookups",
            Stage::ScBackward => "SparseCore gradient updates",
            Stage::AllToAll => "ICI all-to-all of embeddings",
            Stage::AllReduce => "ICI all-reduce of dense gradients",
            Stage::CollectiveLatency => "collective latency (launch and hops)",
            Stage::TcForward => "TensorCore forward",
            Stage::TcBackward => "TensorCore backward",
            Stage::TcUpdate => "dense optimizer update",
            Stage::KernelLaunch => "TensorCore kernel launches",
            Stage::TcProgram => "TensorCore step (your HLO)",
        }
    }

    /// Whether the stage is a SparseCore pass.
    pub fn is_sparsecore(self) -> bool {
        matches!(self, Stage::ScForward | Stage::ScBackward)
    }
}

/// Where a span ran: a unit the engine schedules, trace detail inside one, or a row derived from the
/// run (the critical path, the measured window).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Unit {
    /// The host's preprocessing.
    Host,
    /// The host-to-device link (PCIe).
    HostLink,
    /// The chip's TensorCore(s).
    TensorCore,
    /// A phase of a TensorCore kernel as the TensorCore model computes it (trace detail, not
    /// scheduled).
    TensorCorePhase,
    /// SparseCore `n` of the chip.
    SparseCore(u32),
    /// Tile `tile` of SparseCore `sc` (trace detail: the pass split over its tiles).
    SparseCoreTile {
        /// The SparseCore.
        sc: u32,
        /// The tile.
        tile: u32,
    },
    /// The chip's HBM.
    Hbm,
    /// One ICI link group of the chip (index into the slice's link groups).
    IciLink(u32),
    /// A collective's fixed latency (launch and hops), on no resource.
    IciLatency,
    /// A piece of the critical path, lying in a task of this stage.
    CriticalPath(Stage),
    /// The steady-state window the run's fractions are measured in.
    MeasuredWindow,
}

impl Unit {
    /// Whether the engine scheduled the span's work here (not trace detail, not a derived row).
    pub fn is_scheduled(self) -> bool {
        !matches!(
            self,
            Unit::TensorCorePhase | Unit::SparseCoreTile { .. } | Unit::CriticalPath(_) | Unit::MeasuredWindow
        )
    }

    /// Where its rows go within a chip in a trace: host work, host link, TensorCore, SparseCores,
    /// memory, links, then rows derived from the run.
    pub fn rank(self) -> u8 {
        match self {
            Unit::Host => 0,
            Unit::HostLink => 1,
            Unit::TensorCore | Unit::TensorCorePhase => 2,
            Unit::SparseCore(_) | Unit::SparseCoreTile { .. } => 3,
            Unit::Hbm => 4,
            Unit::IciLink(_) | Unit::IciLatency => 5,
            Unit::CriticalPath(_) | Unit::MeasuredWindow => 6,
        }
    }
}

/// A span's typed identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SpanTag {
    /// Where it ran.
    pub unit: Unit,
    /// The stage of the step it belongs to (none for the measured window).
    pub stage: Option<Stage>,
    /// The step it belongs to (none for rows spanning steps).
    pub step: Option<u32>,
    /// Which kernel of the TensorCore program (its index in program order), for kernel spans.
    pub kernel: Option<u32>,
}

impl SpanTag {
    /// A span of `stage` of step `step` on `unit`.
    pub fn new(unit: Unit, stage: Stage, step: usize) -> Self {
        SpanTag {
            unit,
            stage: Some(stage),
            step: Some(step as u32),
            kernel: None,
        }
    }
    /// The same span, on another unit (trace detail inside it).
    pub fn on(self, unit: Unit) -> Self {
        SpanTag { unit, ..self }
    }
}
