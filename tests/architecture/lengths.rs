//! Function lengths: from the line of `fn` to the line of the body's closing brace.

use crate::lex::{closing_brace, Kind, Tok};

/// A function and its length.
#[derive(Debug, Clone)]
pub struct FnLength {
    /// The function's name.
    pub name: String,
    /// The line of its `fn`.
    pub line: usize,
    /// Lines from `fn` to the closing brace, both included.
    pub lines: usize,
}

/// Every function with a body in a file's tokens.
pub fn functions(toks: &[Tok]) -> Vec<FnLength> {
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if !t.is("fn") || !toks.get(i + 1).is_some_and(|n| n.kind == Kind::Ident) {
            continue;
        }
        let Some(open) = body_start(toks, i + 2) else { continue };
        if let Some(close) = closing_brace(toks, open) {
            out.push(FnLength {
                name: toks[i + 1].text.clone(),
                line: t.line,
                lines: toks[close].line - t.line + 1,
            });
        }
    }
    out
}

/// The body's opening brace: the first `{` outside parentheses and brackets, unless a `;` (a
/// declaration without a body) comes first.
fn body_start(toks: &[Tok], from: usize) -> Option<usize> {
    let mut depth = 0i64;
    for (k, t) in toks.iter().enumerate().skip(from) {
        match t.text.as_str() {
            "(" | "[" if t.kind == Kind::Punct => depth += 1,
            ")" | "]" if t.kind == Kind::Punct => depth -= 1,
            "{" if t.kind == Kind::Punct && depth == 0 => return Some(k),
            ";" if t.kind == Kind::Punct && depth == 0 => return None,
            _ => {}
        }
    }
    None
}
