//! Spans are told apart by their typed tag (`sim_core::tag::SpanTag`), never by the display text of
//! their track's thread or their category: this finds the comparisons of those strings.

use crate::lex::{Kind, Tok};

/// The span fields that are display text only (a track's process and thread, the category).
const DISPLAY_FIELDS: [&str; 3] = ["thread", "category", "process"];

/// Methods that compare or take apart a string.
const STRING_TESTS: [&str; 10] = [
    "starts_with",
    "ends_with",
    "strip_prefix",
    "strip_suffix",
    "contains",
    "eq",
    "ne",
    "as_str",
    "split",
    "cmp",
];

/// Whether tokens `a` and `b` spell `==` or `!=`.
fn equality(a: Option<&Tok>, b: Option<&Tok>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if (a.punct("=") || a.punct("!")) && b.punct("="))
}

/// Each comparison of a `.thread` or `.category` field: `line field`.
pub fn display_comparisons(toks: &[Tok]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for i in 1..toks.len() {
        let field = &toks[i];
        if !toks[i - 1].punct(".") || field.kind != Kind::Ident || !DISPLAY_FIELDS.contains(&field.text.as_str()) {
            continue;
        }
        // A method named like the field is not the field.
        if toks.get(i + 1).is_some_and(|t| t.punct("(")) {
            continue;
        }
        let after = equality(toks.get(i + 1), toks.get(i + 2))
            || (toks.get(i + 1).is_some_and(|t| t.punct("."))
                && toks.get(i + 2).is_some_and(|t| STRING_TESTS.iter().any(|m| t.is(m))));
        // Back over the receiver (`s.track.`) to its first identifier.
        let mut first = i;
        while first >= 2 && toks[first - 1].punct(".") && toks[first - 2].kind == Kind::Ident {
            first -= 2;
        }
        let before = (first >= 2 && equality(toks.get(first - 2), toks.get(first - 1)))
            || (first >= 1 && toks[first - 1].is("match"));
        if after || before {
            found.push((field.line, field.text.clone()));
        }
    }
    found
}
