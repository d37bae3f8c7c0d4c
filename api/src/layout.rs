//! `tpusim layout --json`: the facts of one shape (canonical text, sizes, padding, index maps).

use serde_json::{json, Value};
use sim_core::layout::parse_shape;

pub use sim_core::layout::Shape;
use sim_tpu::tiling::assign_tpu_layout;

/// What to report about a shape beyond its sizes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    /// Give a shape without a layout the layout the XLA TPU compiler assigns on this chip.
    pub tpu: Option<String>,
    /// Also report the linear element offset of this logical index.
    pub index: Option<Vec<i64>>,
    /// Also report the logical index stored at this linear element offset (None inside: padding).
    pub offset: Option<u64>,
}

/// The facts `tpusim layout` reports for one shape.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The shape with its (assigned) layout.
    pub shape: Shape,
    /// Bytes with tiling padding.
    pub padded_bytes: u64,
    /// Bytes of the tiles holding data.
    pub data_bytes: u64,
    /// Bytes of the logical elements.
    pub unpadded_bytes: u64,
    /// padded / unpadded - 1.
    pub padding_overhead: f64,
    /// The physical (tiled) dimensions, major to minor.
    pub physical_dims: Vec<u64>,
    /// Linear offset of `Query::index`.
    pub linear_index: Option<u64>,
    /// Logical index at `Query::offset` (inner None: padding).
    pub logical_index: Option<Option<Vec<u64>>>,
}

/// Checks a chip name for `--tpu` before any shape is read.
pub fn check_chip(chip: &str) -> crate::Result<()> {
    sim_tpu::tiling::normalize_chip(chip).map_err(anyhow::Error::from)?;
    Ok(())
}

/// The facts of one shape given in XLA text.
pub fn facts(input: &str, q: &Query) -> crate::Result<Facts> {
    Ok(facts_inner(input, q)?)
}

fn facts_inner(input: &str, q: &Query) -> anyhow::Result<Facts> {
    let mut shape = parse_shape(input.trim())?;
    if let Some(chip) = &q.tpu {
        shape = assign_tpu_layout(&shape, chip)?;
    }
    let Shape::Array(array) = &shape else {
        let padded = shape.padded_bytes()?;
        return Ok(Facts {
            shape,
            padded_bytes: padded,
            data_bytes: padded,
            unpadded_bytes: padded,
            padding_overhead: 0.0,
            physical_dims: vec![],
            linear_index: None,
            logical_index: None,
        });
    };
    let g = array.geometry()?;
    let linear_index = match &q.index {
        Some(i) => Some(g.linear_index(i)?),
        None => None,
    };
    if let Some(o) = q.offset {
        if o >= g.padded_elements {
            anyhow::bail!(
                "--offset {o}: outside {shape}, which has {n} element offsets (valid: 0 to {n} exclusive, padding included)",
                n = g.padded_elements
            );
        }
    }
    let logical_index = q.offset.map(|o| g.logical_index(o));
    Ok(Facts {
        padded_bytes: g.padded_bytes()?,
        data_bytes: g.data_bytes()?,
        unpadded_bytes: g.unpadded_bytes()?,
        padding_overhead: g.padding_overhead()?,
        physical_dims: g.tiled_dims.clone(),
        linear_index,
        logical_index,
        shape,
    })
}

/// The `--json` object of one shape.
pub fn to_json(input: &str, f: &Facts) -> Value {
    let mut v = json!({
        "input": input,
        "shape": f.shape.to_string(),
        "padded_bytes": f.padded_bytes,
        "data_bytes": f.data_bytes,
        "unpadded_bytes": f.unpadded_bytes,
        "padding_overhead": f.padding_overhead,
        "physical_dims": f.physical_dims,
    });
    if let Some(i) = f.linear_index {
        v["linear_index"] = json!(i);
    }
    if let Some(l) = &f.logical_index {
        v["logical_index"] = match l {
            Some(idx) => json!(idx),
            None => Value::Null,
        };
    }
    v
}

/// `tpusim layout --json` for one shape: the facts, or the error.
pub fn layout_json(input: &str, q: &Query) -> crate::Result<Value> {
    facts(input, q).map(|f| to_json(input, &f))
}

/// `tpusim layout --svg`: the picture of an array's layout (its two most-minor physical dims as a grid,
/// cells coloured by tile, padding dashed, element offsets in small arrays), as SVG text.
pub fn svg(shape: &Shape) -> crate::Result<String> {
    Ok(crate::layout_svg::render(shape)?)
}
