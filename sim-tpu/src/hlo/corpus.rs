//! The compiler corpus (`testdata/hlo/corpus/`, made by `tools/corpus/`): one record per (program, chip) with the
//! XLA TPU compiler's total, memory analysis and per-kernel estimates, and the three ways to split it that test
//! generalization: a random held-out fifth of the programs, leave-one-family-out, and size extrapolation (fit
//! on the smaller programs of each family, check on the largest fifth).

use serde::Deserialize;

use super::HloError;

/// Which side of the random split a program is on (drawn per program, so all its chips agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RandomSide {
    /// Constants may be fitted on it.
    Fit,
    /// Only checked.
    Heldout,
}

/// Where a program ranks by size within its family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeSide {
    /// Below the family's top fifth.
    Smaller,
    /// The family's top fifth by size (the compiler's flops, then argument + output bytes).
    Largest,
}

/// One compiler estimate of one kernel of the optimized module (the compiler's fusion, not tpusim's).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct CompilerKernel {
    /// Instruction name in the optimized module.
    pub name: String,
    /// Opcode (`fusion`, `copy`, ...).
    pub opcode: String,
    /// Fusion kind (`kLoop`, `kOutput`, ...) for fusions.
    #[serde(default)]
    pub fusion_kind: Option<String>,
    /// Result shape with the compiler's layout.
    pub shape: String,
    /// The compiler's `estimated_cycles`.
    pub estimated_cycles: u64,
    /// Opcodes inside the fused computation.
    #[serde(default)]
    pub called_opcodes: Vec<String>,
}

/// One (program, chip) record of the corpus.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct CorpusRecord {
    /// `<program>@<chip>`.
    pub id: String,
    /// Program name, `<family>.<index>`.
    pub program: String,
    /// The family the program was drawn from.
    pub family: String,
    /// Chip preset name.
    pub chip: String,
    /// The input file under `hlo/` (gzip-compressed pre-optimization HLO).
    pub hlo: String,
    /// Side of the random split.
    pub split: RandomSide,
    /// Side of the size split.
    pub size_split: SizeSide,
    /// False when real work carries no compiler estimate (SparseCore offload, unestimated gathers): such
    /// records are not scored on cycles, only on bytes.
    pub estimate_complete: bool,
    /// The compiler's total (entry sum plus trip count x body sum of its own loops).
    pub total_estimated_cycles: u64,
    /// `memory_analysis().argument_size_in_bytes`.
    pub argument_bytes: u64,
    /// `memory_analysis().output_size_in_bytes`.
    pub output_bytes: u64,
    /// `memory_analysis().temp_size_in_bytes`.
    pub temp_bytes: u64,
    /// The entry instructions that carry an estimate.
    #[serde(default)]
    pub kernels: Vec<CompilerKernel>,
}

/// A way to split the corpus into records constants may be fitted on and records they are checked on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split {
    /// Fit on the random `fit` side, check on `heldout`.
    Random,
    /// Fit on every family but this one (random `fit` side only), check on all of this family's records.
    LeaveFamilyOut(String),
    /// Fit on the smaller programs of each family (random `fit` side only), check on the largest fifth.
    SizeExtrapolation,
}

impl Split {
    /// Whether constants may be fitted on `r` under this split. Random held-out programs are never fitted on,
    /// so one fit per family or per size side never sees the random held-out set either.
    pub fn fits_on(&self, r: &CorpusRecord) -> bool {
        r.split == RandomSide::Fit
            && match self {
                Split::Random => true,
                Split::LeaveFamilyOut(f) => &r.family != f,
                Split::SizeExtrapolation => r.size_split == SizeSide::Smaller,
            }
    }

    /// Whether `r` is in this split's check set.
    pub fn checks(&self, r: &CorpusRecord) -> bool {
        match self {
            Split::Random => r.split == RandomSide::Heldout,
            Split::LeaveFamilyOut(f) => &r.family == f,
            Split::SizeExtrapolation => r.size_split == SizeSide::Largest,
        }
    }

    /// Parses `random`, `size` or `family:NAME`.
    pub fn parse(s: &str) -> Result<Split, HloError> {
        match s {
            "random" => Ok(Split::Random),
            "size" => Ok(Split::SizeExtrapolation),
            _ => match s.strip_prefix("family:") {
                Some(f) if !f.is_empty() => Ok(Split::LeaveFamilyOut(f.to_string())),
                _ => Err(HloError::Unsupported(format!(
                    "split `{s}`: expected `random`, `size` or `family:NAME`"
                ))),
            },
        }
    }
}

/// Parses the corpus's `records.jsonl` text (already decompressed), one record a line.
pub fn parse_records(text: &str) -> Result<Vec<CorpusRecord>, HloError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| HloError::Invalid {
                line: i + 1,
                column: e.column(),
                message: format!("corpus record: {e}"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(family: &str, split: &str, size: &str) -> CorpusRecord {
        let line = format!(
            r#"{{"id":"{family}.000@v5e","program":"{family}.000","family":"{family}","chip":"v5e","hlo":"x.hlo.txt.gz","split":"{split}","size_split":"{size}","estimate_complete":true,"total_estimated_cycles":10,"argument_bytes":1,"output_bytes":2,"temp_bytes":3}}"#
        );
        parse_records(&line).unwrap().remove(0)
    }

    #[test]
    fn splits_never_fit_on_what_they_check() {
        let recs = [
            rec("mlp", "fit", "smaller"),
            rec("mlp", "heldout", "smaller"),
            rec("mlp", "fit", "largest"),
            rec("conv", "fit", "smaller"),
            rec("conv", "heldout", "largest"),
        ];
        for s in ["random", "size", "family:mlp", "family:conv"] {
            let s = Split::parse(s).unwrap();
            for r in &recs {
                assert!(!(s.fits_on(r) && s.checks(r)), "{s:?} {r:?}");
            }
        }
        let fam = Split::parse("family:mlp").unwrap();
        assert_eq!(recs.iter().filter(|r| fam.checks(r)).count(), 3);
        assert_eq!(recs.iter().filter(|r| fam.fits_on(r)).count(), 1);
        let size = Split::SizeExtrapolation;
        assert_eq!(recs.iter().filter(|r| size.fits_on(r)).count(), 2);
        assert_eq!(recs.iter().filter(|r| size.checks(r)).count(), 2);
    }

    #[test]
    fn bad_input_names_line_and_choices() {
        let e = parse_records("\n{\"id\":1}").unwrap_err();
        assert_eq!(e.position().map(|p| p.0), Some(2));
        let e = Split::parse("families").unwrap_err().to_string();
        assert!(e.contains("family:NAME"), "{e}");
    }
}
