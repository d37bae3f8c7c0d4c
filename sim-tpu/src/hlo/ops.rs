//! Opcode classes: what the grouping into kernels and the cost model need to know about an HLO opcode.

/// How an opcode takes part in kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// No kernel of its own and no work: parameters, constants, tuples, bitcasts, and the asynchronous DMAs of
    /// optimized modules (prefetches the compiler overlaps with compute; it gives them no estimate either).
    Free,
    /// Cheap elementwise (add, compare, select, convert, ...): fused into every consumer, recomputed if needed.
    Elementwise,
    /// Transcendental or divide: fused into a single consumer, else computed once by its own (or a sibling) kernel.
    Transcendental,
    /// Data movement the compiler fuses into loops (broadcast, reshape, slice, iota, pad, concatenate, ...).
    Movement,
    /// Layout change that costs a pass through the transpose unit when it survives (transpose, copy).
    Relayout,
    /// Reduction: the root of a reduce fusion, with its elementwise producers fused in.
    Reduce,
    /// Matmul on the MXU.
    Dot,
    /// Convolution on the MXU.
    Convolution,
    /// Not modelled: costed by the conservative rule of [`super::cost`] and listed in a warning.
    Unmodelled,
}

/// Custom-call targets that only manage buffers in optimized modules.
const BOOKKEEPING_CALLS: &[&str] = &["AllocateBuffer", "NopReturnToken", "ConcatBitcast"];

/// The class of an instruction: its opcode's, except that bookkeeping custom-calls are free.
pub fn class_of_instruction(ins: &super::ir::Instruction) -> OpClass {
    if ins.opcode == "custom-call" {
        let target = ins.attr("custom_call_target").unwrap_or("").trim_matches('"');
        if BOOKKEEPING_CALLS.contains(&target) {
            return OpClass::Free;
        }
    }
    class_of(&ins.opcode)
}

/// The class of an opcode.
pub fn class_of(opcode: &str) -> OpClass {
    match opcode {
        "parameter" | "constant" | "get-tuple-element" | "tuple" | "bitcast" | "copy-start" | "copy-done"
        | "after-all" | "add-dependency" | "opt-barrier" | "partition-id" | "replica-id" | "domain" | "slice-start"
        | "slice-done" | "async-start" | "async-update" | "async-done" => OpClass::Free,
        "add"
        | "subtract"
        | "multiply"
        | "maximum"
        | "minimum"
        | "negate"
        | "abs"
        | "select"
        | "compare"
        | "convert"
        | "and"
        | "or"
        | "xor"
        | "not"
        | "clamp"
        | "sign"
        | "floor"
        | "ceil"
        | "round-nearest-afz"
        | "round-nearest-even"
        | "shift-left"
        | "shift-right-logical"
        | "shift-right-arithmetic"
        | "is-finite"
        | "bitcast-convert"
        | "real"
        | "imag"
        | "popcnt"
        | "count-leading-zeros"
        | "reduce-precision"
        | "stochastic-convert" => OpClass::Elementwise,
        "exponential"
        | "exponential-minus-one"
        | "log"
        | "log-plus-one"
        | "tanh"
        | "logistic"
        | "rsqrt"
        | "sqrt"
        | "cbrt"
        | "divide"
        | "remainder"
        | "power"
        | "atan2"
        | "sine"
        | "cosine"
        | "tan"
        | "erf" => OpClass::Transcendental,
        "broadcast"
        | "reshape"
        | "slice"
        | "iota"
        | "pad"
        | "concatenate"
        | "reverse"
        | "dynamic-slice"
        | "dynamic-update-slice" => OpClass::Movement,
        "transpose" | "copy" => OpClass::Relayout,
        "reduce" | "reduce-window" => OpClass::Reduce,
        "dot" => OpClass::Dot,
        "convolution" => OpClass::Convolution,
        _ => OpClass::Unmodelled,
    }
}

impl OpClass {
    /// Whether instructions of this class can be fused into a consumer's kernel.
    pub fn fusible(self) -> bool {
        matches!(
            self,
            OpClass::Elementwise | OpClass::Transcendental | OpClass::Movement | OpClass::Relayout
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(class_of("dot"), OpClass::Dot);
        assert_eq!(class_of("exponential"), OpClass::Transcendental);
        assert_eq!(class_of("broadcast"), OpClass::Movement);
        assert_eq!(class_of("gather"), OpClass::Unmodelled);
        assert!(OpClass::Elementwise.fusible() && !OpClass::Reduce.fusible());
    }
}
