//! docs/step_time_walk.md stays true: every file it names exists and defines every function named
//! beside it, its counts of files and crates are those of its tables, and every chip value it lists
//! is a field of v4 or a step parameter.

use std::collections::BTreeSet;
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The backquoted words of a table cell.
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Rows of the walk's tables: (file, functions).
fn hops(doc: &str) -> Vec<(String, Vec<String>)> {
    doc.lines()
        .filter(|l| l.starts_with("| ") && l.split('|').nth(1).is_some_and(|c| c.trim().parse::<u32>().is_ok()))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            let file = quoted(cells[2])
                .into_iter()
                .next()
                .expect("a file in the second column");
            (file, quoted(cells[3]))
        })
        .collect()
}

/// Whether `text` defines a function `name`.
fn defines(text: &str, name: &str) -> bool {
    let pat = format!("fn {name}");
    text.match_indices(&pat)
        .any(|(i, _)| matches!(text[i + pat.len()..].chars().next(), Some('(') | Some('<')))
}

/// The crate a file belongs to: its package directory (the root's `src/` is the CLI).
fn crate_of(file: &str) -> &str {
    match file.split('/').next().unwrap_or("") {
        "src" => "tpusim",
        dir => dir,
    }
}

/// The number after `label` in the doc ("Files: 26.").
fn count(doc: &str, label: &str) -> usize {
    let at = doc.find(label).unwrap_or_else(|| panic!("no '{label}' in the walk"));
    doc[at + label.len()..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after '{label}'"))
}

fn walk() -> String {
    std::fs::read_to_string(repo().join("docs/step_time_walk.md")).unwrap()
}

#[test]
fn every_file_and_function_of_the_walk_exists() {
    let doc = walk();
    let rows = hops(&doc);
    assert!(rows.len() >= 20, "{} rows", rows.len());
    let mut missing = Vec::new();
    for (file, functions) in &rows {
        let Ok(text) = std::fs::read_to_string(repo().join(file)) else {
            missing.push(format!("{file}: no such file"));
            continue;
        };
        for f in functions {
            if !defines(&text, f) {
                missing.push(format!("{file}: no fn {f}"));
            }
        }
    }
    assert!(missing.is_empty(), "the walk names what is not there: {missing:#?}");
    let files: BTreeSet<&str> = rows.iter().map(|(f, _)| f.as_str()).collect();
    let crates: BTreeSet<&str> = files.iter().map(|f| crate_of(f)).collect();
    assert_eq!(count(&doc, "Files:"), files.len(), "{files:?}");
    assert_eq!(count(&doc, "Crates:"), crates.len(), "{crates:?}");
}

#[test]
fn every_chip_value_of_the_walk_is_a_field() {
    let doc = walk();
    let table = &doc[doc.find("## The chip values").unwrap()..];
    let fields: BTreeSet<String> = ["sim-tpu/chips/v4.json", "sim-tpu/chips/params.json"]
        .iter()
        .flat_map(|f| {
            let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(repo().join(f)).unwrap()).unwrap();
            v.as_object().unwrap().keys().cloned().collect::<Vec<_>>()
        })
        .collect();
    let named: Vec<String> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| quoted(l).into_iter().next())
        .collect();
    assert_eq!(
        named.len(),
        count(&doc, "in turn (`python3 tools/step-walk/moving_params.py`);")
    );
    for n in &named {
        assert!(fields.contains(n), "{n} is not a v4 field or step parameter");
    }
}

#[test]
fn the_walk_checker_fires_on_a_wrong_name() {
    assert!(defines("pub fn measure(p: &Plan)", "measure"));
    assert!(defines("fn rebuild<T>(x: T)", "rebuild"));
    assert!(!defines("pub fn measured(p: &Plan)", "measure"));
    assert!(!defines("// measure it", "measure"));
    let rows = hops("| 1 | `a/b.rs` | `f`, `g` | x |\n| hop | file | functions | what |\n");
    assert_eq!(
        rows,
        vec![("a/b.rs".to_string(), vec!["f".to_string(), "g".to_string()])]
    );
}
