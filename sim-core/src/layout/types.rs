//! The data types of XLA shapes and layouts, named as XLA names them.

use std::fmt;

/// An XLA element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum PrimitiveType {
    Pred,
    S1,
    S2,
    S4,
    S8,
    S16,
    S32,
    S64,
    U1,
    U2,
    U4,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    C64,
    C128,
    F4E2M1FN,
    F8E5M2,
    F8E4M3,
    F8E4M3FN,
    F8E4M3B11FNUZ,
    F8E3M4,
    F8E5M2FNUZ,
    F8E4M3FNUZ,
    F8E8M0FNU,
    Token,
    Opaque,
}

/// Every array element type with its text name, in XLA's spelling.
const NAMES: &[(PrimitiveType, &str)] = &[
    (PrimitiveType::Pred, "pred"),
    (PrimitiveType::S1, "s1"),
    (PrimitiveType::S2, "s2"),
    (PrimitiveType::S4, "s4"),
    (PrimitiveType::S8, "s8"),
    (PrimitiveType::S16, "s16"),
    (PrimitiveType::S32, "s32"),
    (PrimitiveType::S64, "s64"),
    (PrimitiveType::U1, "u1"),
    (PrimitiveType::U2, "u2"),
    (PrimitiveType::U4, "u4"),
    (PrimitiveType::U8, "u8"),
    (PrimitiveType::U16, "u16"),
    (PrimitiveType::U32, "u32"),
    (PrimitiveType::U64, "u64"),
    (PrimitiveType::F16, "f16"),
    (PrimitiveType::BF16, "bf16"),
    (PrimitiveType::F32, "f32"),
    (PrimitiveType::F64, "f64"),
    (PrimitiveType::C64, "c64"),
    (PrimitiveType::C128, "c128"),
    (PrimitiveType::F4E2M1FN, "f4e2m1fn"),
    (PrimitiveType::F8E5M2, "f8e5m2"),
    (PrimitiveType::F8E4M3, "f8e4m3"),
    (PrimitiveType::F8E4M3FN, "f8e4m3fn"),
    (PrimitiveType::F8E4M3B11FNUZ, "f8e4m3b11fnuz"),
    (PrimitiveType::F8E3M4, "f8e3m4"),
    (PrimitiveType::F8E5M2FNUZ, "f8e5m2fnuz"),
    (PrimitiveType::F8E4M3FNUZ, "f8e4m3fnuz"),
    (PrimitiveType::F8E8M0FNU, "f8e8m0fnu"),
    (PrimitiveType::Token, "token"),
    (PrimitiveType::Opaque, "opaque"),
];

impl PrimitiveType {
    /// The type of a lowercase XLA name ("bf16", "pred", ...).
    pub fn from_name(name: &str) -> Option<PrimitiveType> {
        NAMES.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
    }

    /// XLA's text name.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(t, _)| *t == self)
            .map(|(_, n)| *n)
            .unwrap_or("invalid")
    }

    /// All element types that can form arrays (excludes token and opaque).
    pub fn array_types() -> impl Iterator<Item = PrimitiveType> {
        NAMES.iter().map(|(t, _)| *t).filter(|t| t.is_array_type())
    }

    /// Whether arrays of this type exist (token and opaque are not array element types).
    pub fn is_array_type(self) -> bool {
        !matches!(self, PrimitiveType::Token | PrimitiveType::Opaque)
    }

    /// Bit width of one element (pred counts 1, as XLA's BitWidth does).
    pub fn bit_width(self) -> u32 {
        use PrimitiveType::*;
        match self {
            Pred | S1 | U1 => 1,
            S2 | U2 => 2,
            S4 | U4 | F4E2M1FN => 4,
            S8 | U8 | F8E5M2 | F8E4M3 | F8E4M3FN | F8E4M3B11FNUZ | F8E3M4 | F8E5M2FNUZ | F8E4M3FNUZ | F8E8M0FNU => 8,
            S16 | U16 | F16 | BF16 => 16,
            S32 | U32 | F32 => 32,
            S64 | U64 | F64 | C64 => 64,
            C128 => 128,
            Token | Opaque => 0,
        }
    }

    /// Bytes one element takes when not packed (sub-byte types and pred take a whole byte).
    pub fn byte_width(self) -> u64 {
        (self.bit_width() as u64).div_ceil(8)
    }

    /// Whether the type is an integer type (valid as a sparse index or pointer type).
    pub fn is_integral(self) -> bool {
        use PrimitiveType::*;
        matches!(
            self,
            S1 | S2 | S4 | S8 | S16 | S32 | S64 | U1 | U2 | U4 | U8 | U16 | U32 | U64
        )
    }
}

impl fmt::Display for PrimitiveType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One dimension of an array shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A static size.
    Static(i64),
    /// A dynamic size bounded by the given maximum (`<=N`).
    Bounded(i64),
    /// An unbounded dynamic size (`?`).
    Unbounded,
}

impl Dim {
    /// The size storage is planned for: the static size or the bound; `None` when unbounded.
    pub fn upper_bound(self) -> Option<i64> {
        match self {
            Dim::Static(n) | Dim::Bounded(n) => Some(n),
            Dim::Unbounded => None,
        }
    }
}

/// XLA's kCombineDimension: a tile entry printed `*`, merging its dim into the next more-minor one.
pub const COMBINE_DIMENSION: i64 = i64::MIN;

/// One tile of a tiled layout: sizes for the most-minor dims, major to minor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Tile sizes; [`COMBINE_DIMENSION`] marks a `*` entry.
    pub dims: Vec<i64>,
}

/// A split config (`SC(dim:idx,idx)`): where a dimension is split across memories.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitConfig {
    /// The split dimension.
    pub dimension: i64,
    /// Split points along it.
    pub split_indices: Vec<i64>,
}

/// An XLA layout, field for field as `xla::Layout` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Dimension numbers, most-minor first.
    pub minor_to_major: Vec<i64>,
    /// Tiles, applied in turn (the first one pads).
    pub tiles: Vec<Tile>,
    /// Element count is rounded up to a multiple of this (`L(n)`), default 1.
    pub tail_padding_alignment_in_elements: i64,
    /// Sparse index type (`#(t)`).
    pub index_primitive_type: Option<PrimitiveType>,
    /// Sparse pointer type (`*(t)`).
    pub pointer_primitive_type: Option<PrimitiveType>,
    /// Packed element size in bits (`E(n)`), 0 = the type's natural byte width.
    pub element_size_in_bits: i64,
    /// Memory space (`S(n)`): 0 HBM; on TPU 1 is VMEM.
    pub memory_space: i64,
    /// Split configs (`SC(...)`).
    pub split_configs: Vec<SplitConfig>,
    /// Physical shape of a sparse array (`P(shape)`).
    pub physical_shape: Option<Box<Shape>>,
    /// Dynamic-shape metadata prefix in bytes (`M(n)`).
    pub dynamic_shape_metadata_prefix_bytes: i64,
}

impl Layout {
    /// A plain layout with the given minor_to_major and no other fields.
    pub fn new(minor_to_major: Vec<i64>) -> Self {
        Layout {
            minor_to_major,
            tiles: Vec::new(),
            tail_padding_alignment_in_elements: 1,
            index_primitive_type: None,
            pointer_primitive_type: None,
            element_size_in_bits: 0,
            memory_space: 0,
            split_configs: Vec::new(),
            physical_shape: None,
            dynamic_shape_metadata_prefix_bytes: 0,
        }
    }

    /// Adds a tile (builder style).
    pub fn with_tile(mut self, dims: &[i64]) -> Self {
        self.tiles.push(Tile { dims: dims.to_vec() });
        self
    }

    /// The row-major (descending) layout of a rank.
    pub fn row_major(rank: usize) -> Self {
        Layout::new((0..rank as i64).rev().collect())
    }
}

/// An array shape: element type, dims and an optional layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayShape {
    /// Element type.
    pub element_type: PrimitiveType,
    /// Logical dims, major to minor as written.
    pub dims: Vec<Dim>,
    /// Layout, if one was given.
    pub layout: Option<Layout>,
}

/// An XLA shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A dense array.
    Array(ArrayShape),
    /// A tuple of shapes.
    Tuple(Vec<Shape>),
    /// `token[]`.
    Token,
    /// `opaque[]`.
    Opaque,
}

impl Shape {
    /// An array shape with static dims and an optional layout.
    pub fn array(element_type: PrimitiveType, dims: &[i64], layout: Option<Layout>) -> Shape {
        Shape::Array(ArrayShape {
            element_type,
            dims: dims.iter().map(|&d| Dim::Static(d)).collect(),
            layout,
        })
    }

    /// The array inside, if this is an array.
    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }
}
