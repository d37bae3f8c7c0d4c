//! reports: pictures (plotters, SVG and PNG) and summaries (JSON with a stable schema, Markdown and a
//! self-contained HTML page) of recorded runs.
//!
//! Architecture invariant: reports never computes a simulated number; it presents what a run recorded.

pub mod palette;
pub mod plot;
pub mod sweep;

/// The interactive pipelining lesson: one self-contained page (inline CSS and JS, no network)
/// that draws precomputed runs. `grid_json` is the serialized `workloads::lesson::LessonGrid`; the
/// page computes nothing, it picks the run the sliders point at and draws it.
pub fn lesson_html(grid_json: &str) -> String {
    // Inside <script>, "</" would end the element.
    include_str!("lesson/page.html")
        .replace("/*STAGE_COLOURS*/", &palette::css_vars())
        .replace("/*STALENESS*/", &escape(STALENESS))
        .replace("/*LESSON_DATA*/", &grid_json.replace("</", "<\\/"))
}

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use sim_core::recorder::{Recorder, Span};
use sim_core::summary::RunSummary;
use sim_core::tag::{SpanTag, Stage, Unit};
use sim_core::time::merged_intervals;

use plot::{err, font, Axis, Figure, PlotError, Swatch, PALETTE};

/// A legend entry: its swatch and its label.
type LegendEntry = (Swatch, String);

/// The span argument naming a span's stage (the `palette::STAGES` key) for trace readers; figures
/// read the span's tag.
pub const STAGE_ARG: &str = "stage";
/// The thread a run records its critical path on (one span per segment; `stage` what the time is
/// charged to, `row` the stage of the task it lies in): display text, the spans are found by tag.
pub const CRITICAL_THREAD: &str = "critical path";

/// The step a span belongs to.
fn step_of(s: &Span) -> Option<i64> {
    s.tag.and_then(|t| t.step).map(i64::from)
}

/// The palette row of a stage.
fn palette_row(stage: Stage) -> Option<usize> {
    palette::STAGES.iter().position(|st| st.key == stage.key())
}

/// The stage row (index into `palette::STAGES`) a span of a task is drawn on: work the engine
/// scheduled, not trace detail or rows derived from the run.
fn stage_row(s: &Span) -> Option<usize> {
    let tag = s.tag.filter(|t| t.unit.is_scheduled())?;
    palette_row(tag.stage?)
}

/// The bars of each (stage, step): the time any span of that stage and step ran, on whatever unit
/// (a SparseCore pass's compute and its HBM traffic make one bar; a step's all-to-all of
/// activations and of gradients two), as merged intervals in time order.
pub fn stage_bars(rec: &Recorder) -> BTreeMap<(usize, i64), Vec<(u64, u64)>> {
    let mut spans: BTreeMap<(usize, i64), Vec<(u64, u64)>> = BTreeMap::new();
    for s in &rec.spans {
        if let (Some(row), Some(step)) = (stage_row(s), step_of(s)) {
            spans.entry((row, step)).or_default().push((s.start.0, s.end.0));
        }
    }
    spans.into_iter().map(|(k, v)| (k, merged_intervals(v))).collect()
}

/// Merged intervals when HBM moved anything.
fn hbm_busy(rec: &Recorder) -> Vec<(u64, u64)> {
    merged_intervals(
        rec.spans
            .iter()
            .filter(|s| s.tag.is_some_and(|t| t.unit == Unit::Hbm) && s.end > s.start)
            .map(|s| (s.start.0, s.end.0))
            .collect(),
    )
}

/// The thread of the span over the measured window (steady-state steps): display text, the span is
/// found by tag.
pub const WINDOW_THREAD: &str = "measured window";

/// Whether a span is the measured window's.
fn is_window(s: &Span) -> bool {
    s.tag.is_some_and(|t| t.unit == Unit::MeasuredWindow)
}
/// The measured window's background.
const WINDOW: RGBColor = RGBColor(0xEE, 0xEE, 0xF4);

/// A piece of the critical path as recorded: (stage charged, row of its task), start, end.
fn critical(rec: &Recorder) -> Vec<(usize, usize, u64, u64)> {
    rec.spans
        .iter()
        .filter_map(|s| match s.tag? {
            SpanTag {
                unit: Unit::CriticalPath(row),
                stage: Some(stage),
                ..
            } => Some((palette_row(stage)?, palette_row(row)?, s.start.0, s.end.0)),
            _ => None,
        })
        .collect()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A row of the Gantt chart.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Row {
    /// A stage (index into `palette::STAGES`).
    Stage(usize),
    /// HBM busy.
    Hbm,
    /// The critical path, coloured by stage.
    Critical,
}

impl Row {
    fn label(self) -> &'static str {
        match self {
            Row::Stage(i) => palette::STAGES[i].short,
            Row::Hbm => palette::HBM.short,
            Row::Critical => "critical",
        }
    }
}

/// The pipeline Gantt chart of one or more runs (e.g. sequential above, pipelined below): a row per
/// stage that ran (host, PCIe, SparseCore passes, collectives, TensorCore kernels), HBM busy, each
/// bar numbered with its training step, and the critical path of the measured window drawn over
/// the bars (outlined) and on its own row coloured by stage; the staleness arrows of the runs'
/// flows. Colours are `palette`'s.
pub struct Gantt<'a> {
    /// Title.
    pub title: String,
    /// Panels: label, recording, step time (µs).
    pub panels: Vec<(&'a str, &'a Recorder, f64)>,
}

const GANTT_W: u32 = 1100;
const LEGEND_COLUMNS: usize = 4;
const LEGEND_LINE: u32 = 20;
const ROW_PX: u32 = 26;

impl Gantt<'_> {
    fn end_ps(&self) -> u64 {
        self.panels
            .iter()
            .flat_map(|(_, r, _)| {
                stage_bars(r)
                    .into_values()
                    .filter_map(|b| b.last().map(|x| x.1))
                    .chain(hbm_busy(r).into_iter().map(|b| b.1))
            })
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// The rows drawn: every stage any panel ran, HBM if it moved anything, the critical path if
    /// recorded.
    fn rows(&self) -> Vec<Row> {
        let mut used = vec![false; palette::STAGES.len()];
        let (mut hbm, mut crit) = (false, false);
        for (_, r, _) in &self.panels {
            for ((row, _), _) in stage_bars(r) {
                used[row] = true;
            }
            hbm |= !hbm_busy(r).is_empty();
            crit |= !critical(r).is_empty();
        }
        let mut rows: Vec<Row> = (0..used.len()).filter(|&i| used[i]).map(Row::Stage).collect();
        if hbm {
            rows.push(Row::Hbm);
        }
        if crit {
            rows.push(Row::Critical);
        }
        rows
    }

    /// The legend: a box per row's stage (and kernel launches when the critical path holds
    /// them), then a line of the critical path's outline, the staleness arrow and step numbers.
    fn legend(&self, rows: &[Row]) -> (Vec<LegendEntry>, Vec<LegendEntry>) {
        let mut boxes: Vec<(Swatch, String)> = rows
            .iter()
            .filter_map(|r| match r {
                Row::Stage(i) => Some((
                    Swatch::Box(palette::STAGES[*i].colour),
                    palette::STAGES[*i].legend.into(),
                )),
                Row::Hbm => Some((Swatch::Box(palette::HBM.colour), palette::HBM.legend.into())),
                Row::Critical => None,
            })
            .collect();
        let launches = self
            .panels
            .iter()
            .any(|(_, r, _)| critical(r).iter().any(|c| palette::STAGES[c.0].key == "kernel_launch"));
        if launches {
            let k = palette::stage("kernel_launch").expect("in the palette");
            boxes.push((Swatch::Box(k.colour), k.legend.into()));
        }
        let mut marks = Vec::new();
        if self.panels.iter().any(|(_, r, _)| r.spans.iter().any(is_window)) {
            marks.push((
                Swatch::Box(WINDOW),
                "measured steps (warm-up before, drain after)".into(),
            ));
        }
        if rows.contains(&Row::Critical) {
            marks.push((Swatch::Outline(palette::CRITICAL), "critical path".into()));
        }
        if self.panels.iter().any(|(_, r, _)| !r.flows.is_empty()) {
            marks.push((Swatch::Arrow(palette::ARROW), STALENESS.into()));
        }
        marks.push((Swatch::Text("3"), "training step".into()));
        (boxes, marks)
    }

    fn header_px(&self) -> u32 {
        let (boxes, _) = self.legend(&self.rows());
        48 + LEGEND_LINE * (boxes.len().div_ceil(LEGEND_COLUMNS) as u32 + 1) + 8
    }

    fn panel_px(&self) -> u32 {
        40 + ROW_PX * self.rows().len().max(1) as u32
    }
}

/// The staleness arrows' legend (the one definition, [`sim_core::summary::STALENESS`]).
pub use sim_core::summary::STALENESS;

/// Black on light colours, white on dark ones.
fn ink(c: RGBColor) -> RGBColor {
    let l = 0.299 * c.0 as f64 + 0.587 * c.1 as f64 + 0.114 * c.2 as f64;
    if l < 140.0 {
        WHITE
    } else {
        BLACK
    }
}

impl Figure for Gantt<'_> {
    fn size(&self) -> (u32, u32) {
        (
            GANTT_W,
            self.header_px() + self.panel_px() * self.panels.len().max(1) as u32 + 24,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let rows = self.rows();
        let (header, body) = root.split_vertically(self.header_px());
        header
            .draw(&Text::new(self.title.clone(), (20, 10), font(22.0)))
            .map_err(err)?;
        let (boxes, marks) = self.legend(&rows);
        let col_w = (GANTT_W as i32 - 40) / LEGEND_COLUMNS as i32;
        let lines = boxes.chunks(LEGEND_COLUMNS).count();
        for (i, chunk) in boxes.chunks(LEGEND_COLUMNS).enumerate() {
            let y = 52 + (LEGEND_LINE as usize * i) as i32;
            for (j, e) in chunk.iter().enumerate() {
                plot::legend(&header, 20 + col_w * j as i32, y, std::slice::from_ref(e))?;
            }
        }
        // The marks' line: the staleness label is long, so each mark starts after the last.
        let y = 52 + (LEGEND_LINE as usize * lines) as i32;
        let mut x = 20;
        for e in &marks {
            plot::legend(&header, x, y, std::slice::from_ref(e))?;
            let (tw, _) = header.estimate_text_size(&e.1, &font(13.0)).map_err(err)?;
            x += 26 + tw as i32 + 28;
        }
        let end_us = self.end_ps() as f64 / 1e6;
        let x_hi = end_us * 1.01;
        let xticks = sweep::nice_ticks(0.0, end_us, 10);
        let areas = body.split_evenly((self.panels.len().max(1), 1));
        let n = self.panels.len();
        for (pi, ((label, rec, step_us), area)) in self.panels.iter().zip(areas).enumerate() {
            self.draw_panel(root, &area, &rows, (label, rec, *step_us), (pi + 1 == n, &xticks, x_hi))?;
        }
        Ok(())
    }
}

impl Gantt<'_> {
    fn draw_panel<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        area: &DrawingArea<DB, Shift>,
        rows: &[Row],
        (label, rec, step_us): (&str, &Recorder, f64),
        (last, xticks, x_hi): (bool, &[f64], f64),
    ) -> Result<(), PlotError> {
        let nrows = rows.len().max(1) as f64;
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{label}: step time {step_us:.1} µs"), font(17.0))
            .margin_left(12)
            .margin_right(24)
            .margin_top(4)
            .x_label_area_size(if last { 52 } else { 26 })
            .y_label_area_size(86)
            .build_cartesian_2d(
                Axis::new(0.0, x_hi, xticks.to_vec()),
                Axis::new(0.0, nrows, (0..rows.len()).map(|i| i as f64 + 0.5).collect()),
            )
            .map_err(err)?;
        // Row 0 at the top.
        let row_y = |row: usize| nrows - row as f64 - 1.0;
        let row_name = |y: f64| -> String {
            let i = (nrows - y - 0.5).round();
            rows.get(i as usize).map(|r| r.label().to_string()).unwrap_or_default()
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
        let us = |ps: u64| ps as f64 / 1e6;
        let at = |r: Row| rows.iter().position(|x| *x == r);
        // The measured window behind the bars.
        for w in rec.spans.iter().filter(|s| is_window(s)) {
            chart
                .draw_series([Rectangle::new(
                    [(us(w.start.0), 0.0), (us(w.end.0), nrows)],
                    WINDOW.filled(),
                )])
                .map_err(err)?;
        }
        let bars = stage_bars(rec);
        for (&(stage, step), pieces) in &bars {
            let Some(ri) = at(Row::Stage(stage)) else { continue };
            let y = row_y(ri);
            let colour = palette::STAGES[stage].colour;
            for &(a, b) in pieces {
                chart
                    .draw_series([
                        Rectangle::new([(us(a), y + 0.14), (us(b), y + 0.86)], colour.filled()),
                        Rectangle::new([(us(a), y + 0.14), (us(b), y + 0.86)], WHITE.stroke_width(1)),
                    ])
                    .map_err(err)?;
            }
            // The step number on the widest piece.
            let Some(&(a, b)) = pieces.iter().max_by_key(|(a, b)| (b - a, std::cmp::Reverse(*a))) else {
                continue;
            };
            let (a_us, b_us) = (us(a), us(b));
            let (p0, p1) = (chart.backend_coord(&(a_us, y)), chart.backend_coord(&(b_us, y)));
            if p1.0 - p0.0 >= 16 {
                let c = chart.backend_coord(&((a_us + b_us) / 2.0, y + 0.5));
                root.draw(&Text::new(
                    step.to_string(),
                    c,
                    font(13.0).color(&ink(colour)).pos(Pos::new(HPos::Center, VPos::Center)),
                ))
                .map_err(err)?;
            }
        }
        if let Some(ri) = at(Row::Hbm) {
            let y = row_y(ri);
            chart
                .draw_series(
                    hbm_busy(rec).into_iter().map(|(a, b)| {
                        Rectangle::new([(us(a), y + 0.14), (us(b), y + 0.86)], palette::HBM.colour.filled())
                    }),
                )
                .map_err(err)?;
        }
        if let Some(ci) = at(Row::Critical) {
            let yc = row_y(ci);
            for (stage, task_row, a, b) in critical(rec) {
                chart
                    .draw_series([Rectangle::new(
                        [(us(a), yc + 0.14), (us(b), yc + 0.86)],
                        palette::STAGES[stage].colour.filled(),
                    )])
                    .map_err(err)?;
                if let Some(ri) = at(Row::Stage(task_row)) {
                    let y = row_y(ri);
                    chart
                        .draw_series([Rectangle::new(
                            [(us(a), y + 0.08), (us(b), y + 0.92)],
                            palette::CRITICAL.stroke_width(2),
                        )])
                        .map_err(err)?;
                }
            }
        }
        for f in &rec.flows {
            let (Some(sa), Some(sb)) = (rec.spans.get(f.from.0), rec.spans.get(f.to.0)) else {
                continue;
            };
            let (Some(ra), Some(rb), Some(ka), Some(kb)) = (stage_row(sa), stage_row(sb), step_of(sa), step_of(sb))
            else {
                continue;
            };
            let ea = bars.get(&(ra, ka)).and_then(|v| v.last()).map(|x| x.1);
            let sb_start = bars.get(&(rb, kb)).and_then(|v| v.first()).map(|x| x.0);
            let (Some(ea), Some(sb_start)) = (ea, sb_start) else {
                continue;
            };
            let (Some(ya), Some(yb)) = (at(Row::Stage(ra)), at(Row::Stage(rb))) else {
                continue;
            };
            let from = chart.backend_coord(&(us(ea), row_y(ya) + 0.5));
            let to = chart.backend_coord(&(us(sb_start), row_y(yb) + 0.5));
            plot::arrow(root, from, to, palette::ARROW)?;
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
    // Each unit in the colour of the stage it runs (the Gantt chart's).
    let c = |k: &str| palette::stage(k).map_or(PALETTE[6], |s| s.colour);
    let units = [
        ("TensorCore", b.tc, c("tc_forward")),
        ("SparseCore", b.sc, c("sc_forward")),
        ("HBM", b.hbm, palette::HBM.colour),
        ("ICI", b.ici, c("all_to_all")),
        ("host", b.host, c("host")),
    ];
    Bars {
        title: format!(
            "Utilisation: busy share of {} measured steady step{} per unit",
            s.steady_steps,
            if s.steady_steps == 1 { "" } else { "s" }
        ),
        x_desc: "busy (% of the measured steps' time)".into(),
        items: units
            .iter()
            .map(|(n, v, colour)| ((*n).to_string(), v * 100.0, format!("{:.1}%", v * 100.0), *colour))
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
    use sim_core::recorder::{ArgValue, Track};
    use sim_core::time::SimTime;

    fn rec(pipelined: bool) -> Recorder {
        let mut r = Recorder::new();
        let mut ids = Vec::new();
        for step in 0..3i64 {
            let base = if pipelined { step as u64 * 60 } else { step as u64 * 100 };
            for (k, (cat, thread, stage, unit)) in [
                ("sc_fwd", "SC 0", Stage::ScForward, Unit::SparseCore(0)),
                ("tc_fwd", "TC", Stage::TcForward, Unit::TensorCore),
                ("tc_bwd", "TC", Stage::TcBackward, Unit::TensorCore),
                ("sc_bwd", "SC 0", Stage::ScBackward, Unit::SparseCore(0)),
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
                    args: vec![
                        ("step".into(), ArgValue::Int(step)),
                        (STAGE_ARG.into(), ArgValue::Text(stage.key().into())),
                    ],
                    tag: Some(SpanTag::new(*unit, *stage, step as usize)),
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
            STALENESS.replace('\'', "&apos;").as_str(),
            "training step",
            "sequential: step time 100.0 µs",
            "pipelined: step time 60.0 µs",
            "simulated time (µs)",
        ] {
            assert!(svg.contains(&format!("\n{text}\n")), "{text}");
        }
        // Each stage: 3 steps x 2 panels of bars, plus its legend box; the four colours differ.
        for colour in ["#0072B2", "#009E73", "#D55E00", "#E69F00"] {
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
            "busy (% of the measured steps&apos; time)",
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
