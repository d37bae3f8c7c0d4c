//! The picture of `tpusim layout --svg`: the two most-minor physical dims of an array drawn as a grid,
//! cells coloured by the (first-level) tile they fall in, padding cells left empty and dashed, and
//! linear element offsets printed in the cells of small arrays, like the figures of XLA's tiling docs.

use std::fmt::Write;

use sim_core::layout::{Geometry, Shape};

/// Above this many padded cells, tiles are drawn as blocks instead of cell by cell.
const MAX_CELLS: u64 = 4096;
/// At most this many tiles per side are drawn.
const MAX_TILES_PER_SIDE: u64 = 24;

const PALETTE: &[&str] = &[
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd",
    "#ccebc5", "#ffed6f",
];

/// What is drawn: which dims go down and across, the tiles, and the grid's size in drawn units.
struct Plan {
    rank: usize,
    row_dim: Option<usize>,
    col_dim: Option<usize>,
    rows: u64,
    cols: u64,
    tile_rows: u64,
    tile_cols: u64,
    padded_cols: u64,
    /// Cell by cell (small arrays), or a square per tile.
    cell_mode: bool,
    unit_rows: u64,
    unit_cols: u64,
    n_r: u64,
    n_c: u64,
    cell_px: u64,
}

const MARGIN: u64 = 40;

/// The plan of an array's picture: its two most-minor physical dims and its first-level tile.
fn plan(array: &sim_core::layout::ArrayShape, g: &Geometry) -> Plan {
    let rank = g.dims.len();
    // Physical order, major to minor.
    let phys: Vec<usize> = g.minor_to_major.iter().rev().copied().collect();
    let (row_dim, col_dim) = match rank {
        0 => (None, None),
        1 => (None, Some(phys[0])),
        _ => (Some(phys[rank - 2]), Some(phys[rank - 1])),
    };
    let rows = row_dim.map_or(1, |d| g.dims[d]);
    let cols = col_dim.map_or(1, |d| g.dims[d]);
    let layout = array.layout.as_ref();
    let first_tile: Vec<i64> = layout
        .and_then(|l| l.tiles.first())
        .map(|t| t.dims.clone())
        .unwrap_or_default();
    let (tile_rows, tile_cols) = match first_tile.len() {
        0 => (rows.max(1), cols.max(1)),
        1 => (1, first_tile[0].max(1) as u64),
        n => {
            let r = if rank >= 2 { first_tile[n - 2].max(1) as u64 } else { 1 };
            (r, first_tile[n - 1].max(1) as u64)
        }
    };
    let padded_rows = rows.div_ceil(tile_rows) * tile_rows;
    let padded_cols = cols.div_ceil(tile_cols) * tile_cols;
    let cell_mode = padded_rows * padded_cols <= MAX_CELLS;
    let (unit_rows, unit_cols, n_r, n_c) = if cell_mode {
        (1, 1, padded_rows, padded_cols)
    } else {
        (
            tile_rows,
            tile_cols,
            padded_rows.div_ceil(tile_rows).min(MAX_TILES_PER_SIDE),
            padded_cols.div_ceil(tile_cols).min(MAX_TILES_PER_SIDE),
        )
    };
    let cell_px: u64 = if cell_mode {
        if n_c > 64 {
            14
        } else {
            28
        }
    } else {
        36
    };
    Plan {
        rank,
        row_dim,
        col_dim,
        rows,
        cols,
        tile_rows,
        tile_cols,
        padded_cols,
        cell_mode,
        unit_rows,
        unit_cols,
        n_r,
        n_c,
        cell_px,
    }
}

/// Renders the SVG text for an array shape with a layout.
pub fn render(shape: &Shape) -> anyhow::Result<String> {
    let Shape::Array(array) = shape else {
        anyhow::bail!("--svg draws arrays; {shape} is not an array");
    };
    let g = array.geometry()?;
    let p = plan(array, &g);
    let (margin, cell_px, n_r, n_c) = (MARGIN, p.cell_px, p.n_r, p.n_c);
    let mut out = String::new();
    let title = format!("{shape}");
    // Wide enough for the title and the two legend lines (about 7 px per monospace character).
    let width = (margin * 2 + n_c * cell_px).max(margin * 2 + 7 * (title.len() as u64).max(120));
    let height = margin * 2 + n_r * cell_px + 60;
    writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="10">"#
    )?;
    writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#)?;
    writeln!(
        out,
        r#"<text x="{margin}" y="20" font-size="13">{}</text>"#,
        escape(&title)
    )?;
    for i in 0..n_r {
        for j in 0..n_c {
            draw_unit(&mut out, &p, &g, i, j)?;
        }
    }
    legend(&mut out, &p, &g)?;
    writeln!(out, "</svg>")?;
    Ok(out)
}

/// One drawn unit (a cell, or a tile's square) at row `i`, column `j` of the grid.
fn draw_unit(out: &mut String, p: &Plan, g: &Geometry, i: u64, j: u64) -> anyhow::Result<()> {
    let (margin, cell_px) = (MARGIN, p.cell_px);
    let (rows, cols, tile_rows, tile_cols) = (p.rows, p.cols, p.tile_rows, p.tile_cols);
    let x = margin + j * cell_px;
    let y = margin + i * cell_px;
    let (r0, c0) = (i * p.unit_rows, j * p.unit_cols);
    let tile_id = (r0 / tile_rows) * p.padded_cols.div_ceil(tile_cols) + c0 / tile_cols;
    let colour = PALETTE[(tile_id as usize) % PALETTE.len()];
    if p.cell_mode {
        if r0 < rows && c0 < cols {
            let mut idx = vec![0u64; p.rank];
            if let Some(d) = p.row_dim {
                idx[d] = r0;
            }
            if let Some(d) = p.col_dim {
                idx[d] = c0;
            }
            let offset = g.linear_index_unchecked(&idx);
            writeln!(
                out,
                r##"<rect x="{x}" y="{y}" width="{cell_px}" height="{cell_px}" fill="{colour}" stroke="#555" stroke-width="0.5"/>"##
            )?;
            if cell_px >= 28 || offset < 1000 {
                writeln!(
                    out,
                    r#"<text x="{}" y="{}" text-anchor="middle" font-size="{}">{offset}</text>"#,
                    x + cell_px / 2,
                    y + cell_px / 2 + 3,
                    if cell_px >= 28 { 9 } else { 6 }
                )?;
            }
        } else {
            writeln!(
                out,
                r##"<rect x="{x}" y="{y}" width="{cell_px}" height="{cell_px}" fill="none" stroke="#bbb" stroke-dasharray="2,2" stroke-width="0.5"/>"##
            )?;
        }
        return Ok(());
    }
    // Block mode: a tile's real part is coloured, its padding part left empty.
    let real_r = rows.saturating_sub(r0).min(tile_rows);
    let real_c = cols.saturating_sub(c0).min(tile_cols);
    writeln!(
        out,
        r##"<rect x="{x}" y="{y}" width="{cell_px}" height="{cell_px}" fill="none" stroke="#bbb" stroke-dasharray="2,2"/>"##
    )?;
    if real_r > 0 && real_c > 0 {
        let w = cell_px * real_c / tile_cols;
        let h = cell_px * real_r / tile_rows;
        writeln!(
            out,
            r##"<rect x="{x}" y="{y}" width="{}" height="{}" fill="{colour}" stroke="#555" stroke-width="0.5"/>"##,
            w.max(1),
            h.max(1)
        )?;
    }
    Ok(())
}

/// The two legend lines under the grid: what is drawn, and the padding overhead.
fn legend(out: &mut String, p: &Plan, g: &Geometry) -> anyhow::Result<()> {
    let margin = MARGIN;
    let (rows, cols, tile_rows, tile_cols, n_r, n_c) = (p.rows, p.cols, p.tile_rows, p.tile_cols, p.n_r, p.n_c);
    let legend_y = margin + n_r * p.cell_px + 20;
    let note = if p.cell_mode {
        format!(
            "rows: dim {} ({rows}), columns: dim {} ({cols}); coloured by tile {tile_rows}x{tile_cols}; dashed = padding; numbers = linear element offset",
            p.row_dim.map_or("-".into(), |d| d.to_string()),
            p.col_dim.map_or("-".into(), |d| d.to_string()),
        )
    } else {
        format!(
            "one square per {tile_rows}x{tile_cols} tile (first {n_r}x{n_c} tiles); coloured part = data, empty dashed part = padding"
        )
    };
    writeln!(out, r#"<text x="{margin}" y="{legend_y}">{}</text>"#, escape(&note))?;
    let overhead = g.padding_overhead()? * 100.0;
    writeln!(
        out,
        r#"<text x="{margin}" y="{}">padded {} B, unpadded {} B, padding overhead {overhead:.1}%{}</text>"#,
        legend_y + 16,
        g.padded_bytes()?,
        g.unpadded_bytes()?,
        if p.rank > 2 { "; other dims at index 0" } else { "" }
    )?;
    Ok(())
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
