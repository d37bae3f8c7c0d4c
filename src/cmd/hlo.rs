//! `tpusim hlo`: cost an XLA HLO module on a chip: op profile, bytes, HBM fit, trace.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use tpusim_api::output::{check_writable, write_atomic};
use tpusim_api::units::{bytes, duration_us, percent};

/// Arguments of `tpusim hlo`.
#[derive(clap::Args)]
pub struct Args {
    /// HLO text file (`jax.jit(f).lower(*args).as_text(dialect="hlo")`, or an optimized module).
    pub file: PathBuf,
    /// Chip preset: v4, v5e, v5p, v6e, tpu7x.
    #[arg(long)]
    pub chip: String,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write the kernel sequence as a Chrome trace (JSON) to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Cost the module as the per-device program of an SPMD job on this slice of the chip's torus, e.g. `8x8x8`
    /// (v4, v5p, tpu7x) or `16x16` (v5e, v6e): each collective (all-reduce, all-gather, reduce-scatter,
    /// all-to-all, collective-permute, and their -start/-done forms) priced on the slice's links, overlapping
    /// compute as far as dependencies allow. Device ids count cores, then x, y, z.
    #[arg(long, value_name = "SHAPE")]
    pub slice: Option<String>,
    /// Name the slice's devices as a mesh (`data=8,model=64`; row-major over device ids, the last axis
    /// fastest, as `jax.sharding.Mesh` over the devices in order): each collective lists the mesh axes its
    /// groups span. Needs --slice; the sizes' product must be the slice's device count.
    #[arg(long, value_name = "AXIS=SIZE,...", requires = "slice")]
    pub mesh: Option<String>,
    /// Override a chip preset value for a what-if, e.g. `chip.hbm_bytes_per_s=3.2e12`; with --slice also
    /// `chip.ici_bytes_per_s_per_link`, `chip.ici_hop_latency_ns`, `chip.ici_collective_launch_ns` (repeatable).
    #[arg(long = "set", value_name = "chip.FIELD=VALUE")]
    pub set: Vec<String>,
    /// Kernels listed in the profile.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Exit 1 when the module has opcodes tpusim does not model, or more than a fifth of its cycles are in
    /// kernels outside the calibrated domain.
    #[arg(long)]
    pub strict: bool,
    /// Largest HLO file read, in bytes (refused beyond, exit 2, before reading it).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
    pub max_bytes: u64,
}

fn mib(b: u64) -> String {
    bytes(b)
}

/// Runs `tpusim hlo`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let size = std::fs::metadata(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?
        .len();
    if size > args.max_bytes {
        anyhow::bail!(
            "{}: {size} bytes, more than the {} bytes an HLO file may have; raise the bound with --max-bytes",
            args.file.display(),
            args.max_bytes
        );
    }
    let mut text = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(&args.file).with_context(|| format!("reading {}", args.file.display()))?,
            args.max_bytes.saturating_add(1),
        ),
        &mut text,
    )
    .with_context(|| format!("reading {}", args.file.display()))?;
    if text.len() as u64 > args.max_bytes {
        anyhow::bail!(
            "{}: more than the {} bytes an HLO file may have; raise the bound with --max-bytes",
            args.file.display(),
            args.max_bytes
        );
    }
    let text = String::from_utf8(text).with_context(|| format!("{}: not UTF-8 text", args.file.display()))?;
    let origin = args.file.display().to_string();
    if let Some(path) = &args.trace {
        check_writable(path).with_context(|| format!("--trace {}", path.display()))?;
    }
    let module = tpusim_api::hlo::parse(&text, &origin)?;
    let chip = tpusim_api::hlo::chip(&args.chip, &args.set)?;
    if let Some(shape) = &args.slice {
        return run_slice(&args, &module, &text, &chip, shape, &origin);
    }
    let r = tpusim_api::hlo::hlo_report(&module, &chip, &origin)?;
    if let Some(path) = &args.trace {
        let trace = serde_json::to_string(&tpusim_api::hlo::chrome_trace(&r, &chip)?)?;
        write_atomic(path, trace).with_context(|| format!("writing {}", path.display()))?;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    } else {
        let c = &r.cost;
        let (low_us, high_us) = r.band.time_us(c.total_cycles, c.time_us);
        writeln!(
            out,
            "{} on {}: {} cycles = {} ({}-{}, {:.0}% band from held-out residuals), {} kernels",
            args.file.display(),
            c.chip,
            c.total_cycles,
            duration_us(c.time_us),
            duration_us(low_us),
            duration_us(high_us),
            tpusim_api::hlo::BAND_LEVEL * 100.0,
            c.kernels.len()
        )?;
        writeln!(
            out,
            "calibrated domain: {} of the cycles in kernels outside it{}",
            percent(r.band.out_of_domain_fraction),
            if r.band.strict_fails() {
                " (more than a fifth: --strict fails)"
            } else {
                ""
            }
        )?;
        writeln!(
            out,
            "memory: arguments {}  outputs {}  temp {}  = {} of {} HBM: {}",
            mib(c.argument_bytes),
            mib(c.output_bytes),
            mib(c.temp_bytes),
            mib(r.footprint_bytes),
            mib(r.hbm_capacity_bytes),
            if r.fits { "fits" } else { "DOES NOT FIT" }
        )?;
        writeln!(
            out,
            "\n{:<34} {:>11} {:>12} {:>6} {:>7} {:>12} {:>8} {:>5} {:>6}",
            "kernel", "kind", "cycles", "time%", "bound", "flops", "hbm MiB", "pad%", "domain"
        )?;
        let mut ks: Vec<_> = c.kernels.iter().zip(&r.domains).collect();
        ks.sort_by(|(a, _), (b, _)| b.cycles.cmp(&a.cycles).then(a.start_cycle.cmp(&b.start_cycle)));
        let total = c.total_cycles.max(1) as f64;
        for (k, d) in ks.iter().take(args.top) {
            let bound = serde_json::to_value(k.bound_by)?.as_str().unwrap_or("").to_string();
            let kind = serde_json::to_value(k.kind)?.as_str().unwrap_or("").to_string();
            writeln!(
                out,
                "{:<34} {:>11} {:>12} {:>5.1}% {:>7} {:>12} {:>8.2} {:>4.0}% {:>6}",
                k.name.chars().take(34).collect::<String>(),
                kind,
                k.cycles,
                k.cycles as f64 / total * 100.0,
                bound,
                k.flops,
                k.hbm_bytes as f64 / (1 << 20) as f64,
                k.padding_bytes as f64 / k.hbm_bytes.max(1) as f64 * 100.0,
                if d.calibrated { "in" } else { "out" }
            )?;
        }
        if ks.len() > args.top {
            let rest: u64 = ks.iter().skip(args.top).map(|(k, _)| k.cycles).sum();
            writeln!(
                out,
                "{:<34} {:>11} {:>12} {:>5.1}%",
                format!("({} more)", ks.len() - args.top),
                "",
                rest,
                rest as f64 / total * 100.0
            )?;
        }
        writeln!(out, "\n{}", r.bottleneck)?;
    }
    if args.strict && (!r.cost.unmodelled.is_empty() || r.band.strict_fails()) {
        return Ok(1);
    }
    Ok(0)
}

/// `tpusim hlo --slice`: the per-device program's kernels and its collectives on the slice.
fn run_slice(
    args: &Args,
    module: &tpusim_api::hlo::HloModule,
    text: &str,
    chip: &tpusim_api::hlo::Chip,
    shape: &str,
    origin: &str,
) -> anyhow::Result<u8> {
    let slice = tpusim_api::hlo::slice(chip, shape)?;
    let r = tpusim_api::hlo::hlo_slice_report(module, text, chip, &slice, origin, args.mesh.as_deref())?;
    if let Some(path) = &args.trace {
        let trace = tpusim_api::hlo::slice_trace(&r);
        write_atomic(path, serde_json::to_string(&trace)?).with_context(|| format!("writing {}", path.display()))?;
    }
    for w in &r.device.warnings {
        eprintln!("warning: {w}");
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    } else {
        for line in tpusim_api::hlo::slice_summary(&r, &args.file.display().to_string(), args.top) {
            writeln!(out, "{line}")?;
        }
    }
    if args.strict && (!r.device.cost.unmodelled.is_empty() || r.device.band.strict_fails()) {
        return Ok(1);
    }
    Ok(0)
}
