//! `tpusim chips`: the chip presets and where each value comes from.

use tpusim_api::chips::{chips, chips_json, show, table};

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

/// Runs `tpusim chips`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let chips = chips(args.chip.as_deref(), args.chip_file.as_deref())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&chips_json(&chips))?);
        return Ok(0);
    }
    if args.show {
        for c in &chips {
            println!("{}", c.spec.name);
            for f in show(c) {
                println!("  {:<34} {:>18}  {}", f.name, f.text, f.source);
            }
        }
        return Ok(0);
    }
    let t = table(&chips);
    print!("{:<32}", "field");
    for c in &t.chips {
        print!("{c:>18}");
    }
    println!();
    for (f, cells) in &t.rows {
        print!("{f:<32}");
        for c in cells {
            print!("{:>17}{}", c.text, c.mark);
        }
        println!();
    }
    println!("\n* assumed (not public), ~ calibrated on another chip: see `tpusim chips --show` for every value's source; override with --chip-file or `--set chip.FIELD=VALUE` (run, sweep)");
    Ok(0)
}
