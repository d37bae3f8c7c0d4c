//! The architecture invariants ARCHITECTURE.md states, checked on the workspace's sources:
//! (a) no import cycle between the modules of one crate, (b) no function over 150 lines, (c) the
//! CLI (`src/`) and the Python extension (`python/src/`) name no model crate: they go through
//! `tpusim-api`, (d) outside the trace writer, no code tells spans apart by their thread or
//! category text (they carry a typed tag). Pure Rust: a small lexer (`lex`), module trees from `mod` declarations (`crates`),
//! and each detector on those; the unit cases below run each detector on synthetic sources.

mod crates;
mod cycles;
mod lengths;
mod lex;
mod scan;
mod spans;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crates::{crate_roots, load_crate};

/// The longest a function may be, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 150;

/// The model crates; only `tpusim-api` may call them for the CLI and Python.
const MODEL_CRATES: [&str; 5] = ["sim_core", "sim_tpu", "sim_sparsecore", "workloads", "reports"];

/// The directories of door clients: the CLI and the Python extension.
const DOOR_CLIENTS: [&str; 2] = ["src", "python/src"];

/// The display layer, the one place a span's thread text is read as such (lanes, thread order and
/// names in the Chrome trace).
const DISPLAY_LAYER: [&str; 1] = ["traces/src"];

/// Known offenders allowed for a while (none now): a crate root and the module prefixes every member of the
/// cycle starts with. An entry that no longer offends is reported, so the list cannot go stale silently.
const ALLOWED_CYCLES: &[(&str, &[&str])] = &[];

/// Known offenders (file, function) over the length limit allowed for a while (none now).
const ALLOWED_LONG_FNS: &[(&str, &str)] = &[];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &Path) -> Option<String> {
    std::fs::read_to_string(repo().join(rel)).ok()
}

fn list(rel: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(rel))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| rel.join(e.file_name())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Package directories: the root and every directory beside it with a Cargo.toml.
fn packages() -> Vec<PathBuf> {
    let mut v = vec![PathBuf::new()];
    v.extend(
        list(Path::new(""))
            .into_iter()
            .filter(|d| repo().join(d).join("Cargo.toml").is_file()),
    );
    v
}

/// Every `.rs` file under `rel`, build outputs and hidden directories left out.
fn rust_files(rel: &Path, out: &mut Vec<PathBuf>) {
    for p in list(rel) {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if repo().join(&p).is_dir() {
            rust_files(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The import cycles of every crate in the repository.
fn workspace_cycles() -> Vec<cycles::Cycle> {
    let exists = |p: &Path| repo().join(p).is_file();
    let mut found = Vec::new();
    for pkg in packages() {
        for root in crate_roots(&pkg, &exists, &list) {
            found.extend(cycles::cycles(&load_crate(&root, &read)));
        }
    }
    found
}

#[test]
fn no_import_cycle_between_modules_of_a_crate() {
    let found = workspace_cycles();
    let mut offending = Vec::new();
    for c in &found {
        let allowed = ALLOWED_CYCLES.iter().any(|(root, prefixes)| {
            c.root == *root && c.modules.iter().all(|m| prefixes.iter().any(|p| m.starts_with(p)))
        });
        println!(
            "{} cycle in {}: {}",
            if allowed { "allowed" } else { "OFFENDING" },
            c.root,
            c.modules.join(", ")
        );
        for e in &c.edges {
            println!("    {e}");
        }
        if !allowed {
            offending.push(format!("{}: {}", c.root, c.modules.join(", ")));
        }
    }
    assert!(offending.is_empty(), "import cycles between modules: {offending:#?}");
}

#[test]
fn no_function_over_150_lines() {
    let mut files = Vec::new();
    rust_files(Path::new(""), &mut files);
    let (mut offending, mut seen) = (Vec::new(), Vec::new());
    for f in &files {
        let Some(text) = read(f) else { continue };
        let file = f.display().to_string();
        for fun in lengths::functions(&lex::tokens(&text))
            .into_iter()
            .filter(|x| x.lines > MAX_FN_LINES)
        {
            let allowed = ALLOWED_LONG_FNS.iter().any(|(a, n)| *a == file && *n == fun.name);
            let state = if allowed { "allowed" } else { "OFFENDING" };
            println!("{state} {file}:{} fn {}: {} lines", fun.line, fun.name, fun.lines);
            if !allowed {
                offending.push(format!("{file}:{} fn {} ({} lines)", fun.line, fun.name, fun.lines));
            }
            seen.push((file.clone(), fun.name));
        }
    }
    for (file, name) in ALLOWED_LONG_FNS {
        if !seen.iter().any(|(f, n)| f == file && n == name) {
            println!("stale allow-list entry (within the limit now: remove it): {file} fn {name}");
        }
    }
    assert!(
        offending.is_empty(),
        "functions over {MAX_FN_LINES} lines: {offending:#?}"
    );
}

/// Where a door client names a model crate: `file:line crate`.
fn model_crate_names(file: &str, text: &str) -> Vec<String> {
    lex::tokens(text)
        .iter()
        .filter(|t| t.kind == lex::Kind::Ident && MODEL_CRATES.contains(&t.text.as_str()))
        .map(|t| format!("{file}:{} {}", t.line, t.text))
        .collect()
}

#[test]
fn cli_and_python_go_through_the_api_only() {
    let mut offending = Vec::new();
    for dir in DOOR_CLIENTS {
        let mut files = Vec::new();
        rust_files(Path::new(dir), &mut files);
        assert!(!files.is_empty(), "no sources under {dir}");
        for f in &files {
            let text = read(f).unwrap_or_default();
            offending.extend(model_crate_names(&f.display().to_string(), &text));
        }
    }
    for o in &offending {
        println!("OFFENDING {o}");
    }
    assert!(
        offending.is_empty(),
        "the CLI and Python name model crates (go through tpusim-api): {offending:#?}"
    );
}

/// Every comparison of a span's thread or category text outside the display layer and tests:
/// `file:line field`.
fn workspace_display_comparisons() -> Vec<String> {
    let mut files = Vec::new();
    rust_files(Path::new(""), &mut files);
    let mut found = Vec::new();
    for f in &files {
        let file = f.display().to_string();
        let is_test = f.components().any(|c| c.as_os_str() == "tests");
        if is_test || DISPLAY_LAYER.iter().any(|d| file.starts_with(d)) {
            continue;
        }
        let text = read(f).unwrap_or_default();
        for (line, field) in spans::display_comparisons(&lex::tokens(&text)) {
            found.push(format!("{file}:{line} {field}"));
        }
    }
    found
}

#[test]
fn spans_are_told_apart_by_their_tag_not_their_text() {
    let found = workspace_display_comparisons();
    for o in &found {
        println!("OFFENDING {o}");
    }
    assert!(
        found.is_empty(),
        "code compares a span's thread or category text (read `Span::tag`): {found:#?}"
    );
}

#[test]
fn span_text_detector_fires_on_comparisons_only() {
    let src = "fn f(s: &Span, t: &str) {\n\
        let a = s.track.thread == \"TC\";\n\
        let b = s.category.starts_with(\"sc\");\n\
        let c = \"HBM\" != s.track.thread;\n\
        match s.category.as_str() { _ => {} }\n\
        let ok = Track { thread: t.into(), process: s.track.process.clone() };\n\
        let shown = format!(\"{} {}\", s.track.thread, s.category);\n\
        let tagged = s.tag.map(|x| x.unit) == Some(Unit::TensorCore);\n\
        let m = x.thread();\n\
        // s.track.thread == \"TC\"\n\
    }\n";
    let found = spans::display_comparisons(&lex::tokens(src));
    assert_eq!(
        found,
        vec![
            (2, "thread".to_string()),
            (3, "category".to_string()),
            (4, "thread".to_string()),
            (5, "category".to_string())
        ]
    );
}

/// A synthetic source tree for the unit cases.
fn tree(files: &[(&str, &str)]) -> BTreeMap<PathBuf, String> {
    files.iter().map(|(p, t)| (PathBuf::from(p), t.to_string())).collect()
}

fn synthetic_cycles(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let t = tree(files);
    let read = |p: &Path| t.get(p).cloned();
    cycles::cycles(&load_crate(Path::new("src/lib.rs"), &read))
        .into_iter()
        .map(|c| c.modules)
        .collect()
}

#[test]
fn cycle_detector_fires_on_siblings_importing_each_other() {
    let found = synthetic_cycles(&[
        ("src/lib.rs", "pub mod hlo;\n"),
        (
            "src/hlo/mod.rs",
            "pub mod cost;\npub mod fusion;\npub use cost::total;\n",
        ),
        ("src/hlo/cost.rs", "use super::fusion::Kernel;\npub fn total() {}\n"),
        (
            "src/hlo/fusion.rs",
            "pub struct Kernel;\nfn f() { crate::hlo::cost::total() }\n",
        ),
    ]);
    assert_eq!(found, vec![vec!["hlo::cost".to_string(), "hlo::fusion".to_string()]]);
}

#[test]
fn cycle_detector_reads_groups_inline_modules_and_path_attributes() {
    let found = synthetic_cycles(&[
        (
            "src/lib.rs",
            "mod a;\nmod outer { pub mod b; }\n#[path = \"elsewhere/c.rs\"]\nmod c;\n",
        ),
        (
            "src/a.rs",
            "use crate::{outer::{b::B, self}, c::C as D};\n// use crate::nothing;\n",
        ),
        (
            "src/outer/b.rs",
            "pub struct B;\nfn f() -> super::super::c::C { todo!() }\n",
        ),
        (
            "src/elsewhere/c.rs",
            "pub struct C;\nconst S: &str = \"crate::a::X\";\nuse crate::a::*;\n",
        ),
    ]);
    // a -> outer::b -> c -> a; the commented and quoted paths name nothing.
    assert_eq!(
        found,
        vec![vec!["a".to_string(), "c".to_string(), "outer::b".to_string()]]
    );
}

#[test]
fn cycle_detector_ignores_parent_and_child() {
    let found = synthetic_cycles(&[
        ("src/lib.rs", "pub mod hlo;\npub struct Chip;\n"),
        (
            "src/hlo/mod.rs",
            "pub mod cost;\npub use self::cost::total;\npub struct Module;\n",
        ),
        (
            "src/hlo/cost.rs",
            "use super::Module;\nuse crate::Chip;\npub fn total() {}\n#[cfg(test)]\nmod tests { use super::*; }\n",
        ),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

fn body(lines: usize) -> String {
    // `fn` line, lines - 2 body lines, closing brace: `lines` in all.
    let mut s = String::from("pub fn long(a: [u8; 2]) -> u8 where u8: Copy {\n");
    for k in 0..lines - 2 {
        s.push_str(&format!("    let _x{k} = '{{'; // }}\n"));
    }
    s.push_str("}\nfn declared();\n");
    s
}

#[test]
fn length_detector_fires_past_150_lines_only() {
    let at_limit = lengths::functions(&lex::tokens(&body(150)));
    assert_eq!(at_limit.len(), 1);
    assert_eq!((at_limit[0].name.as_str(), at_limit[0].lines), ("long", 150));
    let over = lengths::functions(&lex::tokens(&format!("/* fn fake() {{ */\n{}", body(151))));
    assert_eq!(over.len(), 1);
    assert_eq!((over[0].name.as_str(), over[0].line, over[0].lines), ("long", 2, 151));
}

#[test]
fn door_detector_fires_on_a_model_crate_in_code_only() {
    let src = "use tpusim_api::run;\n// workloads::simulate\nfn f() { let _ = \"sim_core\"; workloads::simulate(); }\nuse sim_tpu::chips::Chip;\n";
    assert_eq!(
        model_crate_names("src/x.rs", src),
        vec!["src/x.rs:3 workloads", "src/x.rs:4 sim_tpu"]
    );
}
