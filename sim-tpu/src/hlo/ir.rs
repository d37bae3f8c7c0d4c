//! The parsed form of an HLO module and its printer (XLA's text syntax; attribute values kept verbatim).

use std::fmt;

use sim_core::layout::Shape;

/// One `key=value` attribute, the value kept as written (braces and quotes included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Attribute name, e.g. `dimensions`.
    pub key: String,
    /// Value text, e.g. `{0,1}`.
    pub value: String,
}

/// What sits between an instruction's parentheses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operands {
    /// Indices of operand instructions in the same computation.
    Refs(Vec<usize>),
    /// `parameter(N)`.
    Parameter(u64),
    /// `constant(...)`: the literal text.
    Literal(String),
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// Name without the `%` sigil.
    pub name: String,
    /// Result shape as written (layout may be absent, default or tiled).
    pub shape: Shape,
    /// Opcode, e.g. `dot`, `custom-call`.
    pub opcode: String,
    /// Operands.
    pub operands: Operands,
    /// Attributes in order.
    pub attrs: Vec<Attr>,
}

impl Instruction {
    /// Operand indices (empty for parameters and constants).
    pub fn operand_ids(&self) -> &[usize] {
        match &self.operands {
            Operands::Refs(r) => r,
            _ => &[],
        }
    }

    /// The value of attribute `key`, if present.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find(|a| a.key == key).map(|a| a.value.as_str())
    }

    /// The element a `get-tuple-element` reads (its `index=`).
    pub fn tuple_index(&self) -> Option<usize> {
        self.attr("index")?.trim().parse().ok()
    }

    /// The `x`-separated integers of field `key` (`stride`, `size`, `rhs_dilate`, ...) of the `window={...}`
    /// attribute, as in `window={size=3x3 stride=2x2}`; empty when absent (values that are not integers are
    /// skipped).
    pub fn window_field(&self, key: &str) -> Vec<i64> {
        let Some(window) = self.attr("window") else {
            return Vec::new();
        };
        window
            .trim_matches(|c| c == '{' || c == '}')
            .split_whitespace()
            .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.split('x').filter_map(|d| d.parse().ok()).collect())
            .unwrap_or_default()
    }

    /// An integer list attribute such as `dimensions={0,2}` (absent -> None; malformed -> None).
    pub fn int_list(&self, key: &str) -> Option<Vec<i64>> {
        let v = self.attr(key)?.trim();
        let inner = v.strip_prefix('{')?.strip_suffix('}')?;
        if inner.trim().is_empty() {
            return Some(Vec::new());
        }
        inner.split(',').map(|x| x.trim().parse().ok()).collect()
    }
}

/// One computation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Computation {
    /// Name without `%`.
    pub name: String,
    /// Whether marked `ENTRY`.
    pub is_entry: bool,
    /// The printed signature `(p: f32[]) -> f32[]` when the text had one.
    pub signature: Option<String>,
    /// Instructions in text order (operands always refer to earlier ones).
    pub instructions: Vec<Instruction>,
    /// Index of the `ROOT` instruction (the last one when none is marked).
    pub root: usize,
    /// Attributes after the closing brace (e.g. `execution_thread="sparsecore"`).
    pub attrs: Vec<Attr>,
}

impl Computation {
    /// Parameter instructions by parameter number.
    pub fn parameters(&self) -> Vec<(u64, usize)> {
        let mut p: Vec<(u64, usize)> = self
            .instructions
            .iter()
            .enumerate()
            .filter_map(|(i, ins)| match ins.operands {
                Operands::Parameter(n) => Some((n, i)),
                _ => None,
            })
            .collect();
        p.sort();
        p
    }
}

/// A whole module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HloModule {
    /// Module name.
    pub name: String,
    /// Header attributes (`entry_computation_layout`, `input_output_alias`, ...), verbatim.
    pub attrs: Vec<Attr>,
    /// Debug sections of dumps (`FileNames`, `StackFrames`, ...), verbatim lines; they never feed a prediction.
    pub sections: Vec<Vec<String>>,
    /// Computations in text order.
    pub computations: Vec<Computation>,
    /// Index of the ENTRY computation.
    pub entry: usize,
}

impl HloModule {
    /// The ENTRY computation.
    pub fn entry_computation(&self) -> &Computation {
        &self.computations[self.entry]
    }

    /// The index of the computation an attribute names (`to_apply=%f`: spaces and the `%` sigil ignored).
    pub fn computation_index(&self, name: &str) -> Option<usize> {
        let name = name.trim().trim_start_matches('%');
        self.computations.iter().position(|c| c.name == name)
    }

    /// A computation by name.
    pub fn computation(&self, name: &str) -> Option<&Computation> {
        self.computations.iter().find(|c| c.name == name)
    }

    /// Instructions over all computations.
    pub fn instruction_count(&self) -> usize {
        self.computations.iter().map(|c| c.instructions.len()).sum()
    }
}

fn write_attrs(f: &mut fmt::Formatter<'_>, attrs: &[Attr]) -> fmt::Result {
    for a in attrs {
        write!(f, ", {}={}", a.key, a.value)?;
    }
    Ok(())
}

impl fmt::Display for HloModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HloModule {}", self.name)?;
        write_attrs(f, &self.attrs)?;
        writeln!(f)?;
        for s in &self.sections {
            writeln!(f)?;
            for line in s {
                writeln!(f, "{line}")?;
            }
        }
        for c in &self.computations {
            writeln!(f)?;
            if c.is_entry {
                write!(f, "ENTRY ")?;
            }
            write!(f, "{}", c.name)?;
            if let Some(sig) = &c.signature {
                write!(f, " {sig}")?;
            }
            writeln!(f, " {{")?;
            for (i, ins) in c.instructions.iter().enumerate() {
                let root = if i == c.root { "ROOT " } else { "" };
                write!(f, "  {root}{} = {} {}(", ins.name, ins.shape, ins.opcode)?;
                match &ins.operands {
                    Operands::Refs(r) => {
                        for (k, &o) in r.iter().enumerate() {
                            let sep = if k == 0 { "" } else { ", " };
                            write!(f, "{sep}{}", c.instructions[o].name)?;
                        }
                    }
                    Operands::Parameter(n) => write!(f, "{n}")?,
                    Operands::Literal(l) => write!(f, "{l}")?,
                }
                write!(f, ")")?;
                write_attrs(f, &ins.attrs)?;
                writeln!(f)?;
            }
            write!(f, "}}")?;
            write_attrs(f, &c.attrs)?;
            writeln!(f)?;
        }
        Ok(())
    }
}
