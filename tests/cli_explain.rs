//! `tpusim explain pipelining --html DIR`: the lesson page is self-contained (no network: inline
//! script and style, no http(s) src or href), embeds the slider grid, and its numbers are the
//! engine's (a grid point's step time and speedup equal a run made here).

mod common;

use common::tpusim;
use workloads::lesson::{run_point, LessonGrid, LessonPoint};
use workloads::Pipelining;

fn page() -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("tpusim-lesson-{}-{n}", std::process::id()));
    let (code, out, err) = tpusim(&["explain", "pipelining", "--html", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("index.html"), "{out}");
    let text = std::fs::read_to_string(d.join("index.html")).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
    text
}

fn grid(page: &str) -> LessonGrid {
    let open = r#"<script id="lesson-data" type="application/json">"#;
    let start = page.find(open).expect("embedded grid") + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..end].replace("<\\/", "</")).unwrap()
}

#[test]
fn lesson_page_is_self_contained() {
    let p = page();
    let lower = p.to_lowercase();
    for attr in ["src", "href"] {
        for q in ["=\"", "='", "="] {
            for scheme in ["http://", "https://", "//"] {
                let bad = format!("{attr}{q}{scheme}");
                assert!(!lower.contains(&bad), "page links out: {bad}");
            }
        }
    }
    for bad in [
        "@import",
        "url(http",
        "<link",
        "<iframe",
        "fetch(",
        "xmlhttprequest",
        "import(",
    ] {
        assert!(!lower.contains(bad), "page may load something: {bad}");
    }
    // Every script and style is inline.
    assert!(!lower.contains("<script src"), "external script");
    assert!(p.contains("<style>") && p.contains("<script>"));
    // Deterministic: the same page each time.
    assert_eq!(page(), p);
}

#[test]
fn lesson_embeds_the_grid_and_its_numbers_are_engine_runs() {
    let g = grid(&page());
    let a = &g.axes;
    assert_eq!(
        (
            a.tc_us.len(),
            a.sc_us.len(),
            a.host_us.len(),
            a.in_flight.len(),
            a.pipelining.len()
        ),
        (5, 5, 4, 3, 2)
    );
    assert_eq!(g.cells.len(), 600);
    // One grid point (TensorCore 60 µs, SparseCore 40 µs, host 10 µs, 2 in flight), run here.
    let (tc, sc, host, fl) = (2, 1, 0, 1);
    let point = |pipelining| LessonPoint {
        tc_us: a.tc_us[tc],
        sc_us: a.sc_us[sc],
        host_us: a.host_us[host],
        in_flight: a.in_flight[fl],
        pipelining,
    };
    assert_eq!(
        (a.tc_us[tc], a.sc_us[sc], a.host_us[host], a.in_flight[fl]),
        (60, 40, 10, 2)
    );
    let seq = run_point(&point(Pipelining::Sequential)).unwrap();
    let pip = run_point(&point(Pipelining::Pipelined)).unwrap();
    let (cs, cp) = (
        &g.cells[g.index(tc, sc, host, fl, 0)],
        &g.cells[g.index(tc, sc, host, fl, 1)],
    );
    assert_eq!(cs.run, seq);
    assert_eq!(cp.run, pip);
    assert_eq!(cs.speedup, 1.0);
    let want = seq.step_ns as f64 / pip.step_ns as f64;
    assert!((cp.speedup - want).abs() < 5e-4, "{} vs {want}", cp.speedup);
    // The figures the page shows for this point: 100 µs sequential, 60 µs pipelined, 1.67x.
    assert_eq!((seq.step_ns, pip.step_ns), (100_000, 60_000));
    assert_eq!(format!("{:.2}", cp.speedup), "1.67");
    // Pipelined lookups see an update two steps later; sequential ones the step before.
    assert_eq!(pip.arrows.first(), Some(&(0, 2)));
    assert_eq!(seq.arrows.first(), Some(&(0, 1)));
}
