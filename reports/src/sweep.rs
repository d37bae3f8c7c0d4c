//! Sweep outputs: the table (CSV, JSON) and the pictures of a capacity sweep's points, written the
//! same way whether the points come from one run or are merged from shards.

use std::fmt::Write as _;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::plot::{self, err, font, Axis, Figure, Marker, PlotError, Swatch, GREY, PALETTE};

/// One configuration's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Chip.
    pub chip: String,
    /// Chip count.
    pub chips: u32,
    /// Global batch.
    pub batch: u64,
    /// Step time, µs.
    pub step_time_us: f64,
    /// Throughput.
    pub samples_per_s: f64,
    /// Whether memory and limits fit.
    pub fits: bool,
    /// Bottleneck sentence.
    pub bottleneck: String,
    /// Largest observed ids per partition (the max_ids_per_partition this configuration needs, rounded to 8).
    pub needed_max_ids: u64,
    /// Likewise for unique ids.
    pub needed_max_unique_ids: u64,
    /// Cost per hour (chips x price).
    pub cost_per_hour: f64,
    /// Error, when the configuration could not run.
    pub error: Option<String>,
    /// Why not, constraint by constraint with the numbers (empty when it fits or could not run).
    #[serde(default)]
    pub fit_reasons: Vec<sim_core::summary::FitReason>,
}

/// The output files of a sweep, in the order they are written (each figure also as PNG beside it).
pub const SWEEP_FILES: [&str; 8] = [
    "sweep.csv",
    "sweep.json",
    "sweep.svg",
    "sweep.png",
    "step_time.svg",
    "step_time.png",
    "fit_map.svg",
    "fit_map.png",
];

/// `sweep.csv`: one line per point.
pub fn sweep_csv(points: &[SweepPoint]) -> String {
    let mut csv = String::from(
        "chip,chips,batch,step_time_us,samples_per_s,fits,needed_max_ids,needed_max_unique_ids,cost_per_hour,error,fit_reasons\n",
    );
    for p in points {
        let _ = writeln!(
            csv,
            "{},{},{},{:.3},{:.1},{},{},{},{:.2},{},{}",
            p.chip,
            p.chips,
            p.batch,
            p.step_time_us,
            p.samples_per_s,
            p.fits,
            p.needed_max_ids,
            p.needed_max_unique_ids,
            p.cost_per_hour,
            p.error.clone().unwrap_or_default().replace(',', ";"),
            csv_field(&sim_core::summary::fit_reasons_text(&p.fit_reasons))
        );
    }
    csv
}

/// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Writes [`SWEEP_FILES`] into `dir` (created if missing); `target` (samples/s) is drawn on the
/// throughput chart.
pub fn write_sweep_with_target(dir: &Path, points: &[SweepPoint], target: Option<f64>) -> std::io::Result<()> {
    // All of the files or none of them.
    let set = sim_core::output::OutputSet::begin();
    sim_core::output::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(points).map_err(std::io::Error::other)? + "\n";
    sim_core::output::write_atomic(dir.join("sweep.csv"), sweep_csv(points))?;
    sim_core::output::write_atomic(dir.join("sweep.json"), json)?;
    plot::write_figure(
        &dir.join("sweep.svg"),
        &SweepChart {
            points,
            metric: Metric::SamplesPerS,
            target,
        },
    )?;
    plot::write_figure(
        &dir.join("step_time.svg"),
        &SweepChart {
            points,
            metric: Metric::StepTime,
            target: None,
        },
    )?;
    plot::write_figure(&dir.join("fit_map.svg"), &FitMap { points })?;
    set.commit()
}

/// Why a point does not fit, from its `fit_reasons` when the point carries them (read through the
/// serialised point, so older points without the field simply have none).
pub fn fit_reasons(p: &SweepPoint) -> Vec<String> {
    serde_json::to_value(p).map(|v| reasons_in(&v)).unwrap_or_default()
}

/// The `fit_reasons` of a serialised point: strings as they are, objects by their message (or kind).
fn reasons_in(v: &serde_json::Value) -> Vec<String> {
    let Some(list) = v.get("fit_reasons").and_then(|r| r.as_array()) else {
        return Vec::new();
    };
    list.iter()
        .map(|r| match r {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Object(o) => ["message", "text", "reason", "detail", "kind", "what"]
                .iter()
                .find_map(|k| o.get(*k).and_then(|x| x.as_str()).map(str::to_string))
                .unwrap_or_else(|| r.to_string()),
            other => other.to_string(),
        })
        .collect()
}

/// The short form of a reason shown in a fit-map cell: its first word ("HBM: 120 GiB > 95 GiB" -> "HBM").
fn reason_code(r: &str) -> String {
    let word: String = r
        .split(|c: char| c == ':' || c == '_' || c.is_whitespace() || c == '(')
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .chars()
        .take(10)
        .collect();
    word
}

/// The metric a sweep chart shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// Samples per second.
    SamplesPerS,
    /// Step time (µs, drawn in ms when it reaches 1 ms).
    StepTime,
}

/// A metric against global batch, one line per (chip, chips) configuration; markers hollow where
/// the configuration does not fit; the target throughput as a dashed line.
pub struct SweepChart<'a> {
    /// The points (failed ones are left out).
    pub points: &'a [SweepPoint],
    /// What the y axis shows.
    pub metric: Metric,
    /// Target samples/s (drawn on the samples/s chart only).
    pub target: Option<f64>,
}

const LEGEND_W: u32 = 240;
const TARGET_COLOUR: RGBColor = RGBColor(0x55, 0x55, 0x55);

impl SweepChart<'_> {
    fn ok(&self) -> Vec<&SweepPoint> {
        self.points
            .iter()
            .filter(|p| p.error.is_none() && self.value(p) > 0.0)
            .collect()
    }

    fn value(&self, p: &SweepPoint) -> f64 {
        match self.metric {
            Metric::SamplesPerS => p.samples_per_s,
            Metric::StepTime => p.step_time_us,
        }
    }

    /// The configurations, in legend order.
    pub fn series(&self) -> Vec<(String, u32)> {
        let mut s: Vec<(String, u32)> = self.ok().iter().map(|p| (p.chip.clone(), p.chips)).collect();
        s.sort();
        s.dedup();
        s
    }
}

/// "Nice" ticks (1, 2, 2.5, 5 x 10^k steps) covering `lo..=hi`, about `n` of them.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        // Rounded to the step's precision so labels print without float noise.
        out.push((t / step).round() * step);
        t += step;
    }
    out
}

fn batch_label(b: f64) -> String {
    if b < 1e6 && (b - b.round()).abs() < 1e-6 {
        format!("{}", b.round() as u64)
    } else {
        plot::si(b)
    }
}

impl Figure for SweepChart<'_> {
    fn size(&self) -> (u32, u32) {
        let entries = self.series().len() as u32 + 4;
        (980, 540u32.max(110 + 18 * entries))
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let (w, _) = self.size();
        let ok = self.ok();
        let (title, ydesc, scale) = match self.metric {
            Metric::SamplesPerS => ("Throughput vs global batch", "throughput (samples/s)".to_string(), 1.0),
            Metric::StepTime => {
                let max = ok.iter().map(|p| p.step_time_us).fold(0.0, f64::max);
                if max >= 1000.0 {
                    ("Step time vs global batch", "step time (ms)".to_string(), 1e-3)
                } else {
                    ("Step time vs global batch", "step time (µs)".to_string(), 1.0)
                }
            }
        };
        let (plot_area, legend_area) = root.split_horizontally(w - LEGEND_W);
        if ok.is_empty() {
            plot_area
                .draw(&Text::new(
                    format!("{title}: no configuration ran"),
                    (20, 30),
                    font(18.0),
                ))
                .map_err(err)?;
            return Ok(());
        }
        let (bmin, bmax) = ok.iter().fold((f64::MAX, 0.0f64), |a, p| {
            (a.0.min(p.batch as f64), a.1.max(p.batch as f64))
        });
        // A log axis (base 2) once the batches span a decade.
        let log = bmax / bmin >= 10.0;
        let fwd = move |b: f64| if log { b.log2() } else { b };
        let inv = move |x: f64| if log { x.exp2() } else { x };
        let (x0, x1) = if log {
            (bmin.log2() - 0.3, bmax.log2() + 0.3)
        } else if bmax > bmin {
            let pad = (bmax - bmin) * 0.06;
            (bmin - pad, bmax + pad)
        } else {
            (bmin * 0.5, bmin * 1.5)
        };
        let xticks: Vec<f64> = if log {
            plot::log_ticks(bmin, bmax, 8).into_iter().map(fwd).collect()
        } else {
            nice_ticks(x0.max(0.0), x1, 6)
        };
        let target = match self.metric {
            Metric::SamplesPerS => self.target.filter(|t| *t > 0.0),
            Metric::StepTime => None,
        };
        let ymax = ok
            .iter()
            .map(|p| self.value(p) * scale)
            .fold(target.unwrap_or(0.0), f64::max)
            * 1.12;
        let yticks = nice_ticks(0.0, ymax, 8);
        let fmt_y = |v: &f64| match self.metric {
            Metric::SamplesPerS => plot::si(*v),
            Metric::StepTime => {
                let t = format!("{v:.3}");
                t.trim_end_matches('0').trim_end_matches('.').to_string()
            }
        };
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(title, font(22.0))
            .margin(12)
            .x_label_area_size(58)
            .y_label_area_size(86)
            .build_cartesian_2d(Axis::new(x0, x1, xticks), Axis::new(0.0, ymax, yticks))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(if log {
                "global batch (samples, log scale)"
            } else {
                "global batch (samples)"
            })
            .y_desc(ydesc)
            .x_label_formatter(&|x| batch_label(inv(*x)))
            .y_label_formatter(&fmt_y)
            .label_style(font(14.0))
            .axis_desc_style(font(16.0))
            .bold_line_style(RGBColor(0xE4, 0xE4, 0xE4))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(err)?;
        if let Some(t) = target {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x0, t), (x1, t)],
                    8,
                    5,
                    TARGET_COLOUR.stroke_width(2),
                ))
                .map_err(err)?;
            let (px, py) = chart.backend_coord(&(x0, t));
            root.draw(&Text::new(
                format!("target {} samples/s", plot::si(t)),
                (px + 6, py - 18),
                font(13.0).color(&TARGET_COLOUR),
            ))
            .map_err(err)?;
        }
        let series = self.series();
        let mut entries = Vec::new();
        for (i, (chip, chips)) in series.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let marker = Marker::of(i);
            let mut pts: Vec<&&SweepPoint> = ok.iter().filter(|p| &p.chip == chip && p.chips == *chips).collect();
            pts.sort_by_key(|p| p.batch);
            let xy: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (fwd(p.batch as f64), self.value(p) * scale))
                .collect();
            chart
                .draw_series(LineSeries::new(xy.clone(), colour.stroke_width(2)))
                .map_err(err)?;
            for (p, c) in pts.iter().zip(&xy) {
                marker.draw(root, chart.backend_coord(c), colour, p.fits)?;
            }
            entries.push((Swatch::Line(colour, marker), format!("{chips} x {chip}")));
        }
        entries.push((
            Swatch::Hollow(BLACK, Marker::Circle),
            "hollow: does not fit".to_string(),
        ));
        if let Some(t) = target {
            entries.push((
                Swatch::Dashed(TARGET_COLOUR),
                format!("target ({} samples/s)", plot::si(t)),
            ));
        }
        legend_area
            .draw(&Text::new("configuration (chips x chip)", (4, 50), font(14.0)))
            .map_err(err)?;
        plot::legend(&legend_area, 8, 78, &entries)
    }
}

/// A map of configurations (rows: chips x chip) against global batch: fits, does not fit (with the
/// reason when the point carries it), or could not run.
pub struct FitMap<'a> {
    /// The points.
    pub points: &'a [SweepPoint],
}

const FITS: RGBColor = PALETTE[2];
const NO_FIT: RGBColor = PALETTE[3];
const MAX_NOTES: usize = 10;

impl FitMap<'_> {
    fn rows(&self) -> Vec<(String, u32)> {
        let mut rows: Vec<(String, u32)> = self.points.iter().map(|p| (p.chip.clone(), p.chips)).collect();
        rows.sort();
        rows.dedup();
        rows
    }

    fn cols(&self) -> Vec<u64> {
        let mut cols: Vec<u64> = self.points.iter().map(|p| p.batch).collect();
        cols.sort_unstable();
        cols.dedup();
        cols
    }

    /// The notes under the map: why each configuration does not fit or could not run (all of them,
    /// the figure shows the first [`MAX_NOTES`]).
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (chip, chips) in self.rows() {
            for b in self.cols() {
                let Some(p) = self
                    .points
                    .iter()
                    .find(|p| p.chip == chip && p.chips == chips && p.batch == b)
                else {
                    continue;
                };
                if let Some(e) = &p.error {
                    out.push(format!("{chips} x {chip}, batch {b}: could not run: {e}"));
                } else if !p.fits {
                    let r = fit_reasons(p);
                    if !r.is_empty() {
                        out.push(format!("{chips} x {chip}, batch {b}: {}", r.join("; ")));
                    }
                }
            }
        }
        out
    }

    fn cell_w(&self) -> u32 {
        78
    }
}

impl Figure for FitMap<'_> {
    fn size(&self) -> (u32, u32) {
        let (r, c) = (self.rows().len() as u32, self.cols().len() as u32);
        let notes = self.notes().len().min(MAX_NOTES + 1) as u32;
        (
            (200 + self.cell_w() * c.max(1) + 40).max(760),
            120 + 30 * r.max(1) + 60 + 46 + 18 * (notes + 1),
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let (rows, cols) = (self.rows(), self.cols());
        let (_, h) = self.size();
        let notes = self.notes();
        let map_h = 120 + 30 * rows.len().max(1) as u32;
        let (map_area, below) = root.split_vertically(map_h);
        let (nr, nc) = (rows.len().max(1) as f64, cols.len().max(1) as f64);
        let mut chart = ChartBuilder::on(&map_area)
            .caption("Does it fit? Configuration x global batch", font(22.0))
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(110)
            .build_cartesian_2d(
                Axis::new(0.0, nc, (0..cols.len()).map(|j| j as f64 + 0.5).collect()),
                Axis::new(0.0, nr, (0..rows.len()).map(|i| i as f64 + 0.5).collect()),
            )
            .map_err(err)?;
        let row_name = |y: f64| -> String {
            // Row 0 at the top.
            let i = (nr - y - 0.5).round();
            rows.get(i as usize)
                .map(|(c, n)| format!("{n} x {c}"))
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("global batch (samples)")
            .y_desc("configuration (chips x chip)")
            .x_label_formatter(&|x| cols.get(x.floor() as usize).map(|b| b.to_string()).unwrap_or_default())
            .y_label_formatter(&|y| row_name(*y))
            .label_style(font(13.0))
            .axis_desc_style(font(15.0))
            .draw()
            .map_err(err)?;
        for (i, (chip, chips)) in rows.iter().enumerate() {
            let y = nr - i as f64 - 1.0;
            for (j, b) in cols.iter().enumerate() {
                let Some(p) = self
                    .points
                    .iter()
                    .find(|p| &p.chip == chip && p.chips == *chips && p.batch == *b)
                else {
                    continue;
                };
                let (fill, label) = if p.error.is_some() {
                    (GREY, "error".to_string())
                } else if p.fits {
                    (FITS, "fits".to_string())
                } else {
                    let codes: Vec<String> = fit_reasons(p).iter().map(|r| reason_code(r)).collect();
                    let mut codes = codes;
                    codes.dedup();
                    (
                        NO_FIT,
                        if codes.is_empty() {
                            "no fit".to_string()
                        } else {
                            codes.join("+")
                        },
                    )
                };
                let x = j as f64;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x + 0.04, y + 0.08), (x + 0.96, y + 0.92)],
                        fill.filled(),
                    )))
                    .map_err(err)?;
                let c = chart.backend_coord(&(x + 0.5, y + 0.5));
                root.draw(&Text::new(
                    label,
                    c,
                    font(13.0).pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Center,
                    )),
                ))
                .map_err(err)?;
            }
        }
        let _ = h;
        plot::legend(
            &below,
            20,
            20,
            &[
                (
                    Swatch::Box(FITS),
                    "fits (HBM, on-chip memory and id limits)".to_string(),
                ),
                (
                    Swatch::Box(NO_FIT),
                    "does not fit (cell: why, when the point says)".to_string(),
                ),
                (Swatch::Box(GREY), "could not run".to_string()),
            ],
        )?;
        let top = 20 + 18 * 3 + 8;
        let silent = self
            .points
            .iter()
            .any(|p| p.error.is_none() && !p.fits && fit_reasons(p).is_empty());
        if silent {
            below
                .draw(&Text::new(
                    "Why not: these points carry no reasons; `tpusim run --chip C --chips N --batch B` gives them.",
                    (20, top),
                    font(13.0),
                ))
                .map_err(err)?;
        }
        let top = if silent { top + 22 } else { top };
        if !notes.is_empty() {
            below.draw(&Text::new("Why not:", (20, top), font(14.0))).map_err(err)?;
            for (k, n) in notes.iter().take(MAX_NOTES).enumerate() {
                below
                    .draw(&Text::new(n.clone(), (30, top + 18 * (k as i32 + 1)), font(12.0)))
                    .map_err(err)?;
            }
            if notes.len() > MAX_NOTES {
                below
                    .draw(&Text::new(
                        format!("... and {} more in sweep.csv", notes.len() - MAX_NOTES),
                        (30, top + 18 * (MAX_NOTES as i32 + 1)),
                        font(12.0),
                    ))
                    .map_err(err)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_reasons_are_read_from_whatever_the_point_carries() {
        let v = serde_json::json!({"fits": false, "fit_reasons": [
            "HBM: 120.0 GiB needed, 95.0 GiB per chip",
            {"kind": "runtime_limits", "message": "ids: 900 per partition > max_ids 640"},
            {"kind": "vmem"}
        ]});
        assert_eq!(
            reasons_in(&v),
            [
                "HBM: 120.0 GiB needed, 95.0 GiB per chip",
                "ids: 900 per partition > max_ids 640",
                "vmem"
            ]
        );
        assert_eq!(reasons_in(&serde_json::json!({"fits": false})), Vec::<String>::new());
        assert_eq!(reason_code("HBM: 120.0 GiB needed"), "HBM");
        assert_eq!(reason_code("runtime_limits"), "runtime");
        assert_eq!(reason_code("TileSpmemOverflowing"), "TileSpmemO");
    }
}
