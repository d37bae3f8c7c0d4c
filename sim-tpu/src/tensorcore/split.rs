//! Fit/check splits of the op calibration records that test generalization, not recall: a random held-out
//! fraction of cases, one op class left out, and the largest cases of every class left out.

use std::collections::BTreeMap;
use std::fmt;

use super::calibration::CalibRecord;
use super::spec::OpSpec;

/// The op classes a leave-one-class-out split leaves out, one per kind of kernel the model lowers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpClass {
    /// Rank-2 matmuls (square, skinny, decode, matrix-vector).
    Matmul,
    /// Batched matmuls.
    BatchedMatmul,
    /// Matmul plus bias and activation.
    MlpLayer,
    /// 2-D convolutions.
    Conv,
    /// Unary, binary and convert elementwise ops.
    Elementwise,
    /// Reductions.
    Reduce,
    /// Transposes and relayouts.
    Transpose,
    /// Concatenations.
    Concat,
}

impl OpClass {
    /// Every class, in report order.
    pub const ALL: [OpClass; 8] = [
        OpClass::Matmul,
        OpClass::BatchedMatmul,
        OpClass::MlpLayer,
        OpClass::Conv,
        OpClass::Elementwise,
        OpClass::Reduce,
        OpClass::Transpose,
        OpClass::Concat,
    ];

    /// The class of an op.
    pub fn of(op: &OpSpec) -> OpClass {
        match op {
            OpSpec::Matmul(_) => OpClass::Matmul,
            OpSpec::BatchedMatmul(_) => OpClass::BatchedMatmul,
            OpSpec::MlpLayer(_) => OpClass::MlpLayer,
            OpSpec::Conv2dNhwc(_) => OpClass::Conv,
            OpSpec::Add(_) | OpSpec::Mul(_) | OpSpec::Exp(_) | OpSpec::Tanh(_) | OpSpec::Convert(_) => {
                OpClass::Elementwise
            }
            OpSpec::ReduceSumMinor(_) | OpSpec::ReduceSumMajor(_) | OpSpec::ReduceMaxMinor(_) => OpClass::Reduce,
            OpSpec::Transpose2d(_) | OpSpec::TransposeNchwToNhwc(_) | OpSpec::TransposeNhwcToNchw(_) => {
                OpClass::Transpose
            }
            OpSpec::Concatenate(_) => OpClass::Concat,
        }
    }

    /// The class's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Matmul => "matmul",
            OpClass::BatchedMatmul => "batched_matmul",
            OpClass::MlpLayer => "mlp_layer",
            OpClass::Conv => "conv",
            OpClass::Elementwise => "elementwise",
            OpClass::Reduce => "reduce",
            OpClass::Transpose => "transpose",
            OpClass::Concat => "concat",
        }
    }

    /// The class named `name`, if any.
    pub fn from_name(name: &str) -> Option<OpClass> {
        OpClass::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for OpClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How records are divided into a fit part and a check part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// About `percent` % of cases (the same on every chip) by a hash of the case, the window starting at
    /// `offset` % ([`CalibRecord::held_out_fold`]).
    Random {
        /// Share held out, percent.
        percent: u64,
        /// Start of the held-out window of the hash, percent.
        offset: u64,
    },
    /// Every record of one class is checked, none fitted.
    LeaveClassOut(OpClass),
    /// Within every class, the largest `percent` % of cases (by [`case_size`]) are checked, the smaller fitted.
    Size {
        /// Share held out per class, percent.
        percent: u64,
    },
}

impl Split {
    /// Parses `random:PCT`, `class:NAME` or `size:PCT`.
    pub fn parse(text: &str) -> Result<Split, String> {
        let (kind, arg) = text.split_once(':').unwrap_or((text, ""));
        let pct = |a: &str, default: u64| -> Result<u64, String> {
            if a.is_empty() {
                return Ok(default);
            }
            match a.parse::<u64>() {
                Ok(p) if (1..100).contains(&p) => Ok(p),
                _ => Err(format!("split `{text}`: percentage `{a}` must be an integer 1-99")),
            }
        };
        match kind {
            "random" => Ok(Split::Random {
                percent: pct(arg, 30)?,
                offset: 0,
            }),
            "size" => Ok(Split::Size { percent: pct(arg, 20)? }),
            "class" => OpClass::from_name(arg).map(Split::LeaveClassOut).ok_or_else(|| {
                let names: Vec<&str> = OpClass::ALL.iter().map(|c| c.name()).collect();
                format!("split `{text}`: unknown class `{arg}` (known: {})", names.join(", "))
            }),
            _ => Err(format!("split `{text}`: expected random:PCT, class:NAME or size:PCT")),
        }
    }

    /// For each record, whether it is checked (held out) rather than fitted.
    pub fn held_out(&self, records: &[CalibRecord]) -> Vec<bool> {
        match *self {
            Split::Random { percent, offset } => records.iter().map(|r| r.held_out_fold(percent, offset)).collect(),
            Split::LeaveClassOut(class) => records.iter().map(|r| OpClass::of(&r.op) == class).collect(),
            Split::Size { percent } => size_held_out(records, percent),
        }
    }
}

/// The size of a case for the size split: its logical operand and result elements (the same on every chip,
/// and no reading of the model under test).
pub fn case_size(op: &OpSpec) -> u64 {
    let prod = |dims: &[i64]| dims.iter().map(|&d| d.max(0) as u64).product::<u64>();
    let mm = |b: i64, m: i64, k: i64, n: i64| prod(&[b]) * (prod(&[m, k]) + prod(&[k, n]) + prod(&[m, n]));
    match op {
        OpSpec::Matmul(p) => mm(1, p.m, p.k, p.n),
        OpSpec::BatchedMatmul(p) => mm(p.b, p.m, p.k, p.n),
        OpSpec::MlpLayer(p) => mm(1, p.b, p.din, p.dout),
        OpSpec::Conv2dNhwc(p) => prod(&p.input) + prod(&p.kernel_hwio),
        OpSpec::Convert(p) => prod(&p.shape),
        OpSpec::Concatenate(p) => p.shapes.iter().map(|s| prod(s)).sum(),
        OpSpec::Add(p)
        | OpSpec::Mul(p)
        | OpSpec::Exp(p)
        | OpSpec::Tanh(p)
        | OpSpec::ReduceSumMinor(p)
        | OpSpec::ReduceSumMajor(p)
        | OpSpec::ReduceMaxMinor(p)
        | OpSpec::Transpose2d(p)
        | OpSpec::TransposeNchwToNhwc(p)
        | OpSpec::TransposeNhwcToNchw(p) => prod(&p.shape),
    }
}

fn size_held_out(records: &[CalibRecord], percent: u64) -> Vec<bool> {
    // Distinct cases per class, by size; the largest `percent` % of each class are held out on every chip.
    let mut by_class: BTreeMap<OpClass, Vec<(u64, String)>> = BTreeMap::new();
    for r in records {
        let entry = (case_size(&r.op), r.case_key());
        let cases = by_class.entry(OpClass::of(&r.op)).or_default();
        if !cases.contains(&entry) {
            cases.push(entry);
        }
    }
    let mut large = std::collections::BTreeSet::new();
    for cases in by_class.values_mut() {
        cases.sort();
        let n_out = (cases.len() as u64 * percent).div_ceil(100) as usize;
        for (_, key) in cases.iter().rev().take(n_out) {
            large.insert(key.clone());
        }
    }
    records.iter().map(|r| large.contains(&r.case_key())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(op: &str) -> CalibRecord {
        CalibRecord {
            id: "t".into(),
            chip: "v5e".into(),
            op: OpSpec::from_json(op).unwrap(),
            total_estimated_cycles: 1,
            entry_params: vec![],
            entry_result: String::new(),
            argument_bytes: 0,
            output_bytes: 0,
        }
    }

    #[test]
    fn case_size_counts_operands_and_result() {
        // 2x3 @ 3x4: 6 + 12 + 8 elements.
        let mm = OpSpec::from_json(r#"{"op":"matmul","params":{"M":2,"K":3,"N":4,"dtype":"float32"}}"#).unwrap();
        assert_eq!(case_size(&mm), 26);
        let add = OpSpec::from_json(r#"{"op":"add","params":{"shape":[5,7],"dtype":"float32"}}"#).unwrap();
        assert_eq!(case_size(&add), 35);
    }

    #[test]
    fn size_split_holds_out_the_largest_of_each_class() {
        let rs: Vec<CalibRecord> = [1u64, 2, 3, 4, 5]
            .iter()
            .map(|m| {
                record(&format!(
                    r#"{{"op":"matmul","params":{{"M":{m},"K":8,"N":8,"dtype":"float32"}}}}"#
                ))
            })
            .chain([record(r#"{"op":"add","params":{"shape":[4],"dtype":"float32"}}"#)])
            .collect();
        // 20 % of five matmul cases is the largest one; of one add case, that case.
        let out = Split::Size { percent: 20 }.held_out(&rs);
        assert_eq!(out, vec![false, false, false, false, true, true]);
    }

    #[test]
    fn parse_names_what_is_valid() {
        assert_eq!(Split::parse("class:conv"), Ok(Split::LeaveClassOut(OpClass::Conv)));
        assert_eq!(Split::parse("size"), Ok(Split::Size { percent: 20 }));
        let e = Split::parse("class:gemm").unwrap_err();
        assert!(e.contains("gemm") && e.contains("matmul"), "{e}");
        assert!(Split::parse("random:150").is_err());
    }
}
