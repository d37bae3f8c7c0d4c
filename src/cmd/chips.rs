//! `tpusim chips`: the chip presets and where each value comes from.

use anyhow::Context;
use sim_tpu::chips::{Chip, PRESETS};

/// Arguments of `tpusim chips`.
#[derive(clap::Args)]
pub struct Args {
    /// Show only this chip (v4, v5e, v5p, v6e, tpu7x).
    #[arg(long)]
    pub chip: Option<String>,
    /// JSON file overriding preset fields (plain values or {"value", "source"}; "chip" names the base).
    #[arg(long, value_name = "FILE")]
    pub chip_file: Option<std::path::PathBuf>,
    /// Print JSON (every field with its value and source).
    #[arg(long)]
    pub json: bool,
    /// Print every field with its value and its typed source (datasheet, compiler, calibrated on
    /// which chip, assumed, given).
    #[arg(long)]
    pub show: bool,
}

/// A chip value in units a person reads, by its field's unit (`--json` keeps the raw value).
fn human(field: &str, v: &serde_json::Value) -> Option<String> {
    use sim_core::units::{bytes, bytes_per_s, rate};
    use sim_tpu::chips::FieldUnit;
    let x = v.as_f64()?;
    match FieldUnit::of(field) {
        FieldUnit::BytesPerSecond => Some(bytes_per_s(x)),
        FieldUnit::Flops => Some(rate(x, "FLOP/s")),
        FieldUnit::Bytes if x >= 1024.0 => Some(bytes(v.as_u64()?)),
        _ => None,
    }
}

/// Loads the chip named by `--chip` with the overrides of `--chip-file` (shared by other subcommands).
pub fn load_chip(chip: Option<&str>, chip_file: Option<&std::path::Path>) -> anyhow::Result<Chip> {
    let file = match chip_file {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Some(serde_json::from_str::<serde_json::Value>(&text).with_context(|| format!("parsing {}", p.display()))?)
        }
        None => None,
    };
    Ok(Chip::load(chip, file.as_ref())?)
}

/// Runs `tpusim chips`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let chips: Vec<Chip> = match (&args.chip, &args.chip_file) {
        (None, None) => PRESETS.iter().map(|(n, _)| Chip::preset(n)).collect::<Result<_, _>>()?,
        (c, f) => vec![load_chip(c.as_deref(), f.as_deref())?],
    };
    if args.json {
        let v: serde_json::Map<String, serde_json::Value> =
            chips.iter().map(|c| (c.spec.name.clone(), c.to_json())).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    if args.show {
        for c in &chips {
            println!("{}", c.spec.name);
            for (field, v) in c.to_json().as_object().into_iter().flatten() {
                let text = human(field, &v["value"]).unwrap_or_else(|| v["value"].to_string());
                println!("  {field:<34} {text:>18}  {}", v["source"].as_str().unwrap_or(""));
            }
        }
        return Ok(0);
    }
    // Chip values, then the step parameters (launch costs, latencies, calibrated rates).
    let json: Vec<serde_json::Value> = chips
        .iter()
        .map(|c| {
            let mut m = serde_json::to_value(&c.spec)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            if let Some(p) = serde_json::to_value(&c.params)
                .ok()
                .and_then(|v| v.as_object().cloned())
            {
                m.extend(p);
            }
            serde_json::Value::Object(m)
        })
        .collect();
    let fields: Vec<String> = json[0]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    print!("{:<32}", "field");
    for c in &chips {
        print!("{:>18}", c.spec.name);
    }
    println!();
    for f in fields.iter().filter(|f| *f != "name") {
        print!("{f:<32}");
        for (j, c) in json.iter().enumerate() {
            let v = &c[f];
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                other => human(f, other).unwrap_or_else(|| other.to_string()),
            };
            let mark = match chips[j].sources.get(f) {
                Some(s) if s.is_assumed() => "*",
                Some(s) if s.is_uncertain_on(&chips[j].spec.name) => "~",
                _ => " ",
            };
            print!("{:>17}{mark}", text);
        }
        println!();
    }
    println!("\n* assumed (not public), ~ calibrated on another chip: see `tpusim chips --show` for every value's source; override with --chip-file or `--set chip.FIELD=VALUE` (run, sweep)");
    Ok(0)
}
