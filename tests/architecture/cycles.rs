//! Import cycles between the modules of one crate.
//!
//! A module file is a node. It has an edge to every module file whose items it names through a
//! path from `crate`, `self` or `super` (in a `use` or in code). A module and its ancestors are one
//! line of containment, not a cycle: a child naming its parent's items, or a parent naming (or
//! re-exporting) its children's, adds no edge.

use std::collections::{BTreeMap, BTreeSet};

use crate::crates::{module_index, Crate};

/// A dependency of one module file on another, with where it is first named.
#[derive(Clone, Debug)]
pub struct Edge {
    /// The module naming the other.
    pub from: Vec<String>,
    /// The module named.
    pub to: Vec<String>,
    /// `file:line` of the first such path.
    pub at: String,
}

/// A set of modules that import each other, with the edges between them.
#[derive(Debug)]
pub struct Cycle {
    /// The crate's root file.
    pub root: String,
    /// The modules, as `a::b` paths (`crate` for the root).
    pub modules: Vec<String>,
    /// Edges within the set.
    pub edges: Vec<String>,
}

/// A module path as text.
pub fn name(p: &[String]) -> String {
    if p.is_empty() {
        "crate".into()
    } else {
        p.join("::")
    }
}

/// The module a path from `current` names: the longest prefix of it that is a module.
fn resolve(current: &[String], segments: &[String], index: &BTreeMap<Vec<String>, Vec<String>>) -> Option<Vec<String>> {
    let mut base: Vec<String> = match segments.first()?.as_str() {
        "crate" => Vec::new(),
        _ => current.to_vec(),
    };
    let mut rest = &segments[1..];
    if segments[0] == "super" {
        base.pop()?;
        while rest.first().is_some_and(|s| s == "super") {
            base.pop()?;
            rest = &rest[1..];
        }
    }
    let mut found = None;
    for k in 0..=rest.len() {
        let mut p = base.clone();
        p.extend(rest[..k].iter().cloned());
        if let Some(file) = index.get(&p) {
            found = Some(file.clone());
        }
    }
    found
}

/// The edges between a crate's module files, one per ordered pair.
pub fn edges(c: &Crate) -> Vec<Edge> {
    let index = module_index(c);
    let mut out: BTreeMap<(Vec<String>, Vec<String>), String> = BTreeMap::new();
    for f in &c.files {
        for r in &f.scan.refs {
            let mut current = f.path.clone();
            current.extend(r.within.iter().cloned());
            let Some(to) = resolve(&current, &r.segments, &index) else {
                continue;
            };
            let related = to.starts_with(&f.path) || f.path.starts_with(&to);
            if !related {
                let at = format!("{}:{}", f.file.display(), r.line);
                out.entry((f.path.clone(), to)).or_insert(at);
            }
        }
    }
    out.into_iter().map(|((from, to), at)| Edge { from, to, at }).collect()
}

/// The import cycles of a crate (strongly connected sets of more than one module).
pub fn cycles(c: &Crate) -> Vec<Cycle> {
    let edges = edges(c);
    let mut graph: BTreeMap<&Vec<String>, Vec<&Vec<String>>> = BTreeMap::new();
    for e in &edges {
        graph.entry(&e.from).or_default().push(&e.to);
        graph.entry(&e.to).or_default();
    }
    let components = strongly_connected(&graph);
    components
        .into_iter()
        .filter(|s| s.len() > 1)
        .map(|set| Cycle {
            root: c.root.display().to_string(),
            modules: set.iter().map(|p| name(p)).collect(),
            edges: edges
                .iter()
                .filter(|e| set.contains(&e.from) && set.contains(&e.to))
                .map(|e| format!("{} -> {} ({})", name(&e.from), name(&e.to), e.at))
                .collect(),
        })
        .collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected<'a>(graph: &BTreeMap<&'a Vec<String>, Vec<&'a Vec<String>>>) -> Vec<BTreeSet<Vec<String>>> {
    struct State<'a> {
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<BTreeSet<Vec<String>>>,
    }
    fn visit<'a>(v: &'a Vec<String>, g: &BTreeMap<&'a Vec<String>, Vec<&'a Vec<String>>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for &w in &g[v] {
            if !s.index.contains_key(w) {
                visit(w, g, s);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                set.insert(w.clone());
                if w == v {
                    break;
                }
            }
            s.out.push(set);
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(v, graph, &mut s);
        }
    }
    s.out
}
