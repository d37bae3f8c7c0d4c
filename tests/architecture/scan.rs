//! What one file says about modules: the modules it declares and the paths it names.

use crate::lex::{closing_brace, Kind, Tok};

/// A `mod NAME;` declaration: a module in a file of its own.
#[derive(Debug)]
pub struct Outline {
    /// The inline modules around the declaration, outermost first.
    pub within: Vec<String>,
    /// The module's name.
    pub name: String,
    /// The file named by a `#[path = "..."]` attribute on it.
    pub path_attr: Option<String>,
}

/// A path the file names that starts at `crate`, `self` or `super` (use declarations expanded).
#[derive(Debug)]
pub struct Ref {
    /// The inline modules around the reference, outermost first.
    pub within: Vec<String>,
    /// The path's segments (`crate`, `self` and `super` included).
    pub segments: Vec<String>,
    /// The line it is on.
    pub line: usize,
}

/// Everything a file says about modules.
#[derive(Debug, Default)]
pub struct FileScan {
    /// Modules declared in files of their own.
    pub outline: Vec<Outline>,
    /// Inline modules (`mod NAME { ... }`), as paths within the file.
    pub inline: Vec<Vec<String>>,
    /// Paths named.
    pub refs: Vec<Ref>,
}

/// Scans a file's tokens.
pub fn scan(toks: &[Tok]) -> FileScan {
    let mut out = FileScan::default();
    // Inline modules open at a brace depth, innermost last.
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut path_attr: Option<String> = None;
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        let within: Vec<String> = open.iter().map(|(n, _)| n.clone()).collect();
        if t.punct("{") {
            depth += 1;
        } else if t.punct("}") {
            depth = depth.saturating_sub(1);
            if open.last().is_some_and(|(_, d)| *d == depth) {
                open.pop();
            }
        } else if t.punct("#") {
            if let Some(p) = path_attribute(&toks[i..]) {
                path_attr = Some(p);
            }
        } else if t.is("mod") && i + 2 < toks.len() && toks[i + 1].kind == Kind::Ident {
            let name = toks[i + 1].text.clone();
            if toks[i + 2].punct(";") {
                out.outline.push(Outline {
                    within,
                    name,
                    path_attr: path_attr.take(),
                });
            } else if toks[i + 2].punct("{") {
                let mut p = within;
                p.push(name.clone());
                out.inline.push(p);
                open.push((name, depth));
                depth += 1;
                path_attr = None;
                i += 3;
                continue;
            }
        } else if t.is("use") {
            let end = toks[i..]
                .iter()
                .position(|t| t.punct(";"))
                .map_or(toks.len(), |k| i + k);
            for segments in use_paths(&toks[i + 1..end]) {
                out.refs.push(Ref {
                    within: within.clone(),
                    segments,
                    line: t.line,
                });
            }
            path_attr = None;
            i = end + 1;
            continue;
        } else if is_anchor(t) && toks.get(i + 1).is_some_and(|n| n.punct("::")) {
            let (segments, next) = code_path(toks, i);
            out.refs.push(Ref {
                within,
                segments,
                line: t.line,
            });
            i = next;
            continue;
        }
        if t.punct(";") || t.punct("{") || t.punct("}") {
            path_attr = None;
        }
        i += 1;
    }
    out
}

fn is_anchor(t: &Tok) -> bool {
    t.is("crate") || t.is("self") || t.is("super")
}

/// `#[path = "..."]` at the start of `toks`.
fn path_attribute(toks: &[Tok]) -> Option<String> {
    let ok = toks.len() > 5 && toks[1].punct("[") && toks[2].is("path") && toks[3].punct("=") && toks[5].punct("]");
    (ok && toks[4].kind == Kind::Lit).then(|| toks[4].text.clone())
}

/// A path in code from its first segment: its segments and the index after it.
fn code_path(toks: &[Tok], start: usize) -> (Vec<String>, usize) {
    let mut segments = vec![toks[start].text.clone()];
    let mut i = start + 1;
    while i + 1 < toks.len() && toks[i].punct("::") && toks[i + 1].kind == Kind::Ident {
        segments.push(toks[i + 1].text.clone());
        i += 2;
    }
    (segments, i)
}

/// The paths a use tree names (without `use` and `;`), groups expanded; only those starting at
/// `crate`, `self` or `super`.
pub fn use_paths(toks: &[Tok]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let toks = if toks.first().is_some_and(|t| t.punct("::")) {
        &toks[1..]
    } else {
        toks
    };
    tree(toks, &mut Vec::new(), &mut out);
    out.retain(|p| p.first().is_some_and(|s| s == "crate" || s == "self" || s == "super"));
    out
}

/// One use tree with `prefix` before it; pushes its paths onto `out`.
fn tree(toks: &[Tok], prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let base = prefix.len();
    for (i, t) in toks.iter().enumerate() {
        if t.punct("{") {
            let close = closing_brace(toks, i).unwrap_or(toks.len());
            for part in split_top(&toks[i + 1..close]) {
                tree(part, prefix, out);
            }
            prefix.truncate(base);
            return;
        }
        if t.is("as") || t.punct("*") {
            break;
        }
        // `self` inside a group names the group's prefix itself.
        if t.kind == Kind::Ident && (prefix.is_empty() || !t.is("self")) {
            prefix.push(t.text.clone());
        }
    }
    if !prefix.is_empty() {
        out.push(prefix.clone());
    }
    prefix.truncate(base);
}

/// A group's items, split at its top-level commas.
fn split_top(toks: &[Tok]) -> Vec<&[Tok]> {
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0usize, 0usize);
    for (k, t) in toks.iter().enumerate() {
        if t.punct("{") {
            depth += 1;
        } else if t.punct("}") {
            depth = depth.saturating_sub(1);
        } else if t.punct(",") && depth == 0 {
            parts.push(&toks[from..k]);
            from = k + 1;
        }
    }
    parts.push(&toks[from..]);
    parts.retain(|p| !p.is_empty());
    parts
}
