//! reports: pictures (plotters, SVG and PNG) and summaries (JSON with a stable schema, Markdown and a
//! self-contained HTML page) of recorded runs.
//!
//! Architecture invariant: reports never computes a simulated number; it presents what a run recorded.

pub mod plot;
pub mod sweep;

/// The interactive pipelining lesson: one self-contained page (inline CSS and JS, no network)
/// that draws precomputed runs. `grid_json` is the serialized `workloads::lesson::LessonGrid`; the
/// page computes nothing, it picks the run the sliders point at and draws it.
pub fn lesson_html(grid_json: &str) -> String {
    // Inside <script>, "</" would end the element.
    include_str!("lesson/page.html").replace("/*LESSON_DATA*/", &grid_json.replace("</", "<\\/"))
}

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use sim_core::recorder::{ArgValue, Recorder, Span};
use sim_core::summary::RunSummary;

use plot::{err, font, Axis, Figure, PlotError, Swatch, PALETTE};

/// The rows of the Gantt chart: span category, short row label, legend label, colour.
const ROWS: &[(&str, &str, &str, RGBColor)] = &[
    ("sc_fwd", "SC fwd", "SparseCore forward (lookup)", PALETTE[0]),
    ("sc_bwd", "SC bwd", "SparseCore backward (update)", PALETTE[5]),
    ("tc_fwd", "TC fwd", "TensorCore forward", PALETTE[3]),
    ("tc_bwd", "TC bwd", "TensorCore backward", PALETTE[1]),
];
/// The staleness arrows' colour.
const ARROW: RGBColor = PALETTE[4];

fn step_of(s: &Span) -> Option<i64> {
    s.args
        .iter()
        .find(|(k, _)| k == "step")
        .and_then(|(_, v)| if let ArgValue::Int(i) = v { Some(*i) } else { None })
}

fn on_unit(s: &Span) -> bool {
    s.track.thread == "TC" || s.track.thread.starts_with("SC ")
}

/// One bar per (stage, step): from the first to the last span of that stage and step on its units.
pub fn stage_bars(rec: &Recorder) -> BTreeMap<(usize, i64), (u64, u64)> {
    let mut bars: BTreeMap<(usize, i64), (u64, u64)> = BTreeMap::new();
    for s in rec.spans.iter().filter(|s| on_unit(s)) {
        let (Some(row), Some(step)) = (ROWS.iter().position(|r| r.0 == s.category), step_of(s)) else {
            continue;
        };
        let e = bars.entry((row, step)).or_insert((u64::MAX, 0));
        e.0 = e.0.min(s.start.0);
        e.1 = e.1.max(s.end.0);
    }
    bars
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The pipeline Gantt chart of one or more runs (e.g. sequential above, pipelined below): rows
/// SC fwd, SC bwd, TC fwd, TC bwd coloured by stage, each bar numbered with its training step, and
/// the staleness arrows of the runs' flows.
pub struct Gantt<'a> {
    /// Title.
    pub title: String,
    /// Panels: label, recording, step time (µs).
    pub panels: Vec<(&'a str, &'a Recorder, f64)>,
}

const GANTT_W: u32 = 1100;
const GANTT_HEADER: u32 = 96;
const GANTT_PANEL: u32 = 210;

impl Gantt<'_> {
    fn end_ps(&self) -> u64 {
        self.panels
            .iter()
            .flat_map(|(_, r, _)| stage_bars(r).into_values().map(|b| b.1))
            .max()
            .unwrap_or(1)
            .max(1)
    }
}

/// Draws `entries` left to right from pixel (x, y) on `area`; returns the x after the last.
fn legend_row<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    mut x: i32,
    y: i32,
    entries: &[(Swatch, String)],
) -> Result<i32, PlotError> {
    for (sw, label) in entries {
        plot::legend(area, x, y, &[(*sw, label.clone())])?;
        let (tw, _) = area.estimate_text_size(label, &font(13.0)).map_err(err)?;
        x += 26 + tw as i32 + 22;
    }
    Ok(x)
}

impl Figure for Gantt<'_> {
    fn size(&self) -> (u32, u32) {
        (
            GANTT_W,
            GANTT_HEADER + GANTT_PANEL * self.panels.len().max(1) as u32 + 24,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let (header, body) = root.split_vertically(GANTT_HEADER);
        header
            .draw(&Text::new(self.title.clone(), (20, 10), font(22.0)))
            .map_err(err)?;
        let stages: Vec<(Swatch, String)> = ROWS
            .iter()
            .map(|(_, _, legend, colour)| (Swatch::Box(*colour), (*legend).to_string()))
            .collect();
        legend_row(&header, 20, 52, &stages)?;
        legend_row(
            &header,
            20,
            76,
            &[
                (
                    Swatch::Arrow(ARROW),
                    "stale gradients: SC backward of step i feeds SC forward of step i+2".to_string(),
                ),
                (Swatch::Text("3"), "numbers in bars: training step".to_string()),
            ],
        )?;
        let end_us = self.end_ps() as f64 / 1e6;
        let x_hi = end_us * 1.01;
        let xticks = sweep::nice_ticks(0.0, end_us, 10);
        let areas = body.split_evenly((self.panels.len().max(1), 1));
        let n = self.panels.len();
        for (pi, ((label, rec, step_us), area)) in self.panels.iter().zip(areas).enumerate() {
            let last = pi + 1 == n;
            let nrows = ROWS.len() as f64;
            let mut chart = ChartBuilder::on(&area)
                .caption(format!("{label}: step time {step_us:.1} µs"), font(17.0))
                .margin_left(12)
                .margin_right(24)
                .margin_top(4)
                .x_label_area_size(if last { 52 } else { 26 })
                .y_label_area_size(70)
                .build_cartesian_2d(
                    Axis::new(0.0, x_hi, xticks.clone()),
                    Axis::new(0.0, nrows, (0..ROWS.len()).map(|i| i as f64 + 0.5).collect()),
                )
                .map_err(err)?;
            // Row 0 at the top.
            let row_y = |row: usize| nrows - row as f64 - 1.0;
            let row_name = |y: f64| -> String {
                let i = (nrows - y - 0.5).round();
                ROWS.get(i as usize).map(|r| r.1.to_string()).unwrap_or_default()
            };
            let fmt_x = |v: &f64| sweep_tick(*v);
            let fmt_y = |y: &f64| row_name(*y);
            let mut mesh = chart.configure_mesh();
            mesh.x_label_formatter(&fmt_x)
                .y_label_formatter(&fmt_y)
                .label_style(font(13.0))
                .axis_desc_style(font(15.0))
                .bold_line_style(RGBColor(0xEC, 0xEC, 0xEC))
                .light_line_style(TRANSPARENT)
                .disable_y_mesh();
            if last {
                mesh.x_desc("simulated time (µs)");
            }
            mesh.draw().map_err(err)?;
            let bars = stage_bars(rec);
            for (&(row, step), &(a, b)) in &bars {
                let (a_us, b_us) = (a as f64 / 1e6, b as f64 / 1e6);
                let y = row_y(row);
                let colour = ROWS[row].3;
                chart
                    .draw_series([
                        Rectangle::new([(a_us, y + 0.14), (b_us, y + 0.86)], colour.filled()),
                        Rectangle::new([(a_us, y + 0.14), (b_us, y + 0.86)], WHITE.stroke_width(1)),
                    ])
                    .map_err(err)?;
                let (p0, p1) = (chart.backend_coord(&(a_us, y)), chart.backend_coord(&(b_us, y)));
                if p1.0 - p0.0 >= 16 {
                    // White on the dark stage colours, black on the light ones.
                    let ink = if row == 0 || row == 2 { WHITE } else { BLACK };
                    let c = chart.backend_coord(&((a_us + b_us) / 2.0, y + 0.5));
                    root.draw(&Text::new(
                        step.to_string(),
                        c,
                        font(13.0).color(&ink).pos(Pos::new(HPos::Center, VPos::Center)),
                    ))
                    .map_err(err)?;
                }
            }
            for f in &rec.flows {
                let (Some(sa), Some(sb)) = (rec.spans.get(f.from.0), rec.spans.get(f.to.0)) else {
                    continue;
                };
                let (ra, rb) = (
                    ROWS.iter().position(|r| r.0 == sa.category),
                    ROWS.iter().position(|r| r.0 == sb.category),
                );
                let (Some(ra), Some(rb), Some(ka), Some(kb)) = (ra, rb, step_of(sa), step_of(sb)) else {
                    continue;
                };
                let (Some(&(_, ea)), Some(&(sb_start, _))) = (bars.get(&(ra, ka)), bars.get(&(rb, kb))) else {
                    continue;
                };
                let from = chart.backend_coord(&(ea as f64 / 1e6, row_y(ra) + 0.5));
                let to = chart.backend_coord(&(sb_start as f64 / 1e6, row_y(rb) + 0.5));
                plot::arrow(root, from, to, ARROW)?;
            }
        }
        Ok(())
    }
}

/// A time tick label: whole numbers without decimals, others with as few as they need.
fn sweep_tick(v: f64) -> String {
    let t = format!("{v:.2}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The Gantt chart as SVG text (see [`Gantt`]).
pub fn gantt_svg(panels: &[(&str, &Recorder, f64)], title: &str) -> String {
    let g = Gantt {
        title: title.to_string(),
        panels: panels.to_vec(),
    };
    plot::svg(&g).unwrap_or_else(|e| {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"40\"><text x=\"10\" y=\"20\">{}</text></svg>\n",
            escape(&e.to_string())
        )
    })
}

/// Horizontal bars, one per item, on a titled value axis.
pub struct Bars {
    /// Title.
    pub title: String,
    /// The value axis' title, with its unit.
    pub x_desc: String,
    /// Items: name, value (in the axis' unit), label printed at the bar's end, colour.
    pub items: Vec<(String, f64, String, RGBColor)>,
    /// The axis' upper end (at least the largest value).
    pub x_max: f64,
}

impl Figure for Bars {
    fn size(&self) -> (u32, u32) {
        (900, 150 + 44 * self.items.len().max(1) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let max = self
            .items
            .iter()
            .map(|i| i.1)
            .fold(self.x_max, f64::max)
            .max(f64::MIN_POSITIVE);
        // Room on the right for the longest label past the longest bar.
        let hi = max * 1.3;
        let n = self.items.len() as f64;
        let names: Vec<String> = self.items.iter().map(|i| i.0.clone()).collect();
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, font(20.0))
            .margin(14)
            .x_label_area_size(56)
            .y_label_area_size(120)
            .build_cartesian_2d(
                Axis::new(0.0, hi, sweep::nice_ticks(0.0, max, 6)),
                Axis::new(0.0, n.max(1.0), (0..self.items.len()).map(|i| i as f64 + 0.5).collect()),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc.clone())
            .x_label_formatter(&|v| sweep_tick(*v))
            .y_label_formatter(&|y| names.get((n - y - 0.5).round() as usize).cloned().unwrap_or_default())
            .label_style(font(14.0))
            .axis_desc_style(font(15.0))
            .bold_line_style(RGBColor(0xE4, 0xE4, 0xE4))
            .light_line_style(TRANSPARENT)
            .disable_y_mesh()
            .draw()
            .map_err(err)?;
        for (i, (_, v, label, colour)) in self.items.iter().enumerate() {
            let y = n - i as f64 - 1.0;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y + 0.2), (v.max(0.0), y + 0.8)],
                    colour.filled(),
                )))
                .map_err(err)?;
            let (px, py) = chart.backend_coord(&(v.max(0.0), y + 0.5));
            root.draw(&Text::new(
                label.clone(),
                (px + 6, py),
                font(14.0).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
        }
        Ok(())
    }
}

/// The busy fraction of each unit (the report's utilisation figure).
pub fn utilisation_figure(s: &RunSummary) -> Bars {
    let b = &s.busy_fraction;
    let units = [
        ("TensorCore", b.tc),
        ("SparseCore", b.sc),
        ("HBM", b.hbm),
        ("ICI", b.ici),
        ("host", b.host),
    ];
    Bars {
        title: "Utilisation: busy share of the simulated time per unit".into(),
        x_desc: "busy (% of simulated time)".into(),
        items: units
            .iter()
            .enumerate()
            .map(|(i, (n, v))| ((*n).to_string(), v * 100.0, format!("{:.1}%", v * 100.0), PALETTE[i]))
            .collect(),
        x_max: 100.0,
    }
}

/// Peak use of each memory space against its capacity.
pub fn memory_figure(s: &RunSummary) -> Bars {
    Bars {
        title: "Peak memory per space".into(),
        x_desc: "peak use (% of capacity)".into(),
        items: s
            .peak_memory_bytes
            .iter()
            .map(|(k, v)| {
                let cap = s.capacity_bytes.get(k).copied().unwrap_or(0);
                let pct = *v as f64 * 100.0 / cap.max(1) as f64;
                let colour = if *v > cap { PALETTE[3] } else { PALETTE[0] };
                let label = format!(
                    "{} of {} ({})",
                    sim_core::units::bytes(*v),
                    sim_core::units::bytes(cap),
                    percent(pct)
                );
                (space_name(k), pct, label, colour)
            })
            .collect(),
        x_max: 100.0,
    }
}

/// A memory space as the guides write it.
fn space_name(k: &str) -> String {
    match k {
        "hbm" => "HBM".into(),
        "vmem" => "VMEM".into(),
        "tilespmem" => "TileSpmem".into(),
        "spmem" => "Spmem".into(),
        "smem" => "SMEM".into(),
        other => other.into(),
    }
}

/// HBM bytes moved per step: data and padding.
pub fn hbm_traffic_figure(s: &RunSummary) -> Bars {
    let total = s.hbm_bytes_per_step;
    let pad = s.hbm_padding_bytes_per_step.min(total);
    let (div, unit) = plot::byte_unit(total as f64);
    let item = |name: &str, b: u64, colour| {
        (
            name.to_string(),
            b as f64 / div,
            format!(
                "{} ({})",
                sim_core::units::bytes(b),
                percent(b as f64 * 100.0 / total.max(1) as f64)
            ),
            colour,
        )
    };
    Bars {
        title: format!("HBM traffic per step: {} in all", sim_core::units::bytes(total)),
        x_desc: format!("bytes per step ({unit})"),
        items: vec![item("data", total - pad, PALETTE[0]), item("padding", pad, PALETTE[3])],
        x_max: 0.0,
    }
}

/// A percentage with sensible digits: 0.08 -> "0.08%", 12.34 -> "12.3%", 100 -> "100%".
fn percent(p: f64) -> String {
    if p == 0.0 {
        "0%".into()
    } else if p < 1.0 {
        format!("{p:.2}%")
    } else if p < 100.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// Everything a report shows.
pub struct ReportInput {
    /// Title.
    pub title: String,
    /// The summary of the run the report is about.
    pub summary: RunSummary,
    /// Panels of the Gantt chart: label, recording, step time (µs).
    pub gantt: Vec<(String, Recorder, f64)>,
    /// The bottleneck sentence.
    pub bottleneck: String,
    /// Chip constants: field, value, source.
    pub chip_constants: Vec<(String, String, String)>,
    /// Padding per buffer: name, padded bytes, unpadded bytes.
    pub padding_per_buffer: Vec<(String, u64, u64)>,
    /// Settings and their effects: knob, setting, effect.
    pub knobs: Vec<(String, String, String)>,
    /// Advice and warnings of the run.
    pub warnings: Vec<String>,
    /// Peak HBM by kind: what, bytes.
    pub memory_breakdown: Vec<(String, u64)>,
}

/// Files a report wrote.
#[derive(Debug, Clone)]
pub struct ReportPaths {
    /// summary.json.
    pub summary: PathBuf,
    /// report.md.
    pub markdown: PathBuf,
    /// report.html.
    pub html: PathBuf,
    /// gantt.svg (gantt.png beside it).
    pub gantt: PathBuf,
    /// The other figures: busy.svg, memory.svg, hbm_traffic.svg (each with its PNG).
    pub figures: Vec<PathBuf>,
}

fn markdown(r: &ReportInput) -> String {
    use sim_core::units::{bytes, duration_us, percent, rate};
    let s = &r.summary;
    let mut md = format!(
        "# {}\n\n{}\n\n![pipeline](gantt.svg)\n\n![utilisation](busy.svg)\n\n![memory](memory.svg)\n\n![HBM traffic](hbm_traffic.svg)\n\n## Summary\n\n| figure | value |\n|---|---|\n",
        r.title, r.bottleneck
    );
    let fits = if s.fits && s.fit_reasons.is_empty() {
        "yes".to_string()
    } else {
        format!(
            "no: {}",
            sim_core::summary::fit_reasons_text(&s.fit_reasons).replace('|', "/")
        )
    };
    let _ = writeln!(
        md,
        "| step time | {} |\n| samples/s | {} |\n| TC/SC overlap | {} |\n| HBM per step | {} ({} padding) |\n| minibatches per step | {} |\n| dropped ids per step | {} |\n| fits | {fits} |",
        duration_us(s.step_time_us),
        rate(s.samples_per_s, "samples/s"),
        percent(s.overlap_fraction),
        bytes(s.hbm_bytes_per_step),
        percent(s.hbm_padding_bytes_per_step as f64 / s.hbm_bytes_per_step.max(1) as f64),
        s.minibatches_per_step,
        s.dropped_ids_per_step
    );
    let b = &s.busy_fraction;
    let _ = writeln!(
        md,
        "\n## Busy fraction\n\n| TC | SC | HBM | ICI | host |\n|---|---|---|---|---|\n| {} | {} | {} | {} | {} |",
        percent(b.tc),
        percent(b.sc),
        percent(b.hbm),
        percent(b.ici),
        percent(b.host)
    );
    let _ = writeln!(
        md,
        "\n## Memory per space\n\n| space | peak | capacity |\n|---|---|---|"
    );
    for (k, v) in &s.peak_memory_bytes {
        let _ = writeln!(
            md,
            "| {k} | {} | {} |",
            bytes(*v),
            bytes(s.capacity_bytes.get(k).copied().unwrap_or(0))
        );
    }
    if !r.memory_breakdown.is_empty() {
        let _ = writeln!(md, "\n## HBM per chip by kind\n\n| what | size |\n|---|---|");
        for (k, v) in &r.memory_breakdown {
            let _ = writeln!(md, "| {k} | {} |", bytes(*v));
        }
    }
    let _ = writeln!(md, "\n## Limits\n\n| stack | compiles | run time | max_ids | max_unique | observed ids | observed unique |\n|---|---|---|---|---|---|---|");
    for l in &s.limits {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            l.stack,
            l.compiles,
            l.runtime,
            l.max_ids_per_partition,
            l.max_unique_ids_per_partition,
            l.observed_max_ids,
            l.observed_max_unique_ids
        );
    }
    let _ = writeln!(
        md,
        "\n## Padding per buffer\n\n| buffer | padded | unpadded | overhead |\n|---|---|---|---|"
    );
    for (n, p, u) in &r.padding_per_buffer {
        let _ = writeln!(
            md,
            "| {n} | {} | {} | {} |",
            bytes(*p),
            bytes(*u),
            percent(p.saturating_sub(*u) as f64 / (*u).max(1) as f64)
        );
    }
    if !r.knobs.is_empty() {
        let _ = writeln!(md, "\n## Settings\n\n| knob | setting | effect |\n|---|---|---|");
        for (k, v, e) in &r.knobs {
            let _ = writeln!(md, "| {k} | {} | {} |", v.replace('|', "/"), e.replace('|', "/"));
        }
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(md, "\n## Warnings\n");
        for w in &r.warnings {
            let _ = writeln!(md, "- {w}");
        }
    }
    if !s.loss.is_empty() {
        let _ = writeln!(
            md,
            "\n## Loss (functional mode)\n\n{}",
            s.loss.iter().map(|l| format!("{l:.4}")).collect::<Vec<_>>().join(", ")
        );
    }
    let _ = writeln!(
        md,
        "\n## Chip constants used\n\n| field | value | source |\n|---|---|---|"
    );
    for (k, v, src) in &r.chip_constants {
        let _ = writeln!(md, "| {k} | {v} | {} |", src.replace('|', "/"));
    }
    md
}

/// The files [`write_report`] writes into its directory.
pub const REPORT_FILES: [&str; 11] = [
    "report.html",
    "report.md",
    "summary.json",
    "gantt.svg",
    "gantt.png",
    "busy.svg",
    "busy.png",
    "memory.svg",
    "memory.png",
    "hbm_traffic.svg",
    "hbm_traffic.png",
];

/// Writes summary.json, report.md, report.html (self-contained) and the figures (gantt, busy,
/// memory, hbm_traffic; each as .svg and .png) into `dir`.
pub fn write_report(dir: &Path, r: &ReportInput) -> std::io::Result<ReportPaths> {
    // All of the report or none of it.
    let set = sim_core::output::OutputSet::begin();
    sim_core::output::create_dir_all(dir)?;
    let gantt = Gantt {
        title: r.title.clone(),
        panels: r.gantt.iter().map(|(l, rec, t)| (l.as_str(), rec, *t)).collect(),
    };
    let paths = ReportPaths {
        summary: dir.join("summary.json"),
        markdown: dir.join("report.md"),
        html: dir.join("report.html"),
        gantt: dir.join("gantt.svg"),
        figures: ["busy.svg", "memory.svg", "hbm_traffic.svg"]
            .iter()
            .map(|f| dir.join(f))
            .collect(),
    };
    sim_core::output::write_atomic(
        &paths.summary,
        serde_json::to_string_pretty(&r.summary).map_err(std::io::Error::other)? + "\n",
    )?;
    let gantt = plot::write_figure(&paths.gantt, &gantt)?;
    let busy = plot::write_figure(&dir.join("busy.svg"), &utilisation_figure(&r.summary))?;
    let mem = plot::write_figure(&dir.join("memory.svg"), &memory_figure(&r.summary))?;
    let traffic = plot::write_figure(&dir.join("hbm_traffic.svg"), &hbm_traffic_figure(&r.summary))?;
    let md = markdown(r);
    sim_core::output::write_atomic(&paths.markdown, &md)?;
    // HTML: the Markdown tables as HTML, pictures inline.
    let mut html = format!("<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:left}}</style></head><body>\n", escape(&r.title));
    let mut in_table = false;
    for line in md.lines() {
        if line.starts_with("|---") {
            continue;
        }
        if let Some(cells) = line.strip_prefix('|') {
            if !in_table {
                html.push_str("<table>\n");
                in_table = true;
            }
            html.push_str("<tr>");
            for c in cells.trim_end_matches('|').split('|') {
                let _ = write!(html, "<td>{}</td>", escape(c.trim()));
            }
            html.push_str("</tr>\n");
            continue;
        }
        if in_table {
            html.push_str("</table>\n");
            in_table = false;
        }
        if let Some(h) = line.strip_prefix("## ") {
            let _ = writeln!(html, "<h2>{}</h2>", escape(h));
        } else if let Some(h) = line.strip_prefix("# ") {
            let _ = writeln!(html, "<h1>{}</h1>", escape(h));
        } else if line.starts_with("![pipeline]") {
            html.push_str(&gantt);
            html.push_str(&busy);
            html.push_str(&mem);
            html.push_str(&traffic);
        } else if line.starts_with("![") {
            // The other figures are inline above, with the Gantt chart.
        } else if !line.is_empty() {
            let _ = writeln!(html, "<p>{}</p>", escape(line));
        }
    }
    if in_table {
        html.push_str("</table>\n");
    }
    html.push_str("</body></html>\n");
    sim_core::output::write_atomic(&paths.html, html)?;
    set.commit()?;
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim_core::recorder::Track;
    use sim_core::time::SimTime;

    fn rec(pipelined: bool) -> Recorder {
        let mut r = Recorder::new();
        let mut ids = Vec::new();
        for step in 0..3i64 {
            let base = if pipelined { step as u64 * 60 } else { step as u64 * 100 };
            for (k, (cat, thread)) in [
                ("sc_fwd", "SC 0"),
                ("tc_fwd", "TC"),
                ("tc_bwd", "TC"),
                ("sc_bwd", "SC 0"),
            ]
            .iter()
            .enumerate()
            {
                let id = r.span(Span {
                    track: Track {
                        process: "chip 0".into(),
                        thread: (*thread).into(),
                    },
                    name: format!("{cat} {step}"),
                    category: (*cat).into(),
                    start: SimTime((base + k as u64 * 25) * 1_000_000),
                    end: SimTime((base + k as u64 * 25 + 20) * 1_000_000),
                    args: vec![("step".into(), ArgValue::Int(step))],
                });
                ids.push((step, *cat, id));
            }
        }
        if pipelined {
            let find = |s: i64, c: &str| ids.iter().find(|x| x.0 == s && x.1 == c).unwrap().2;
            r.flow(find(0, "sc_bwd"), find(2, "sc_fwd"), "stale gradients");
        }
        r
    }

    /// `<rect` elements whose fill is `colour`.
    fn rects(svg: &str, colour: &str) -> usize {
        svg.split("<rect")
            .skip(1)
            .filter(|el| el[..el.find("/>").unwrap()].contains(&format!("fill=\"{colour}\"")))
            .count()
    }

    #[test]
    fn gantt_has_rows_bars_step_numbers_legend_and_arrows() {
        let (s, p) = (rec(false), rec(true));
        let svg = gantt_svg(&[("sequential", &s, 100.0), ("pipelined", &p, 60.0)], "demo");
        for text in [
            "demo",
            "SC fwd",
            "SC bwd",
            "TC fwd",
            "TC bwd",
            "SparseCore forward (lookup)",
            "SparseCore backward (update)",
            "TensorCore forward",
            "TensorCore backward",
            "stale gradients: SC backward of step i feeds SC forward of step i+2",
            "numbers in bars: training step",
            "sequential: step time 100.0 µs",
            "pipelined: step time 60.0 µs",
            "simulated time (µs)",
        ] {
            assert!(svg.contains(&format!("\n{text}\n")), "{text}");
        }
        // Each stage: 3 steps x 2 panels of bars, plus its legend box; the four colours differ.
        for colour in ["#0072B2", "#56B4E9", "#D55E00", "#E69F00"] {
            assert_eq!(rects(&svg, colour), 7, "{colour}");
        }
        // Bars are 20 us of 295 us on ~1000 px: wide enough for their step number, in each of the
        // 4 rows of both panels.
        assert_eq!(svg.matches("\n1\n").count(), 8);
        assert_eq!(svg.matches("\n2\n").count(), 8);
        // One flow, one arrow (plus the legend's): a line and a head each.
        assert_eq!(
            svg.matches("<polyline fill=\"none\" opacity=\"1\" stroke=\"#CC79A7\"")
                .count(),
            2
        );
        assert_eq!(svg.matches("<polygon").count(), 2);
        assert_eq!(
            svg,
            gantt_svg(&[("sequential", &s, 100.0), ("pipelined", &p, 60.0)], "demo")
        );
    }

    #[test]
    fn report_files_are_written_and_deterministic() {
        let dir = std::env::temp_dir().join(format!("report-{}", std::process::id()));
        let input = ReportInput {
            title: "t".into(),
            summary: RunSummary::default(),
            gantt: vec![("p".into(), rec(true), 60.0)],
            bottleneck: "x-bound".into(),
            chip_constants: vec![("hbm".into(), "1".into(), "O: doc".into())],
            padding_per_buffer: vec![("table".into(), 32, 4)],
            knobs: vec![("k".into(), "on".into(), "faster".into())],
            warnings: vec!["stack s (1 table) outside 5-100".into()],
            memory_breakdown: vec![("heap".into(), 7)],
        };
        let p = write_report(&dir, &input).unwrap();
        let html = std::fs::read_to_string(&p.html).unwrap();
        assert!(html.contains("<svg") && html.contains("O: doc") && html.contains("700%"));
        assert!(!html.contains("![utilisation]"));
        let md = std::fs::read_to_string(&p.markdown).unwrap();
        assert!(
            md.contains("| k | on | faster |") && md.contains("- stack s (1 table)") && md.contains("| heap | 7 B |")
        );
        // Every figure as SVG and PNG (the PNG's IHDR: width and height at bytes 16..24).
        for f in ["gantt", "busy", "memory", "hbm_traffic"] {
            let svg = std::fs::read_to_string(dir.join(format!("{f}.svg"))).unwrap();
            let png = std::fs::read(dir.join(format!("{f}.png"))).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{f}");
            let w = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
            assert!(svg.starts_with(&format!("<svg width=\"{w}\"")), "{f}");
            assert!(html.contains(&svg), "{f} inline in the HTML");
        }
        let busy = std::fs::read_to_string(dir.join("busy.svg")).unwrap();
        for text in [
            "busy (% of simulated time)",
            "TensorCore",
            "SparseCore",
            "HBM",
            "ICI",
            "host",
        ] {
            assert!(busy.contains(&format!("\n{text}\n")), "{text}");
        }
        let first: Vec<Vec<u8>> = ["report.md", "gantt.svg", "gantt.png", "busy.png"]
            .iter()
            .map(|f| std::fs::read(dir.join(f)).unwrap())
            .collect();
        write_report(&dir, &input).unwrap();
        for (f, bytes) in ["report.md", "gantt.svg", "gantt.png", "busy.png"].iter().zip(first) {
            assert_eq!(std::fs::read(dir.join(f)).unwrap(), bytes, "{f}");
        }
    }
}
