//! A reduction computed twice over the same value is computed once: the compiler's common-subexpression pass
//! merges two `reduce`s of the same operands over the same dimensions with the same reducer, so the second one's
//! readers read the first, and the second has no kernel.
//!
//! jax's `var(x)` computes its own `mean(x)`, so a batch norm written as `mean(x)`, `var(x)` sums `x` twice in
//! the program tpusim reads (once in the caller, once inside `_var` after inlining). Evidence (compiler corpus,
//! fit records' optimized modules): resnet_block.010 on v5e sums each convolution's result once, in the
//! convolution's kernel (`convert_reduce_fusion.2`: `(f32[96], bf16[10,56,56,96])`), then runs one variance pass
//! (`fusion.50`, 92,191 cycles); tpusim summed it twice, `_var`'s `reduce_sum.21` in the convolution's epilogue
//! and the entry's `reduce_sum.260` in a reduce kernel over the same result. The same pair is in every
//! training-mode batch norm of the conv and resnet_block families; merging it moved only those (104 records:
//! random held-out median v5p 7.0 -> 6.4 %, tpu7x 9.7 -> 9.2 %, conv.021 1.05-1.26x -> 0.96-1.13x).

use std::collections::BTreeMap;

use super::ir::{HloModule, Instruction, Operands};

/// What makes two reduce nodes the same value: their operands (a constant by its literal and shape, any other
/// value by its node), their dimensions, their shape and their reducer's opcodes.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    operands: Vec<Operand>,
    dims: String,
    shape: String,
    reducer: Vec<String>,
}

/// One operand of a reduce, as compared.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Operand {
    Node(usize),
    Constant(String, String),
}

/// The opcodes of computation `name` of `module` in order (empty when there is none).
fn reducer(module: &HloModule, name: Option<&str>) -> Vec<String> {
    name.and_then(|n| module.computation_index(n))
        .map(|c| {
            module.computations[c]
                .instructions
                .iter()
                .map(|i| i.opcode.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Merges repeated reductions of a flattened graph given as its nodes' instructions `ins` and operand lists
/// `operands` (in topological order): every reader of a repeated `reduce` reads the first one instead. Returns
/// the map from each node to the node whose value it is (itself but for the merged ones, which the caller makes
/// free: read by nothing, no kernel).
pub(super) fn merge_repeated_reductions(
    module: &HloModule,
    ins: &[&Instruction],
    operands: &mut [Vec<usize>],
) -> Vec<usize> {
    let mut same: Vec<usize> = (0..ins.len()).collect();
    let mut first: BTreeMap<Key, usize> = BTreeMap::new();
    for i in 0..ins.len() {
        for o in operands[i].iter_mut() {
            *o = same[*o];
        }
        let n = ins[i];
        if n.opcode != "reduce" {
            continue;
        }
        let ops = operands[i]
            .iter()
            .map(|&o| match &ins[o].operands {
                Operands::Literal(text) if ins[o].opcode == "constant" => {
                    Operand::Constant(text.clone(), format!("{:?}", ins[o].shape))
                }
                _ => Operand::Node(o),
            })
            .collect();
        let key = Key {
            operands: ops,
            dims: n.attr("dimensions").unwrap_or("").to_string(),
            shape: format!("{:?}", n.shape),
            reducer: reducer(module, n.attr("to_apply")),
        };
        match first.get(&key) {
            Some(&j) => same[i] = j,
            None => {
                first.insert(key, i);
            }
        }
    }
    same
}
