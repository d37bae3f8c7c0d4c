//! reports: pictures (SVG, written directly) and summaries (JSON with a stable schema, Markdown and a
//! self-contained HTML page) of recorded runs.
//!
//! Architecture invariant: reports never computes a simulated number; it presents what a run recorded.

pub mod sweep;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sim_core::recorder::{ArgValue, Recorder, Span};
use sim_core::summary::RunSummary;

const STEP_COLOURS: &[&str] = &[
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
];
const ROWS: &[(&str, &str)] = &[
    ("sc_fwd", "SC/F"),
    ("sc_bwd", "SC/B"),
    ("tc_fwd", "TC/F"),
    ("tc_bwd", "TC/B"),
];

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
        let (Some(row), Some(step)) = (ROWS.iter().position(|(c, _)| *c == s.category), step_of(s)) else {
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

/// The pipeline Gantt chart: sequential above, pipelined below, rows SC/F SC/B TC/F TC/B, bars
/// coloured and labelled by step, staleness arrows from the pipelined run's flows.
pub fn gantt_svg(panels: &[(&str, &Recorder, f64)], title: &str) -> String {
    let (w, left, row_h, gap) = (960u64, 70u64, 22u64, 46u64);
    let end_ps = panels
        .iter()
        .flat_map(|(_, r, _)| stage_bars(r).into_values().map(|b| b.1))
        .max()
        .unwrap_or(1)
        .max(1);
    let x = |ps: u64| left as f64 + (ps as f64 / end_ps as f64) * (w - left - 20) as f64;
    let panel_h = ROWS.len() as u64 * row_h + gap;
    let h = 40 + panels.len() as u64 * panel_h + 30;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r##"<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#c00"/></marker></defs>"##
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="20" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (pi, (label, rec, step_us)) in panels.iter().enumerate() {
        let top = 40 + pi as u64 * panel_h;
        let _ = writeln!(
            out,
            r#"<text x="{left}" y="{}" font-size="12" font-weight="bold">{} — step time {:.1} µs</text>"#,
            top + 10,
            escape(label),
            step_us
        );
        let bars = stage_bars(rec);
        for (ri, (_, name)) in ROWS.iter().enumerate() {
            let y = top + 18 + ri as u64 * row_h;
            let _ = writeln!(
                out,
                r##"<text x="8" y="{}">{name}</text><line x1="{left}" x2="{}" y1="{}" y2="{}" stroke="#eee"/>"##,
                y + 14,
                w - 20,
                y + row_h,
                y + row_h
            );
        }
        for (&(ri, step), &(a, b)) in &bars {
            let y = top + 18 + ri as u64 * row_h;
            let colour = STEP_COLOURS[(step as usize) % STEP_COLOURS.len()];
            let (x0, x1) = (x(a), x(b));
            let _ = writeln!(
                out,
                r##"<rect x="{x0:.1}" y="{}" width="{:.1}" height="{}" fill="{colour}" stroke="#333" stroke-width="0.5"><title>step {step}: {:.1}–{:.1} µs</title></rect>"##,
                y + 3,
                (x1 - x0).max(1.0),
                row_h - 6,
                a as f64 / 1e6,
                b as f64 / 1e6
            );
            if x1 - x0 > 14.0 {
                let _ = writeln!(
                    out,
                    r#"<text x="{:.1}" y="{}" fill="white" text-anchor="middle">{step}</text>"#,
                    (x0 + x1) / 2.0,
                    y + 15
                );
            }
        }
        for f in &rec.flows {
            let (Some(a), Some(b)) = (rec.spans.get(f.from.0), rec.spans.get(f.to.0)) else {
                continue;
            };
            let (ra, rb) = (
                ROWS.iter().position(|(c, _)| *c == a.category),
                ROWS.iter().position(|(c, _)| *c == b.category),
            );
            let (Some(ra), Some(rb), Some(sa), Some(sb)) = (ra, rb, step_of(a), step_of(b)) else {
                continue;
            };
            let (Some(&(_, ea)), Some(&(sb_start, _))) = (bars.get(&(ra, sa)), bars.get(&(rb, sb))) else {
                continue;
            };
            let ya = top + 18 + ra as u64 * row_h + row_h / 2;
            let yb = top + 18 + rb as u64 * row_h + row_h / 2;
            let _ = writeln!(
                out,
                r##"<path d="M{:.1},{ya} C{:.1},{} {:.1},{} {:.1},{yb}" fill="none" stroke="#c00" stroke-width="1.2" marker-end="url(#arrow)"><title>{}</title></path>"##,
                x(ea),
                x(ea) + 10.0,
                ya + 14,
                x(sb_start) - 10.0,
                yb - 14,
                x(sb_start),
                escape(&f.name)
            );
        }
    }
    let axis_y = h - 22;
    let _ = writeln!(
        out,
        r##"<line x1="{left}" x2="{}" y1="{axis_y}" y2="{axis_y}" stroke="#333"/>"##,
        w - 20
    );
    for k in 0..=5u64 {
        let ps = end_ps * k / 5;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{:.0} µs</text>"#,
            x(ps),
            axis_y + 14,
            ps as f64 / 1e6
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{}" y="{}" text-anchor="end" fill="#c00">red: SC backward of step i feeds SC forward of step i+2 (stale gradients)</text>"##,
        w - 20,
        20
    );
    out.push_str("</svg>\n");
    out
}

/// Horizontal bars of a few named fractions (0..=1), e.g. busy fraction per unit.
pub fn bars_svg(title: &str, items: &[(String, f64)], unit: &str) -> String {
    let (w, row) = (560u64, 24u64);
    let h = 40 + items.len() as u64 * row + 10;
    let max = items.iter().map(|i| i.1).fold(1.0f64, f64::max);
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="13" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (i, (name, v)) in items.iter().enumerate() {
        let y = 32 + i as u64 * row;
        let len = (v / max).clamp(0.0, 1.0) * 330.0;
        let colour = if *v > 1.0 { "#e15759" } else { "#4e79a7" };
        let _ = write!(
            out,
            r#"<text x="10" y="{}">{}</text><rect x="150" y="{y}" width="{len:.1}" height="16" fill="{colour}"/><text x="{:.1}" y="{}">{:.1}{unit}</text>"#,
            y + 12,
            escape(name),
            155.0 + len,
            y + 12,
            v * 100.0
        );
    }
    out.push_str("</svg>\n");
    out
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
    /// gantt.svg.
    pub gantt: PathBuf,
}

fn markdown(r: &ReportInput) -> String {
    use sim_core::units::{bytes, duration_us, percent, rate};
    let s = &r.summary;
    let mut md = format!(
        "# {}\n\n{}\n\n![pipeline](gantt.svg)\n\n## Summary\n\n| figure | value |\n|---|---|\n",
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

/// Writes summary.json, report.md, report.html (self-contained) and gantt.svg into `dir`.
pub fn write_report(dir: &Path, r: &ReportInput) -> std::io::Result<ReportPaths> {
    std::fs::create_dir_all(dir)?;
    let panels: Vec<(&str, &Recorder, f64)> = r.gantt.iter().map(|(l, rec, t)| (l.as_str(), rec, *t)).collect();
    let gantt = gantt_svg(&panels, &r.title);
    let b = &r.summary.busy_fraction;
    let busy = bars_svg(
        "Busy fraction per unit",
        &[
            ("TensorCore".into(), b.tc),
            ("SparseCore".into(), b.sc),
            ("HBM".into(), b.hbm),
            ("ICI".into(), b.ici),
            ("host".into(), b.host),
        ],
        "%",
    );
    let mem: Vec<(String, f64)> = r
        .summary
        .peak_memory_bytes
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                *v as f64 / r.summary.capacity_bytes.get(k).copied().unwrap_or(1).max(1) as f64,
            )
        })
        .collect();
    let mem = bars_svg("Peak memory per space (share of capacity)", &mem, "%");
    let s = &r.summary;
    let data = s.hbm_bytes_per_step.saturating_sub(s.hbm_padding_bytes_per_step);
    let traffic = bars_svg(
        &format!(
            "HBM bytes per step: {} B, of which padding {} B",
            s.hbm_bytes_per_step, s.hbm_padding_bytes_per_step
        ),
        &[
            ("data".into(), data as f64 / s.hbm_bytes_per_step.max(1) as f64),
            (
                "padding".into(),
                s.hbm_padding_bytes_per_step as f64 / s.hbm_bytes_per_step.max(1) as f64,
            ),
        ],
        "%",
    );
    let paths = ReportPaths {
        summary: dir.join("summary.json"),
        markdown: dir.join("report.md"),
        html: dir.join("report.html"),
        gantt: dir.join("gantt.svg"),
    };
    sim_core::output::write_atomic(
        &paths.summary,
        serde_json::to_string_pretty(&r.summary).map_err(std::io::Error::other)? + "\n",
    )?;
    sim_core::output::write_atomic(&paths.gantt, &gantt)?;
    sim_core::output::write_atomic(dir.join("busy.svg"), &busy)?;
    sim_core::output::write_atomic(dir.join("memory.svg"), &mem)?;
    sim_core::output::write_atomic(dir.join("hbm_traffic.svg"), &traffic)?;
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
        } else if !line.is_empty() {
            let _ = writeln!(html, "<p>{}</p>", escape(line));
        }
    }
    if in_table {
        html.push_str("</table>\n");
    }
    html.push_str("</body></html>\n");
    sim_core::output::write_atomic(&paths.html, html)?;
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

    #[test]
    fn gantt_has_rows_bars_and_arrows() {
        let (s, p) = (rec(false), rec(true));
        let svg = gantt_svg(&[("sequential", &s, 100.0), ("pipelined", &p, 60.0)], "demo");
        for label in ["SC/F", "SC/B", "TC/F", "TC/B", "sequential", "pipelined", "marker-end"] {
            assert!(svg.contains(label), "{label}");
        }
        assert_eq!(svg.matches("<rect x=").count(), 24);
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
        let md = std::fs::read_to_string(&p.markdown).unwrap();
        assert!(
            md.contains("| k | on | faster |") && md.contains("- stack s (1 table)") && md.contains("| heap | 7 B |")
        );
        let first = std::fs::read(&p.markdown).unwrap();
        write_report(&dir, &input).unwrap();
        assert_eq!(std::fs::read(&p.markdown).unwrap(), first);
    }
}
