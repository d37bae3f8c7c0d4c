//! `tpusim sweep`: capacity sweeps over chips, chip counts and batch sizes, run in parallel, with the
//! answers planners ask: the largest batch that fits each configuration, the cheapest configuration
//! that reaches a target throughput, and the limits each configuration needs.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use rayon::prelude::*;
use serde::Serialize;
use workloads::{simulate, RunOptions, Workload};

/// Assumed on-demand price per chip-hour (USD), for ranking configurations only; override with --price.
const DEFAULT_PRICES: &[(&str, f64)] = &[
    ("v4", 3.22),
    ("v5e", 1.20),
    ("v5p", 4.20),
    ("v6e", 2.70),
    ("tpu7x", 6.00),
];

/// Arguments of `tpusim sweep`.
#[derive(clap::Args)]
pub struct Args {
    /// Workload file (TOML or JSON).
    pub workload: Option<PathBuf>,
    /// Largest number of configurations to run (refused beyond, exit 2).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_configs: u64,
    /// Largest number of steps each configuration simulates.
    #[arg(long, value_name = "N", default_value_t = workloads::spec::RunBounds::default().max_steps)]
    pub max_steps: u64,
    /// Largest number of ids one chip may generate per step.
    #[arg(long, value_name = "N", default_value_t = workloads::spec::RunBounds::default().max_ids_per_step)]
    pub max_ids: u64,
    /// A built-in workload.
    #[arg(long, conflicts_with = "workload")]
    pub preset: Option<String>,
    /// Chips, comma-separated (v4, v5p, v6e, tpu7x).
    #[arg(long, value_delimiter = ',', required = true)]
    pub chip: Vec<String>,
    /// Chip counts, comma-separated powers of two.
    #[arg(long, value_delimiter = ',', required = true)]
    pub chips: Vec<u32>,
    /// Global batches: a list (4096,8192) or a geometric range FROM..TOxFACTOR (4096..65536x2).
    #[arg(long, required = true)]
    pub batch: String,
    /// Limits for every configuration: a limits file (JSON/TOML from `tpusim limits estimate -o`) or a
    /// directory of jax-tpu-embedding FDO stats; overrides the workload's own limits.
    #[arg(long)]
    pub limits: Option<PathBuf>,
    /// Steps per configuration.
    #[arg(long, default_value_t = 4)]
    pub steps: u32,
    /// Target samples/s: report the cheapest configuration that reaches it.
    #[arg(long)]
    pub target: Option<f64>,
    /// Price per chip-hour overrides, e.g. v5p=4.2,v6e=2.7.
    #[arg(long, value_delimiter = ',')]
    pub price: Vec<String>,
    /// Worker threads (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Override a workload field for every configuration (as `tpusim run --set`; repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Output directory (sweep.csv, sweep.json, sweep.svg).
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

/// One configuration's result.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
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
}

/// Parses "4096,8192" or "4096..65536x2".
pub fn parse_batches(text: &str) -> anyhow::Result<Vec<u64>> {
    if let Some((from, rest)) = text.split_once("..") {
        let (to, factor) = rest.split_once('x').unwrap_or((rest, "2"));
        let (from, to, factor): (u64, u64, u64) = (from.trim().parse()?, to.trim().parse()?, factor.trim().parse()?);
        if from == 0 || factor < 2 || to < from {
            anyhow::bail!("--batch {text}: need 0 < FROM <= TO and FACTOR >= 2");
        }
        let mut v = Vec::new();
        let mut b = Some(from);
        // Stops at TO, or where the next batch would not fit in 64 bits.
        while let Some(x) = b.filter(|&x| x <= to) {
            v.push(x);
            b = x.checked_mul(factor);
        }
        Ok(v)
    } else {
        text.split(',')
            .map(|x| {
                x.trim()
                    .parse::<u64>()
                    .with_context(|| format!("--batch: '{x}' is not a number"))
            })
            .collect()
    }
}

/// Runs `tpusim sweep`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let base_args = super::run::Args {
        workload: args.workload.clone(),
        preset: args.preset.clone(),
        chip: None,
        chip_file: None,
        chips: None,
        batch: None,
        steps: Some(args.steps),
        pipelining: None,
        functional: false,
        json: false,
        trace: None,
        report: None,
        set: args.set.clone(),
        sensitivity: false,
        max_steps: args.max_steps,
        max_ids: args.max_ids,
    };
    let mut base = super::run::load_workload(&base_args)?;
    // `--set chip.FIELD=VALUE` applies to every chip of the sweep.
    let chip_overrides = super::run::run_options(&base_args)?.chip_overrides;
    // Configurations share generated ids (a smaller batch is a prefix of a larger one) and step work.
    let cache = workloads::cache::RunCache::new();
    if let Some(file) = &args.limits {
        if !file.exists() {
            anyhow::bail!("--limits {}: no such file or directory", file.display());
        }
        base.limits.file = Some(file.clone());
    }
    let batches = parse_batches(&args.batch)?;
    let mut prices: Vec<(String, f64)> = DEFAULT_PRICES.iter().map(|(c, p)| (c.to_string(), *p)).collect();
    for p in &args.price {
        let (c, v) = p
            .split_once('=')
            .with_context(|| format!("--price {p}: expected CHIP=PRICE"))?;
        let v: f64 = v.parse().with_context(|| format!("--price {p}"))?;
        prices.retain(|x| x.0 != c);
        prices.push((c.to_string(), v));
    }
    for c in &args.chip {
        sim_tpu::chips::preset_name(c)?;
    }
    let count = (args.chip.len() as u128) * (args.chips.len() as u128) * (batches.len() as u128);
    if count > args.max_configs as u128 {
        anyhow::bail!(
            "--chip x --chips x --batch make {count} configurations, more than --max-configs {}; raise it to run them all",
            args.max_configs
        );
    }
    let mut configs = Vec::new();
    for c in &args.chip {
        for &n in &args.chips {
            for &b in &batches {
                configs.push((c.clone(), n, b));
            }
        }
    }
    // Generate each step's ids once, at the largest batch per chip: every configuration slices them.
    if let Some(&(ref c, n, b)) = configs.iter().max_by_key(|(_, n, b)| b / (*n).max(1) as u64) {
        let mut w = base.clone();
        (w.chip, w.chips, w.global_batch) = (c.clone(), n, b);
        if n > 0 && w.validate().is_ok() {
            for step in 0..w.steps {
                // A failure here shows again, per configuration, below.
                let _ = cache.batch_for_step(&w, step);
            }
        }
    }
    let bar = indicatif::ProgressBar::new(configs.len() as u64);
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()?;
    let points: Vec<Point> = pool.install(|| {
        configs
            .par_iter()
            .map(|(c, n, b)| {
                let mut w: Workload = base.clone();
                w.chip = c.clone();
                if w.chips != *n {
                    w.topology = None;
                }
                w.chips = *n;
                w.global_batch = *b;
                let price = prices
                    .iter()
                    .find(|p| p.0 == sim_tpu::chips::preset_name(c).unwrap_or(""))
                    .map_or(1.0, |p| p.1);
                let mut p = Point {
                    chip: c.clone(),
                    chips: *n,
                    batch: *b,
                    step_time_us: 0.0,
                    samples_per_s: 0.0,
                    fits: false,
                    bottleneck: String::new(),
                    needed_max_ids: 0,
                    needed_max_unique_ids: 0,
                    cost_per_hour: price * *n as f64,
                    error: None,
                };
                match w.validate().map_err(anyhow::Error::from).and_then(|_| {
                    Ok(simulate(
                        &w,
                        &RunOptions {
                            chip_overrides: chip_overrides.clone(),
                            cache: Some(cache.clone()),
                            ..Default::default()
                        },
                    )?)
                }) {
                    Ok(r) => {
                        p.step_time_us = r.summary.step_time_us;
                        p.samples_per_s = r.summary.samples_per_s;
                        p.fits = r.summary.fits;
                        p.bottleneck = r.bottleneck;
                        p.needed_max_ids = r
                            .summary
                            .limits
                            .iter()
                            .map(|l| l.observed_max_ids)
                            .max()
                            .unwrap_or(0)
                            .div_ceil(8)
                            * 8;
                        p.needed_max_unique_ids = r
                            .summary
                            .limits
                            .iter()
                            .map(|l| l.observed_max_unique_ids)
                            .max()
                            .unwrap_or(0)
                            .div_ceil(8)
                            * 8;
                    }
                    Err(e) => p.error = Some(format!("{e:#}")),
                }
                bar.inc(1);
                p
            })
            .collect()
    });
    bar.finish_and_clear();
    std::fs::create_dir_all(&args.output).with_context(|| args.output.display().to_string())?;
    let mut csv = String::from(
        "chip,chips,batch,step_time_us,samples_per_s,fits,needed_max_ids,needed_max_unique_ids,cost_per_hour,error\n",
    );
    for p in &points {
        let _ = writeln!(
            csv,
            "{},{},{},{:.3},{:.1},{},{},{},{:.2},{}",
            p.chip,
            p.chips,
            p.batch,
            p.step_time_us,
            p.samples_per_s,
            p.fits,
            p.needed_max_ids,
            p.needed_max_unique_ids,
            p.cost_per_hour,
            p.error.clone().unwrap_or_default().replace(',', ";")
        );
    }
    std::fs::write(args.output.join("sweep.csv"), csv)?;
    std::fs::write(
        args.output.join("sweep.json"),
        serde_json::to_string_pretty(&points)? + "\n",
    )?;
    std::fs::write(
        args.output.join("sweep.svg"),
        sweep_svg(&points, |p| p.samples_per_s, "samples/s"),
    )?;
    std::fs::write(
        args.output.join("step_time.svg"),
        sweep_svg(&points, |p| p.step_time_us, "step time (us)"),
    )?;
    std::fs::write(args.output.join("fit_map.svg"), fit_map_svg(&points))?;
    println!(
        "{:<8} {:>6} {:>22} {:>16}",
        "chip", "chips", "largest batch that fits", "samples/s there"
    );
    for c in &args.chip {
        for &n in &args.chips {
            let best = points
                .iter()
                .filter(|p| &p.chip == c && p.chips == n && p.fits)
                .max_by_key(|p| p.batch);
            match best {
                Some(p) => println!("{c:<8} {n:>6} {:>22} {:>16.0}", p.batch, p.samples_per_s),
                None => println!("{c:<8} {n:>6} {:>22} {:>16}", "none", "-"),
            }
        }
    }
    if let Some(t) = args.target {
        let cheapest = points.iter().filter(|p| p.fits && p.samples_per_s >= t).min_by(|a, b| {
            a.cost_per_hour
                .total_cmp(&b.cost_per_hour)
                .then(b.samples_per_s.total_cmp(&a.samples_per_s))
        });
        match cheapest {
            Some(p) => println!("\ncheapest configuration reaching {t:.0} samples/s: {} x {} at batch {} ({:.0} samples/s, {:.2}/h; needs max_ids_per_partition >= {}, max_unique >= {})", p.chips, p.chip, p.batch, p.samples_per_s, p.cost_per_hour, p.needed_max_ids, p.needed_max_unique_ids),
            None => println!("\nno configuration reaches {t:.0} samples/s"),
        }
    }
    println!(
        "\nwrote {}/sweep.csv, sweep.json, sweep.svg, step_time.svg, fit_map.svg ({} configurations)",
        args.output.display(),
        points.len()
    );
    // A configuration that could not be evaluated is an error, not a result (a misfit is a result).
    let failed: Vec<&Point> = points.iter().filter(|p| p.error.is_some()).collect();
    for p in &failed {
        eprintln!(
            "error: {} x {} at batch {}: {}",
            p.chips,
            p.chip,
            p.batch,
            p.error.as_deref().unwrap_or("")
        );
    }
    Ok(if failed.is_empty() {
        0
    } else if failed.len() == points.len() {
        2
    } else {
        1
    })
}

/// A map of configurations (rows: chip x chips) against batch: green fits, red does not, grey failed.
fn fit_map_svg(points: &[Point]) -> String {
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
fn sweep_svg(points: &[Point], metric: impl Fn(&Point) -> f64, label: &str) -> String {
    let ok: Vec<&Point> = points.iter().filter(|p| p.error.is_none() && metric(p) > 0.0).collect();
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
        let mut pts: Vec<&&Point> = ok.iter().filter(|p| &p.chip == c && p.chips == *n).collect();
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
