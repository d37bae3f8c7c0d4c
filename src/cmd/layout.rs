//! `tpusim layout`: canonical shape text, sizes, padding, index maps and pictures of XLA layouts.

use std::io::BufRead;

use anyhow::Context;
use serde_json::json;
use tpusim_api::layout::{check_chip, facts, to_json, Facts, Query, Shape};

/// Arguments of `tpusim layout`.
#[derive(clap::Args)]
pub struct Args {
    /// Shapes in XLA text, e.g. 'bf16[8,1,1280,16384]' or 'f32[3,5]{1,0:T(2,2)}'.
    pub shapes: Vec<String>,
    /// Read one shape per line from standard input.
    #[arg(long)]
    pub stdin: bool,
    /// Give shapes without a layout the layout the XLA TPU compiler assigns on this chip (v4, v5e, v5p,
    /// v6e, tpu7x). `--tpu` is an alias.
    #[arg(long, alias = "tpu", value_name = "CHIP")]
    pub chip: Option<String>,
    /// Also print the linear element offset of this logical index, e.g. --index 2,3.
    #[arg(long, value_name = "I,J,..", allow_hyphen_values = true)]
    pub index: Option<String>,
    /// Also print the logical index stored at this linear element offset (or that it is padding).
    #[arg(long, value_name = "N")]
    pub offset: Option<u64>,
    /// One JSON object per input line instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Draw the layout in memory as SVG (first shape only). `--svg` is an alias.
    #[arg(short = 'o', long = "out", alias = "svg", value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,
}

fn parse_index(text: &str) -> anyhow::Result<Vec<i64>> {
    text.split(',')
        .map(|t| {
            t.trim()
                .parse::<i64>()
                .with_context(|| format!("--index: '{t}' is not an integer"))
        })
        .collect()
}

fn print_table(input: &str, f: &Facts) {
    println!("{}", f.shape);
    if input.trim() != f.shape.to_string() {
        println!("  input            {}", input.trim());
    }
    if let Shape::Array(a) = &f.shape {
        if let Some(layout) = &a.layout {
            let tiles: Vec<String> = layout.tiles.iter().map(|t| t.to_string()).collect();
            println!("  minor_to_major   {:?}", layout.minor_to_major);
            println!(
                "  tiles            {}",
                if tiles.is_empty() {
                    "none".into()
                } else {
                    tiles.join(" ")
                }
            );
        }
        println!(
            "  physical dims    {:?}  (row-major over these gives the linear offset)",
            f.physical_dims
        );
    }
    // Exact bytes (layouts are about exact sizes), with the binary-unit reading beside large ones.
    let b = |n: u64| {
        if n >= 1024 {
            format!("{n:>14}  ({})", tpusim_api::units::bytes(n))
        } else {
            format!("{n:>14}")
        }
    };
    println!("  padded bytes     {}", b(f.padded_bytes));
    println!("  data bytes       {}", b(f.data_bytes));
    println!("  unpadded bytes   {}", b(f.unpadded_bytes));
    println!("  padding overhead {:>13.2}%", f.padding_overhead * 100.0);
    if let Some(i) = f.linear_index {
        println!("  linear index     {i:>14}");
    }
    if let Some(l) = &f.logical_index {
        match l {
            Some(idx) => println!("  logical index    {idx:?}"),
            None => println!("  logical index    (padding)"),
        }
    }
}

/// Runs `tpusim layout`.
pub fn run(args: Args) -> anyhow::Result<u8> {
    if let Some(chip) = &args.chip {
        check_chip(chip)?;
    }
    let query = Query {
        tpu: args.chip.clone(),
        index: args.index.as_deref().map(parse_index).transpose()?,
        offset: args.offset,
    };
    let mut inputs: Vec<String> = args.shapes.clone();
    if args.stdin {
        for line in std::io::stdin().lock().lines() {
            let line = line.context("reading standard input")?;
            if !line.trim().is_empty() {
                inputs.push(line);
            }
        }
    }
    if inputs.is_empty() {
        anyhow::bail!("no shape given: pass shapes as arguments or use --stdin");
    }
    let mut failed = false;
    for (n, input) in inputs.iter().enumerate() {
        match facts(input, &query) {
            Ok(f) => {
                if args.json {
                    println!("{}", to_json(input, &f));
                } else {
                    if n > 0 {
                        println!();
                    }
                    print_table(input, &f);
                }
                if n == 0 {
                    if let Some(path) = &args.svg {
                        let svg = tpusim_api::layout::svg(&f.shape)?;
                        tpusim_api::output::write_atomic(path, svg)
                            .with_context(|| format!("writing {}", path.display()))?;
                        if !args.json {
                            println!("  picture          {}", path.display());
                        }
                    }
                }
            }
            Err(e) => {
                failed = true;
                if args.json {
                    println!("{}", json!({"input": input, "error": format!("{e:#}")}));
                } else {
                    eprintln!("error: {}: {e:#}", input.trim());
                }
            }
        }
    }
    Ok(if failed { 2 } else { 0 })
}
