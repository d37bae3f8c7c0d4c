//! The picture of `tpusim layout --svg`: the two most-minor physical dims of an array drawn as a grid,
//! cells coloured by the (first-level) tile they fall in, padding cells left empty and dashed, and
//! linear element offsets printed in the cells of small arrays, like the figures of XLA's tiling docs.

use std::fmt::Write;

use tpusim_api::layout::Shape;

/// Above this many padded cells, tiles are drawn as blocks instead of cell by cell.
const MAX_CELLS: u64 = 4096;
/// At most this many tiles per side are drawn.
const MAX_TILES_PER_SIDE: u64 = 24;

const PALETTE: &[&str] = &[
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd",
    "#ccebc5", "#ffed6f",
];

/// Renders the SVG text for an array shape with a layout.
pub fn render(shape: &Shape) -> anyhow::Result<String> {
    let Shape::Array(array) = shape else {
        anyhow::bail!("--svg draws arrays; {shape} is not an array");
    };
    let g = array.geometry()?;
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
    let mut out = String::new();
    let title = format!("{shape}");
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
    let margin = 40;
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
    let base_index = |r: u64, c: u64| -> Vec<u64> {
        let mut idx = vec![0u64; rank];
        if let Some(d) = row_dim {
            idx[d] = r;
        }
        if let Some(d) = col_dim {
            idx[d] = c;
        }
        idx
    };
    for i in 0..n_r {
        for j in 0..n_c {
            let x = margin + j * cell_px;
            let y = margin + i * cell_px;
            let (r0, c0) = (i * unit_rows, j * unit_cols);
            let tile_id = (r0 / tile_rows) * padded_cols.div_ceil(tile_cols) + c0 / tile_cols;
            let colour = PALETTE[(tile_id as usize) % PALETTE.len()];
            if cell_mode {
                if r0 < rows && c0 < cols {
                    let offset = g.linear_index_unchecked(&base_index(r0, c0));
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
            } else {
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
            }
        }
    }
    let legend_y = margin + n_r * cell_px + 20;
    let note = if cell_mode {
        format!(
            "rows: dim {} ({rows}), columns: dim {} ({cols}); coloured by tile {tile_rows}x{tile_cols}; dashed = padding; numbers = linear element offset",
            row_dim.map_or("-".into(), |d| d.to_string()),
            col_dim.map_or("-".into(), |d| d.to_string()),
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
        if rank > 2 { "; other dims at index 0" } else { "" }
    )?;
    writeln!(out, "</svg>")?;
    Ok(out)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
