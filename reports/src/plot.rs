//! Figures drawn with plotters, each as SVG text and as a PNG image of the same drawing.
//!
//! Text is measured (and, in PNGs, rasterised) with the DejaVu Sans font bundled in `assets/`, so a
//! figure needs no system font library. Colours come from the Okabe-Ito palette, which stays distinct
//! for the common forms of colour blindness.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

/// DejaVu Sans (Bitstream Vera licence, `assets/LICENSE-DejaVu.txt`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// The family name every figure asks for; it is the bundled font.
pub const FAMILY: &str = "sans-serif";

/// Okabe-Ito colours in the order series take them (yellow last: weakest on white).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x00, 0x00, 0x00), // black
    RGBColor(0xF0, 0xE4, 0x42), // yellow
];

/// Grey for "no data" (a configuration that failed to run).
pub const GREY: RGBColor = RGBColor(0xAA, 0xAA, 0xAA);

/// A drawing error, as text (plotters' errors carry the backend's error type).
#[derive(Debug, thiserror::Error)]
#[error("drawing a figure: {0}")]
pub struct PlotError(pub String);

impl From<PlotError> for std::io::Error {
    fn from(e: PlotError) -> Self {
        std::io::Error::other(e)
    }
}

pub(crate) fn err<E: std::fmt::Debug>(e: E) -> PlotError {
    PlotError(format!("{e:?}"))
}

/// Registers the bundled font under [`FAMILY`] (once per process).
pub fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font (checked by the tests); nothing to report otherwise.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// A figure: its size in pixels and how to draw it on any plotters backend.
pub trait Figure {
    /// Width and height, pixels.
    fn size(&self) -> (u32, u32);
    /// Draws the whole figure on `root` (already filled white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>;
}

/// The figure as SVG text.
pub fn svg<F: Figure>(fig: &F) -> Result<String, PlotError> {
    register_font();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, fig.size()).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        fig.draw(&root)?;
        root.present().map_err(err)?;
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// The figure as a PNG file (8-bit RGB).
pub fn png<F: Figure>(fig: &F) -> Result<Vec<u8>, PlotError> {
    register_font();
    let (w, h) = fig.size();
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        fig.draw(&root)?;
        root.present().map_err(err)?;
    }
    let mut bytes = Vec::new();
    {
        let mut enc = ::png::Encoder::new(&mut bytes, w, h);
        enc.set_color(::png::ColorType::Rgb);
        enc.set_depth(::png::BitDepth::Eight);
        let mut writer = enc.write_header().map_err(err)?;
        writer.write_image_data(&rgb).map_err(err)?;
    }
    Ok(bytes)
}

/// The PNG path beside an SVG path (same basename).
pub fn png_path(svg_path: &Path) -> PathBuf {
    svg_path.with_extension("png")
}

/// Writes the figure as `path` (SVG) and the PNG beside it, each whole or not at all. Returns the
/// SVG text (reports inline it).
pub fn write_figure<F: Figure>(path: &Path, fig: &F) -> std::io::Result<String> {
    let text = svg(fig)?;
    let image = png(fig)?;
    sim_core::output::write_atomic(path, &text)?;
    sim_core::output::write_atomic(png_path(path), image)?;
    Ok(text)
}

/// A number in a few significant digits with an SI suffix (k, M, G, T): 27988187 -> "28M".
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (d, s) = match a {
        a if a >= 1e12 => (1e12, "T"),
        a if a >= 1e9 => (1e9, "G"),
        a if a >= 1e6 => (1e6, "M"),
        a if a >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let x = v / d;
    let text = if x.abs() >= 100.0 || x.fract().abs() < 1e-9 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{s}")
}

/// The unit (divisor, name) a byte axis reaching `max` is labelled in.
pub fn byte_unit(max: f64) -> (f64, &'static str) {
    match max {
        m if m >= 1024f64.powi(3) => (1024f64.powi(3), "GiB"),
        m if m >= 1024f64.powi(2) => (1024f64.powi(2), "MiB"),
        m if m >= 1024.0 => (1024.0, "KiB"),
        _ => (1.0, "B"),
    }
}

/// Tick values on a log axis from `lo` to `hi`: the powers of two inside, thinned to at most
/// `max_ticks` (every second, fourth ... power), or, over more than 12 octaves, 1-2-5 decades.
pub fn log_ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    let mut pow2 = Vec::new();
    let mut v = 2f64.powf(lo.max(1e-12).log2().ceil());
    while v <= hi * (1.0 + 1e-9) {
        pow2.push(v);
        v *= 2.0;
    }
    if pow2.len() <= 12 {
        let stride = pow2.len().div_ceil(max_ticks.max(1)).max(1);
        return pow2.into_iter().step_by(stride).collect();
    }
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = decade * m;
            if t >= lo * (1.0 - 1e-9) && t <= hi * (1.0 + 1e-9) {
                out.push(t);
            }
        }
        decade *= 10.0;
    }
    out
}

/// A linear f64 axis from `lo` to `hi` whose grid lines and labels are exactly `ticks`.
#[derive(Clone, Debug)]
pub struct Axis {
    /// Value at the start.
    pub lo: f64,
    /// Value at the end.
    pub hi: f64,
    /// Where the ticks, labels and grid lines go.
    pub ticks: Vec<f64>,
}

impl Axis {
    /// The axis.
    pub fn new(lo: f64, hi: f64, ticks: Vec<f64>) -> Axis {
        Axis { lo, hi, ticks }
    }
}

impl Ranged for Axis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = (v - self.lo) / (self.hi - self.lo).max(f64::MIN_POSITIVE);
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// Text style of the given size in the bundled font.
pub(crate) fn font(size: f64) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

/// Draws a legend of `entries` (swatch, label) in a column starting at pixel (x, y).
pub(crate) fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x: i32,
    y: i32,
    entries: &[(Swatch, String)],
) -> Result<(), PlotError> {
    for (i, (sw, label)) in entries.iter().enumerate() {
        let cy = y + 18 * i as i32;
        sw.draw(area, (x, cy))?;
        area.draw(&Text::new(
            label.clone(),
            (x + 26, cy),
            font(13.0).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Left,
                plotters::style::text_anchor::VPos::Center,
            )),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// What a legend entry shows before its label.
#[derive(Clone, Copy, Debug)]
pub enum Swatch {
    /// A filled box.
    Box(RGBColor),
    /// A line with a filled marker.
    Line(RGBColor, Marker),
    /// A hollow marker alone.
    Hollow(RGBColor, Marker),
    /// A dashed line.
    Dashed(RGBColor),
    /// A hollow box (an outline drawn over bars).
    Outline(RGBColor),
    /// An arrow.
    Arrow(RGBColor),
    /// A short text in a grey box (e.g. a step number).
    Text(&'static str),
}

/// Marker shapes, cycled when series outnumber the palette.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Marker {
    /// Circle.
    Circle,
    /// Square.
    Square,
    /// Triangle.
    Triangle,
}

impl Marker {
    /// The marker of series `i` (the colour repeats every 8 series, the shape changes).
    pub fn of(i: usize) -> Marker {
        [Marker::Circle, Marker::Square, Marker::Triangle][(i / PALETTE.len()) % 3]
    }

    /// Draws the marker centred on pixel `c`: filled, or hollow (white inside, coloured ring).
    pub(crate) fn draw<DB: DrawingBackend>(
        self,
        area: &DrawingArea<DB, Shift>,
        c: (i32, i32),
        colour: RGBColor,
        filled: bool,
    ) -> Result<(), PlotError> {
        let r = 5;
        let (fill, ring) = if filled {
            (colour.filled(), colour.stroke_width(1))
        } else {
            (WHITE.filled(), colour.stroke_width(2))
        };
        let shape = |style: ShapeStyle| -> Result<(), PlotError> {
            match self {
                Marker::Circle => area.draw(&Circle::new(c, r, style)),
                Marker::Square => area.draw(&Rectangle::new([(c.0 - r, c.1 - r), (c.0 + r, c.1 + r)], style)),
                Marker::Triangle => area.draw(&Polygon::new(
                    vec![(c.0, c.1 - r - 1), (c.0 + r + 1, c.1 + r), (c.0 - r - 1, c.1 + r)],
                    style,
                )),
            }
            .map_err(err)
        };
        shape(fill)?;
        if !filled || self == Marker::Triangle {
            match self {
                Marker::Triangle => area
                    .draw(&PathElement::new(
                        vec![
                            (c.0, c.1 - r - 1),
                            (c.0 + r + 1, c.1 + r),
                            (c.0 - r - 1, c.1 + r),
                            (c.0, c.1 - r - 1),
                        ],
                        ring,
                    ))
                    .map_err(err)?,
                _ => shape(ring)?,
            }
        }
        Ok(())
    }
}

impl Swatch {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, (x, y): (i32, i32)) -> Result<(), PlotError> {
        match *self {
            Swatch::Box(c) => area
                .draw(&Rectangle::new([(x, y - 6), (x + 18, y + 6)], c.filled()))
                .map_err(err),
            Swatch::Line(c, m) => {
                area.draw(&PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)))
                    .map_err(err)?;
                m.draw(area, (x + 9, y), c, true)
            }
            Swatch::Hollow(c, m) => m.draw(area, (x + 9, y), c, false),
            Swatch::Dashed(c) => {
                for k in 0..3 {
                    area.draw(&PathElement::new(
                        vec![(x + 7 * k, y), (x + 7 * k + 4, y)],
                        c.stroke_width(2),
                    ))
                    .map_err(err)?;
                }
                Ok(())
            }
            Swatch::Arrow(c) => arrow(area, (x, y), (x + 18, y), c),
            Swatch::Outline(c) => area
                .draw(&Rectangle::new([(x, y - 6), (x + 18, y + 6)], c.stroke_width(2)))
                .map_err(err),
            Swatch::Text(t) => {
                area.draw(&Rectangle::new(
                    [(x, y - 8), (x + 18, y + 8)],
                    RGBColor(0xDD, 0xDD, 0xDD).filled(),
                ))
                .map_err(err)?;
                area.draw(&Text::new(
                    t,
                    (x + 9, y),
                    font(13.0).pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Center,
                    )),
                ))
                .map_err(err)
            }
        }
    }
}

/// A straight arrow from `a` to `b` (pixels) with a filled head at `b`.
pub(crate) fn arrow<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    a: (i32, i32),
    b: (i32, i32),
    c: RGBColor,
) -> Result<(), PlotError> {
    area.draw(&PathElement::new(vec![a, b], c.stroke_width(2)))
        .map_err(err)?;
    let (dx, dy) = ((b.0 - a.0) as f64, (b.1 - a.1) as f64);
    let len = (dx * dx + dy * dy).sqrt().max(1e-9);
    let (ux, uy) = (dx / len, dy / len);
    let (l, w) = (8.0, 4.0);
    let base = (b.0 as f64 - ux * l, b.1 as f64 - uy * l);
    let p1 = ((base.0 - uy * w).round() as i32, (base.1 + ux * w).round() as i32);
    let p2 = ((base.0 + uy * w).round() as i32, (base.1 - ux * w).round() as i32);
    area.draw(&Polygon::new(vec![b, p1, p2], c.filled())).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_numbers() {
        assert_eq!(si(27_988_187.0), "28M");
        assert_eq!(si(1.5e8), "150M");
        assert_eq!(si(2_500.0), "2.5k");
        assert_eq!(si(0.0), "0");
        assert_eq!(si(40.0), "40");
    }

    #[test]
    fn log_ticks_are_powers_of_two_or_decades() {
        assert_eq!(
            log_ticks(4096.0, 65536.0, 8),
            vec![4096.0, 8192.0, 16384.0, 32768.0, 65536.0]
        );
        // 1..2^20: 21 powers of two, too many: 1-2-5 decades instead.
        let t = log_ticks(1.0, 1048576.0, 8);
        assert_eq!(&t[..4], &[1.0, 2.0, 5.0, 10.0]);
        assert_eq!(*t.last().unwrap(), 1e6);
        // 10 powers of two, at most 5 ticks: every second one.
        assert_eq!(log_ticks(1.0, 512.0, 5), vec![1.0, 4.0, 16.0, 64.0, 256.0]);
    }

    #[test]
    fn the_bundled_font_parses() {
        assert!(plotters::style::register_font("test-font", FontStyle::Normal, FONT).is_ok());
    }
}
