//! `tpusim run` and `tpusim sweep` are byte-for-byte deterministic: the same command twice, in
//! separate processes, prints the same bytes and writes the same files.

mod common;
use common::{scratch_dir, tpusim};

/// Every file under `dir` with its bytes, by path relative to `dir`.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Runs `args` with `{out}` replaced by `<base>/<k>/out` for k = a, b, and compares stdout and files.
fn twice_the_same(name: &str, args: &[&str]) {
    let base = scratch_dir(name);
    let mut seen = Vec::new();
    for k in ["a", "b"] {
        let out = base.join(k).join("out");
        let trace = base.join(k).join("trace.json");
        std::fs::create_dir_all(base.join(k)).unwrap();
        let argv: Vec<String> = args
            .iter()
            .map(|a| {
                a.replace("{out}", out.to_str().unwrap())
                    .replace("{trace}", trace.to_str().unwrap())
            })
            .collect();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let (code, stdout, err) = tpusim(&argv);
        assert!(code == 0 || code == 1, "{code}: {err}");
        // The output directory's name appears in what is printed; it is the only difference allowed.
        let stdout = stdout.replace(base.join(k).to_str().unwrap(), "<dir>");
        let mut written = files(&out);
        if trace.exists() {
            written.push(("trace.json".into(), std::fs::read(&trace).unwrap()));
        }
        assert!(!written.is_empty(), "{name}: nothing written");
        seen.push((stdout, written));
    }
    assert_eq!(seen[0].0, seen[1].0, "{name}: stdout differs");
    let (a, b) = (&seen[0].1, &seen[1].1);
    assert_eq!(a.len(), b.len());
    for ((n, x), (_, y)) in a.iter().zip(b) {
        assert!(x == y, "{name}: {n} differs between two runs");
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn run_twice_gives_the_same_bytes() {
    twice_the_same(
        "det-run",
        &[
            "run",
            "--preset",
            "dlrm-criteo",
            "--json",
            "--trace",
            "{trace}",
            "-o",
            "{out}",
        ],
    );
}

#[test]
fn sweep_twice_gives_the_same_bytes() {
    twice_the_same(
        "det-sweep",
        &[
            "sweep",
            "--preset",
            "dlrm-small",
            "--chip",
            "v5p,v6e",
            "--chips",
            "4,8",
            "--batch",
            "2048,4096",
            "--steps",
            "2",
            "-j",
            "2",
            "-o",
            "{out}",
        ],
    );
}
