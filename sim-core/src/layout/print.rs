//! Printing shapes as XLA's canonical text (`ShapeUtil::HumanStringWithLayout`).

use std::fmt::{self, Display, Write};

use super::types::{ArrayShape, Dim, Layout, Shape, Tile, COMBINE_DIMENSION};

impl Display for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('(')?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            if *d == COMBINE_DIMENSION {
                f.write_char('*')?;
            } else {
                write!(f, "{d}")?;
            }
        }
        f.write_char(')')
    }
}

impl Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('{')?;
        for (i, d) in self.minor_to_major.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            write!(f, "{d}")?;
        }
        let mut colon = false;
        let mut field = |f: &mut fmt::Formatter<'_>| -> fmt::Result {
            if !colon {
                colon = true;
                f.write_char(':')?;
            }
            Ok(())
        };
        if !self.tiles.is_empty() {
            field(f)?;
            f.write_char('T')?;
            for t in &self.tiles {
                write!(f, "{t}")?;
            }
        }
        if self.tail_padding_alignment_in_elements != 1 {
            field(f)?;
            write!(f, "L({})", self.tail_padding_alignment_in_elements)?;
        }
        if let Some(t) = self.index_primitive_type {
            field(f)?;
            write!(f, "#({t})")?;
        }
        if let Some(t) = self.pointer_primitive_type {
            field(f)?;
            write!(f, "*({t})")?;
        }
        if self.element_size_in_bits != 0 {
            field(f)?;
            write!(f, "E({})", self.element_size_in_bits)?;
        }
        if self.memory_space != 0 {
            field(f)?;
            write!(f, "S({})", self.memory_space)?;
        }
        if !self.split_configs.is_empty() {
            field(f)?;
            f.write_str("SC")?;
            for sc in &self.split_configs {
                write!(f, "({}:", sc.dimension)?;
                for (i, s) in sc.split_indices.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{s}")?;
                }
                f.write_char(')')?;
            }
        }
        if let Some(p) = &self.physical_shape {
            field(f)?;
            write!(f, "P({p})")?;
        }
        if self.dynamic_shape_metadata_prefix_bytes > 0 {
            field(f)?;
            write!(f, "M({})", self.dynamic_shape_metadata_prefix_bytes)?;
        }
        f.write_char('}')
    }
}

impl Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(n) => write!(f, "{n}"),
            Dim::Bounded(n) => write!(f, "<={n}"),
            Dim::Unbounded => f.write_char('?'),
        }
    }
}

impl Display for ArrayShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.element_type)?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            write!(f, "{d}")?;
        }
        f.write_char(']')?;
        if let Some(layout) = &self.layout {
            let text = layout.to_string();
            // XLA does not print "{}" for scalars.
            if !(self.dims.is_empty() && text == "{}") {
                f.write_str(&text)?;
            }
        }
        Ok(())
    }
}

impl Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Array(a) => write!(f, "{a}"),
            Shape::Token => f.write_str("token[]"),
            Shape::Opaque => f.write_str("opaque[]"),
            Shape::Tuple(elems) => {
                f.write_char('(')?;
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                        if i % 5 == 0 {
                            write!(f, "/*index={i}*/")?;
                        }
                    }
                    write!(f, "{e}")?;
                }
                f.write_char(')')
            }
        }
    }
}
