//! The figures in docs/ are what the commands in docs/figures.txt draw today (SVG byte for byte;
//! `tools/regen-docs.sh` regenerates them), and the README's captions quote the numbers they show.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// (name, file under the scratch directory, tpusim arguments) of each line of docs/figures.txt.
fn figures(root: &Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(root.join("docs/figures.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            assert_eq!(f.len(), 3, "{l}");
            (f[0].to_string(), f[1].to_string(), f[2].to_string())
        })
        .collect()
}

#[test]
fn docs_figures_match_the_commands() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("tpusim-docs-figures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let figs = figures(&root);
    assert!(figs.len() >= 3, "{figs:?}");
    let mut ran: BTreeMap<String, ()> = BTreeMap::new();
    for (name, file, args) in &figs {
        let args = args.replace("$OUT", out.to_str().unwrap());
        if ran.insert(args.clone(), ()).is_none() {
            let argv: Vec<&str> = args.split_whitespace().collect();
            let (code, _, err) = common::tpusim(&argv);
            assert_eq!(code, 0, "tpusim {args}: {err}");
        }
        let drawn = std::fs::read_to_string(out.join(file)).unwrap();
        let committed = std::fs::read_to_string(root.join(format!("docs/{name}.svg")))
            .unwrap_or_else(|e| panic!("docs/{name}.svg: {e}; run tools/regen-docs.sh"));
        assert!(
            drawn == committed,
            "docs/{name}.svg differs from what `tpusim {args}` draws today; run tools/regen-docs.sh"
        );
        assert!(root.join(format!("docs/{name}.png")).exists(), "docs/{name}.png");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The speedup in the pipelining figure's title ("(1.98x)") is the one the README's caption quotes.
#[test]
fn readme_caption_quotes_the_pipelining_speedup() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let svg = std::fs::read_to_string(root.join("docs/pipelining.svg")).unwrap();
    let open = svg.find("sequential vs pipelined (").unwrap() + "sequential vs pipelined (".len();
    let speedup = &svg[open..open + svg[open..].find(')').unwrap()];
    assert!(speedup.ends_with('x') && speedup.len() == 5, "{speedup}");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("({speedup} here)")),
        "README's pipelining caption should quote {speedup}"
    );
    for name in ["pipelining", "sweep", "report-gantt"] {
        assert!(
            readme.contains(&format!("docs/{name}.png")),
            "README shows docs/{name}.png"
        );
    }
}

/// Staleness is told one way: the README and the lesson page carry the definition the CLI, the
/// figures and the report use, and neither says "late" for it.
#[test]
fn staleness_is_told_once() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let def = sim_core::summary::STALENESS;
    assert!(readme.contains(def), "README lacks: {def}");
    let page = reports::lesson_html("{}");
    assert!(page.contains(def), "lesson page lacks: {def}");
    for text in [&readme, &page] {
        assert!(!text.contains("steps late") && !text.contains("step late"));
        assert!(!text.contains("two steps stale") && !text.contains("1 step late"));
    }
    // The lesson says what staleness costs, and where to see it.
    assert!(page.contains("What it costs is accuracy") && page.contains("--functional"));
    // The lesson's colours are the figures' palette.
    assert!(page.contains(&reports::palette::css_vars()));
}
