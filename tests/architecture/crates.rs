//! Crates and their module trees: from each crate root, following `mod NAME;` to files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::lex::tokens;
use crate::scan::{scan, FileScan};

/// A module held in a file of its own.
pub struct ModuleFile {
    /// The module's path in its crate (empty for the root).
    pub path: Vec<String>,
    /// The file, relative to the repository.
    pub file: PathBuf,
    /// What the file says about modules.
    pub scan: FileScan,
}

/// One crate: its root file and the module files reached from it.
pub struct Crate {
    /// The root file, relative to the repository.
    pub root: PathBuf,
    /// Module files, the root first.
    pub files: Vec<ModuleFile>,
}

/// Reads a file relative to the repository (or a synthetic source tree in tests).
pub type Reader<'a> = &'a dyn Fn(&Path) -> Option<String>;

/// The crate rooted at `root`: every module file reachable by `mod` declarations.
pub fn load_crate(root: &Path, read: Reader<'_>) -> Crate {
    let mut files = Vec::new();
    let mut queue = vec![(Vec::new(), root.to_path_buf(), true)];
    while let Some((path, file, owner)) = queue.pop() {
        let Some(text) = read(&file) else { continue };
        let toks = tokens(&text);
        let scan = scan(&toks);
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        // A root or mod.rs holds its children beside it; `foo.rs` holds them in `foo/`.
        let child_dir = if owner {
            dir.clone()
        } else {
            dir.join(file.file_stem().unwrap_or_default())
        };
        for o in &scan.outline {
            let mut p = path.clone();
            p.extend(o.within.iter().cloned());
            p.push(o.name.clone());
            if let Some(attr) = &o.path_attr {
                queue.push((p, normalize(&dir.join(attr)), true));
                continue;
            }
            let mut d = child_dir.clone();
            d.extend(o.within.iter());
            let flat = d.join(format!("{}.rs", o.name));
            if read(&flat).is_some() {
                queue.push((p, flat, false));
            } else {
                queue.push((p, d.join(&o.name).join("mod.rs"), true));
            }
        }
        files.push(ModuleFile { path, file, scan });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Crate {
        root: root.to_path_buf(),
        files,
    }
}

/// `a/b/../c` as `a/c`.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The crate roots of a package directory (relative to the repository): library, binaries, tests,
/// examples, benchmarks, build script and fuzz targets.
pub fn crate_roots(
    package: &Path,
    exists: &dyn Fn(&Path) -> bool,
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs", "build.rs"]
        .iter()
        .map(|f| package.join(f))
        .filter(|p| exists(p))
        .collect();
    for dir in ["src/bin", "tests", "examples", "benches", "fuzz_targets"] {
        for entry in list(&package.join(dir)) {
            if entry.extension().is_some_and(|e| e == "rs") {
                roots.push(entry);
            } else if exists(&entry.join("main.rs")) {
                roots.push(entry.join("main.rs"));
            }
        }
    }
    roots
}

/// Module paths of a crate, inline modules included, each mapped to the module file holding it.
pub fn module_index(c: &Crate) -> BTreeMap<Vec<String>, Vec<String>> {
    let mut index = BTreeMap::new();
    for f in &c.files {
        index.insert(f.path.clone(), f.path.clone());
        for inline in &f.scan.inline {
            let mut p = f.path.clone();
            p.extend(inline.iter().cloned());
            index.insert(p, f.path.clone());
        }
    }
    index
}
