//! XLA shapes and layouts: parse and print exactly as XLA does, validate, size, and map logical
//! indices to linear offsets under nested tiles. Spec: reference/xla-layout.md (XLA's layout.cc,
//! shape_util.cc, hlo_parser.cc and docs/tiled_layout.md), in XLA's own vocabulary.

mod error;
mod geometry;
mod parse;
mod print;
mod types;
mod validate;

pub use error::LayoutError;
pub use geometry::Geometry;
pub use parse::{parse_shape, parse_shape_prefix};
pub use types::{ArrayShape, Dim, Layout, PrimitiveType, Shape, SplitConfig, Tile, COMBINE_DIMENSION};
pub use validate::validate_shape;

impl std::str::FromStr for Shape {
    type Err = LayoutError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_shape(s)
    }
}

impl ArrayShape {
    /// The physical geometry (sizes and index maps) of this array.
    pub fn geometry(&self) -> Result<Geometry, LayoutError> {
        Geometry::of(self)
    }
    /// XLA's ArraySize: bytes including tile padding and tail alignment.
    pub fn padded_bytes(&self) -> Result<u64, LayoutError> {
        self.geometry()?.padded_bytes()
    }
    /// XLA's ByteSizeOf: bytes without padding.
    pub fn unpadded_bytes(&self) -> Result<u64, LayoutError> {
        self.geometry()?.unpadded_bytes()
    }
    /// XLA's ArrayDataSize: bytes up to the last element.
    pub fn data_bytes(&self) -> Result<u64, LayoutError> {
        self.geometry()?.data_bytes()
    }
}

impl Shape {
    /// Padded bytes of an array, or the sum over a tuple's elements (tokens and opaques count 0).
    pub fn padded_bytes(&self) -> Result<u64, LayoutError> {
        match self {
            Shape::Array(a) => a.padded_bytes(),
            Shape::Tuple(e) => e.iter().try_fold(0u64, |acc, s| {
                acc.checked_add(s.padded_bytes()?)
                    .ok_or_else(|| LayoutError::Overflow("tuple size".into()))
            }),
            Shape::Token | Shape::Opaque => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests;
