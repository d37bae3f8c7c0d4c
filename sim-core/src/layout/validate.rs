//! XLA's validity rules for shapes with layouts.

use super::error::LayoutError;
use super::types::{ArrayShape, Dim, Shape, COMBINE_DIMENSION};

/// Checks a shape against XLA's rules (dims, minor_to_major permutation, tiles, L, E).
pub fn validate_shape(shape: &Shape) -> Result<(), LayoutError> {
    match shape {
        Shape::Tuple(elems) => elems.iter().try_for_each(validate_shape),
        Shape::Token | Shape::Opaque => Ok(()),
        Shape::Array(a) => validate_array(a),
    }
}

fn validate_array(a: &ArrayShape) -> Result<(), LayoutError> {
    let mut count: i64 = 1;
    for (i, d) in a.dims.iter().enumerate() {
        if let Dim::Static(n) | Dim::Bounded(n) = d {
            if *n < 0 {
                return Err(LayoutError::invalid(
                    None,
                    format!("dimension {i} has invalid size {n}"),
                ));
            }
            count = count.checked_mul(*n).ok_or_else(|| {
                LayoutError::Overflow(format!(
                    "the element count of {a} does not fit in a signed 64-bit integer"
                ))
            })?;
        }
    }
    let Some(layout) = &a.layout else { return Ok(()) };
    let rank = a.dims.len();
    if layout.minor_to_major.len() != rank {
        return Err(LayoutError::invalid(
            None,
            format!(
                "Dimensions size is {rank}, but minor to major size is {}.",
                layout.minor_to_major.len()
            ),
        ));
    }
    let mut seen = vec![false; rank];
    for &d in &layout.minor_to_major {
        if d < 0 || d as usize >= rank || seen[d as usize] {
            return Err(LayoutError::invalid(
                None,
                format!(
                    "layout minor_to_major field {:?} is not a permutation of 0..{rank}",
                    layout.minor_to_major
                ),
            ));
        }
        seen[d as usize] = true;
    }
    for tile in &layout.tiles {
        if tile.dims.is_empty() {
            return Err(LayoutError::invalid(None, "a tile must have at least one dimension"));
        }
        for &t in &tile.dims {
            if t != COMBINE_DIMENSION && t <= 0 {
                return Err(LayoutError::invalid(
                    None,
                    format!("tile dimension size must be positive, got {t} in tile {tile}"),
                ));
            }
        }
    }
    if layout.tail_padding_alignment_in_elements <= 0 {
        return Err(LayoutError::invalid(
            None,
            format!(
                "tail_padding_alignment_in_elements must be positive, got {}",
                layout.tail_padding_alignment_in_elements
            ),
        ));
    }
    if layout.element_size_in_bits < 0 {
        return Err(LayoutError::invalid(
            None,
            format!(
                "element_size_in_bits must be non-negative, got {}",
                layout.element_size_in_bits
            ),
        ));
    }
    if layout.memory_space < 0 {
        return Err(LayoutError::invalid(
            None,
            format!("memory space must be non-negative, got {}", layout.memory_space),
        ));
    }
    if let Some(p) = &layout.physical_shape {
        validate_shape(p)?;
    }
    Ok(())
}
