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
