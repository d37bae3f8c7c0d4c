//! Sweep outputs: the table (CSV, JSON) and the pictures of a capacity sweep's points, written the
//! same way whether the points come from one run or are merged from shards.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

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

/// The output files of a sweep, in the order they are written.
pub const SWEEP_FILES: [&str; 5] = ["sweep.csv", "sweep.json", "sweep.svg", "step_time.svg", "fit_map.svg"];

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

/// Writes [`SWEEP_FILES`] into `dir` (created if missing).
pub fn write_sweep(dir: &Path, points: &[SweepPoint]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(points).map_err(std::io::Error::other)? + "\n";
    sim_core::output::write_atomic(dir.join("sweep.csv"), sweep_csv(points))?;
    sim_core::output::write_atomic(dir.join("sweep.json"), json)?;
    sim_core::output::write_atomic(
        dir.join("sweep.svg"),
        sweep_svg(points, |p| p.samples_per_s, "samples/s"),
    )?;
    sim_core::output::write_atomic(
        dir.join("step_time.svg"),
        sweep_svg(points, |p| p.step_time_us, "step time (us)"),
    )?;
    sim_core::output::write_atomic(dir.join("fit_map.svg"), fit_map_svg(points))?;
    Ok(())
}

/// A map of configurations (rows: chip x chips) against batch: green fits, red does not, grey failed.
pub fn fit_map_svg(points: &[SweepPoint]) -> String {
    let mut rows: Vec<(String, u32)> = points.iter().map(|p| (p.chip.clone(), p.chips)).collect();
    rows.sort();
    rows.dedup();
    let mut cols: Vec<u64> = points.iter().map(|p| p.batch).collect();
    cols.sort_unstable();
    cols.dedup();
    let (cw, rh, l, t) = (64.0, 22.0, 110.0, 40.0);
    let w = l + cw * cols.len() as f64 + 20.0;
    let h = t + rh * rows.len() as f64 + 40.0;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="10" y="18" font-size="13" font-weight="bold">fits? (green yes, red no, grey error) by configuration and global batch</text>"#
    );
    for (j, b) in cols.iter().enumerate() {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{b}</text>"#,
            l + cw * j as f64 + cw / 2.0,
            t - 4.0
        );
    }
    for (i, (c, n)) in rows.iter().enumerate() {
        let y = t + rh * i as f64;
        let _ = write!(s, r#"<text x="10" y="{:.1}">{n} x {c}</text>"#, y + 15.0);
        for (j, b) in cols.iter().enumerate() {
            let Some(p) = points.iter().find(|p| &p.chip == c && p.chips == *n && p.batch == *b) else {
                continue;
            };
            let fill = if p.error.is_some() {
                "#bbbbbb"
            } else if p.fits {
                "#59a14f"
            } else {
                "#e15759"
            };
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{y:.1}" width="{}" height="{}" fill="{fill}" stroke="white"><title>{n} x {c}, batch {b}: {}</title></rect>"#,
                l + cw * j as f64,
                cw - 2.0,
                rh - 2.0,
                if p.fits {
                    "fits".to_string()
                } else {
                    p.error.clone().unwrap_or_else(|| "does not fit".into())
                }
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// A metric against batch, one line per (chip, chips); hollow markers where it does not fit.
pub fn sweep_svg(points: &[SweepPoint], metric: impl Fn(&SweepPoint) -> f64, label: &str) -> String {
    let ok: Vec<&SweepPoint> = points.iter().filter(|p| p.error.is_none() && metric(p) > 0.0).collect();
    let mut series: Vec<(String, u32)> = ok.iter().map(|p| (p.chip.clone(), p.chips)).collect();
    series.sort();
    series.dedup();
    // Tall enough for the legend (15 px per series), so large sweeps do not run off the picture.
    let (w, h, l, b) = (760.0, (420.0f64).max(70.0 + 15.0 * series.len() as f64), 80.0, 50.0);
    let (bmin, bmax) = ok.iter().fold((f64::MAX, 0.0f64), |a, p| {
        (a.0.min(p.batch as f64), a.1.max(p.batch as f64))
    });
    let smax = ok.iter().map(|p| metric(p)).fold(1e-9, f64::max);
    let x = |v: f64| {
        l + if bmax > bmin {
            (v.ln() - bmin.ln()) / (bmax.ln() - bmin.ln())
        } else {
            0.5
        } * (w - l - 160.0)
    };
    let y = |v: f64| h - b - v / smax * (h - b - 30.0);
    let colours = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
    ];
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="{l}" y="18" font-size="13" font-weight="bold">{label} vs global batch (hollow: does not fit)</text><line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{l}" y1="30" x2="{l}" y2="{}" stroke="black"/><text x="8" y="40">{:.3e}</text>"#,
        h - b,
        w - 160.0,
        h - b,
        h - b,
        smax
    );
    for (i, (c, n)) in series.iter().enumerate() {
        let col = colours[i % colours.len()];
        let mut pts: Vec<&&SweepPoint> = ok.iter().filter(|p| &p.chip == c && p.chips == *n).collect();
        pts.sort_by_key(|p| p.batch);
        let path: Vec<String> = pts
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.batch as f64), y(metric(p))))
            .collect();
        let _ = write!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{col}"/>"#,
            path.join(" ")
        );
        for p in &pts {
            let fill = if p.fits { col } else { "white" };
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{fill}" stroke="{col}"><title>{} x {} batch {}: {:.1} {label}</title></circle>"#,
                x(p.batch as f64),
                y(metric(p)),
                n,
                c,
                p.batch,
                metric(p)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" fill="{col}">{n} x {c}</text>"#,
            w - 150.0,
            40.0 + i as f64 * 15.0
        );
    }
    let mut batches: Vec<u64> = ok.iter().map(|p| p.batch).collect();
    batches.sort_unstable();
    batches.dedup();
    // Label a batch only when it is at least 45 px right of the last label, so labels never overlap.
    let mut last_label_x = f64::MIN;
    for bt in batches {
        if x(bt as f64) - last_label_x < 45.0 {
            continue;
        }
        last_label_x = x(bt as f64);
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{bt}</text>"#,
            x(bt as f64),
            h - b + 15.0
        );
    }
    s.push_str("</svg>\n");
    s
}
