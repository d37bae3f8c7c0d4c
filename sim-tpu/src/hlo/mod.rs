//! `tpusim hlo`: cost a whole XLA HLO module (as `jax.jit(f).lower(*args).as_text(dialect="hlo")` prints it, or an
//! optimized module) on a TPU chip.
//!
//! Pipeline: [`HloModule::parse`] (text -> module, errors with line and column) -> [`graph`] (the entry with
//! `call`s inlined) -> [`fusion`] (the kernels the TPU compiler would emit) -> [`cost`] (each kernel through the
//! TensorCore model on padded tiles; the total; argument, output and temp bytes under TPU layouts, [`bytes`]).
//!
//! ```
//! use sim_tpu::hlo::{cost_module, HloModule};
//! use sim_tpu::tensorcore::ChipModel;
//! let text = "HloModule m\n\nENTRY main {\n  a = f32[1024,1024]{1,0} parameter(0)\n  \
//!             b = f32[1024,1024]{1,0} parameter(1)\n  ROOT d = f32[1024,1024]{1,0} dot(a, b), \
//!             lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
//! let m = HloModule::parse(text).unwrap();
//! let c = cost_module(&m, &ChipModel::preset("v5e").unwrap()).unwrap();
//! assert_eq!(c.argument_bytes, 2 * 4 << 20);
//! assert_eq!(c.kernels.len(), 1);
//! assert_eq!(c.kernels[0].flops, 2 * 1024u64.pow(3));
//! ```

mod batchnorm;
pub mod bytes;
mod chained_layer;
pub mod collective;
mod conv_backward;
mod conv_depthwise;
mod conv_prefetch;
mod conv_result_pass;
mod conv_strided;
pub mod corpus;
pub mod cost;
mod cross_lane;
mod cse;
mod dot_chain;
mod drain;
mod epilogue_inputs;
mod epilogue_reduce;
mod epilogue_sweep;
pub mod fit;
pub mod fusion;
pub mod graph;
mod inplace;
pub mod ir;
mod loop_convert;
mod loop_state;
pub mod loops;
mod matvec;
mod mxu_layout;
mod narrow_reduce;
mod narrow_result;
mod onchip_kernel;
mod operand_prefetch;
pub mod ops;
pub mod parse;
pub mod partition;
pub mod partition_oracle;
mod passes;
mod prefetch;
mod prologue;
mod relayout;
mod report;
mod rowstats;
mod scalar;
pub mod score;
pub mod sharding;
mod spill;
pub mod spmd;
mod sublane_slice;
mod temp;
mod update_fusion;
mod vmem_copy;
mod widened_stream;
mod written_once;

pub use cost::{cost_module, cost_module_with, hlo_params, HloParams, KernelCost, ModuleCost};
pub use fusion::KernelKind;
pub use ir::{Attr, Computation, HloModule, Instruction, Operands};
pub use report::{report, report_from_cost, HloReport};

/// Errors reading or costing a module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HloError {
    /// The text does not follow the HLO grammar.
    #[error("line {line}, column {column}: expected {expected}, found {found}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// 1-based column (bytes).
        column: usize,
        /// What the reader expected.
        expected: String,
        /// What it found.
        found: String,
    },
    /// The text parses but is not a valid module (undefined operand, duplicate name, ...).
    #[error("line {line}, column {column}: {message}")]
    Invalid {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A valid module tpusim cannot cost (unknown chip, unbounded dims, calls nested too deeply, ...).
    #[error("{0}")]
    Unsupported(String),
}

impl HloError {
    /// Line and column, for errors that point into the text.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            HloError::Parse { line, column, .. } | HloError::Invalid { line, column, .. } => Some((*line, *column)),
            HloError::Unsupported(_) => None,
        }
    }
}

impl HloModule {
    /// Parses a whole module from HLO text.
    pub fn parse(text: &str) -> Result<HloModule, HloError> {
        parse::parse_module(text)
    }
}
