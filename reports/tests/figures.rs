//! The figures: PNGs written beside SVGs and decodable at the drawn size, titled axes, legends, the
//! target line, distinct series colours, determinism.

use std::path::PathBuf;

use reports::sweep::{write_sweep_with_target, SweepPoint};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("reports-figures-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Sweep points: 2 chips x {4, 8} chips x 5 batches; 8 x v6e at batch 65536 does not fit and
/// 4 x v5p at 65536 could not run.
fn points() -> Vec<SweepPoint> {
    let mut out = Vec::new();
    for chip in ["v5p", "v6e"] {
        for chips in [4u32, 8] {
            for batch in [4096u64, 8192, 16384, 32768, 65536] {
                // Step time 100 us + batch / (10 x chips) us.
                let step_time_us = 100.0 + batch as f64 / (10.0 * chips as f64);
                let error = (chip == "v5p" && chips == 4 && batch == 65536).then(|| "boom".to_string());
                out.push(SweepPoint {
                    chip: chip.into(),
                    chips,
                    batch,
                    step_time_us,
                    samples_per_s: batch as f64 / (step_time_us * 1e-6),
                    fits: !(chip == "v6e" && chips == 8 && batch == 65536),
                    bottleneck: String::new(),
                    needed_max_ids: 8,
                    needed_max_unique_ids: 8,
                    cost_per_hour: 1.0,
                    error,
                    fit_reasons: Vec::new(),
                    minibatches_per_step: 0,
                    limits: Vec::new(),
                    price_per_chip_hour: 1.0 / chips as f64,
                    currency: "USD".into(),
                    price_source: Default::default(),
                });
            }
        }
    }
    out
}

/// Width and height from a PNG's IHDR chunk (bytes 16..24, big-endian), after checking the signature.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    (be(16), be(20))
}

/// Width and height the SVG says it has.
fn svg_size(svg: &str) -> (u32, u32) {
    let attr = |name: &str| -> u32 {
        let start = svg.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        svg[start..].split('"').next().unwrap().parse().unwrap()
    };
    (attr("width"), attr("height"))
}

#[test]
fn sweep_figures_are_svg_and_png_of_the_same_size() {
    let dir = tmp("sweep");
    write_sweep_with_target(&dir, &points(), Some(2.0e8)).unwrap();
    for name in ["sweep", "step_time", "fit_map"] {
        let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
        let png = std::fs::read(dir.join(format!("{name}.png"))).unwrap();
        assert_eq!(png_size(&png), svg_size(&svg), "{name}");
        // Decodes completely, as 8-bit RGB, to width x height x 3 bytes.
        let decoder = png::Decoder::new(png.as_slice());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), svg_size(&svg));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        // Not blank: some pixels are not white.
        assert!(buf[..info.buffer_size()].iter().any(|&b| b < 128), "{name}");
    }
    if let Ok(keep) = std::env::var("REPORTS_FIGURES_KEEP") {
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, PathBuf::from(&keep).join(f.file_name().unwrap())).unwrap();
        }
    }
}

/// A `<polyline>`: stroke colour, stroke width, points.
type Polyline = (String, String, Vec<(f64, f64)>);

/// Every `<polyline>` in an SVG.
fn polylines(svg: &str) -> Vec<Polyline> {
    let attr = |el: &str, name: &str| -> String {
        let k = format!(" {name}=\"");
        el.find(&k)
            .map(|i| el[i + k.len()..].split('"').next().unwrap().to_string())
            .unwrap_or_default()
    };
    svg.split("<polyline")
        .skip(1)
        .map(|el| {
            let el = &el[..el.find("/>").unwrap()];
            let pts = attr(el, "points")
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            (attr(el, "stroke"), attr(el, "stroke-width"), pts)
        })
        .collect()
}

#[test]
fn sweep_chart_has_axis_titles_legend_distinct_colours_and_the_target_line() {
    let dir = tmp("sweep-svg");
    write_sweep_with_target(&dir, &points(), Some(2.0e8)).unwrap();
    let svg = std::fs::read_to_string(dir.join("sweep.svg")).unwrap();
    // Batches 4096..65536 span more than a decade: log axis.
    for text in [
        "Throughput vs global batch",
        "global batch (samples, log scale)",
        "throughput (samples/s)",
        "configuration (chips x chip)",
        "4 x v5p",
        "8 x v5p",
        "4 x v6e",
        "8 x v6e",
        "hollow: does not fit",
        "target (200M samples/s)",
    ] {
        assert!(svg.contains(&format!("\n{text}\n")), "{text}");
    }
    // Ticks: every batch (powers of two) labelled, and several throughput ticks.
    for tick in ["4096", "8192", "16384", "32768", "65536", "50M", "100M", "150M", "200M"] {
        assert!(svg.contains(&format!("\n{tick}\n")), "tick {tick}");
    }
    let lines = polylines(&svg);
    // The series: 2-px lines in the first four Okabe-Ito colours, one per configuration (4 x v5p
    // has 4 points: its batch-65536 point failed to run).
    let series: Vec<&Polyline> = lines
        .iter()
        .filter(|(c, w, p)| w == "2" && c != "#555555" && p.len() >= 4)
        .collect();
    let colours: Vec<&str> = series.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(colours, ["#0072B2", "#E69F00", "#009E73", "#D55E00"]);
    // The target line: dashes of one colour at one height, above every data point (200M is above
    // the best throughput, 65536 / 919.2 us = 71M samples/s).
    // (The legend, right of x = 980 - 240, has a dashed swatch of its own.)
    let dashes: Vec<&Polyline> = lines
        .iter()
        .filter(|l| l.0 == "#555555" && l.2.iter().all(|p| p.0 < 740.0))
        .collect();
    assert!(dashes.len() >= 10, "{}", dashes.len());
    let y = dashes[0].2[0].1;
    assert!(dashes.iter().all(|d| d.2.iter().all(|p| p.1 == y)));
    let top_point = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .fold(f64::MAX, f64::min);
    assert!(y < top_point, "{y} vs {top_point}");
    // No target: no dashes.
    let dir2 = tmp("sweep-svg-no-target");
    write_sweep_with_target(&dir2, &points(), None).unwrap();
    let plain = std::fs::read_to_string(dir2.join("sweep.svg")).unwrap();
    assert!(!plain.contains("#555555") && !plain.contains("target ("));
}

#[test]
fn step_time_chart_switches_to_ms_and_fit_map_says_what_each_cell_is() {
    let dir = tmp("step-time");
    write_sweep_with_target(&dir, &points(), None).unwrap();
    let svg = std::fs::read_to_string(dir.join("step_time.svg")).unwrap();
    // The slowest point: 100 + 65536 / 40 = 1738.4 us, past 1 ms.
    assert!(svg.contains("\nstep time (ms)\n") && svg.contains("\nStep time vs global batch\n"));
    let map = std::fs::read_to_string(dir.join("fit_map.svg")).unwrap();
    for text in [
        "global batch (samples)",
        "configuration (chips x chip)",
        "8 x v6e",
        "fits",
        "no fit",
        "error",
        "4 x v5p, batch 65536: could not run: boom",
    ] {
        assert!(map.contains(&format!("\n{text}\n")), "{text}");
    }
    // 20 points: 18 fit, one does not, one failed.
    assert_eq!(map.matches("\nfits\n").count(), 18);
    assert_eq!(map.matches("\nno fit\n").count(), 1);
}

#[test]
fn sweep_figures_are_deterministic() {
    let (a, b) = (tmp("det-a"), tmp("det-b"));
    write_sweep_with_target(&a, &points(), Some(1e8)).unwrap();
    write_sweep_with_target(&b, &points(), Some(1e8)).unwrap();
    for f in reports::sweep::SWEEP_FILES {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f}"
        );
    }
}
