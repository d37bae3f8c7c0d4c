//! Errors of parsing, validating and sizing shapes.

/// What went wrong with a shape, with where in the text when parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The text does not follow the grammar.
    #[error("at byte {offset}: expected {expected}, found {found}")]
    Parse {
        /// Byte offset into the input.
        offset: usize,
        /// What the parser expected there.
        expected: String,
        /// What it found (a short excerpt, or "end of input").
        found: String,
    },
    /// The shape parses but breaks one of XLA's rules.
    #[error("invalid shape{}: {message}", at.map(|o| format!(" (at byte {o})")).unwrap_or_default())]
    Invalid {
        /// Byte offset of the offending part, when known.
        at: Option<usize>,
        /// XLA-style explanation.
        message: String,
    },
    /// A size does not fit in 64 bits.
    #[error("size overflows 64 bits: {0}")]
    Overflow(String),
    /// An index is out of the shape's bounds or of the wrong rank.
    #[error("index {index:?} is out of bounds for dims {dims:?}")]
    IndexOutOfBounds {
        /// The index given.
        index: Vec<i64>,
        /// The shape's dims.
        dims: Vec<i64>,
    },
    /// The operation needs an array with a layout and static or bounded dims.
    #[error("{0}")]
    Unsupported(String),
}

impl LayoutError {
    pub(crate) fn invalid(at: Option<usize>, message: impl Into<String>) -> Self {
        LayoutError::Invalid {
            at,
            message: message.into(),
        }
    }
}
