//! Tiled buffers: elements stored in physical (tiled) order with padding cells as real storage,
//! get/set by logical index, and relayout into another layout. Sub-byte element sizes (E(4), E(2),
//! E(1)) are packed in a bit vector, so a buffer's byte size is exactly the layout's padded size.

use bitvec::prelude::*;

use crate::layout::{ArrayShape, Geometry, LayoutError};

/// An array stored as the hardware stores it: linear offsets under its layout, padding included.
#[derive(Clone, Debug)]
pub struct TiledBuffer {
    shape: ArrayShape,
    geometry: Geometry,
    /// Bits per stored element.
    bits: usize,
    /// Raw storage, `padded cells x bits` long (at least as long as the tiled storage).
    storage: BitVec<u64, Lsb0>,
}

impl TiledBuffer {
    /// A zero-filled buffer for an array shape (a missing layout means row-major, untiled).
    pub fn zeroed(shape: ArrayShape) -> Result<Self, LayoutError> {
        let geometry = shape.geometry()?;
        let bits = geometry.element_bits as usize;
        if bits == 0 || bits > 64 {
            return Err(LayoutError::Unsupported(format!(
                "TiledBuffer stores elements of 1 to 64 bits; {} has {bits}",
                shape.element_type
            )));
        }
        let cells = geometry.padded_elements.max(geometry.tiled_cells());
        let total_bits = cells
            .checked_mul(bits as u64)
            .filter(|b| *b <= (1u64 << 40))
            .ok_or_else(|| LayoutError::Overflow(format!("a buffer of {cells} cells is too large to hold")))?;
        Ok(TiledBuffer {
            shape,
            geometry,
            bits,
            storage: bitvec![u64, Lsb0; 0; total_bits as usize],
        })
    }

    /// The array shape (with its layout).
    pub fn shape(&self) -> &ArrayShape {
        &self.shape
    }

    /// The geometry the buffer is laid out by.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Storage size in bytes (the layout's padded size, or the tiled storage if larger).
    pub fn size_bytes(&self) -> u64 {
        (self.storage.len() as u64).div_ceil(8)
    }

    /// The raw bits of the element at a linear offset (padding cells included).
    pub fn get_raw(&self, offset: u64) -> u64 {
        let start = offset as usize * self.bits;
        self.storage[start..start + self.bits].load_le::<u64>()
    }

    /// Sets the raw bits of the cell at a linear offset (values are truncated to the element width).
    pub fn set_raw(&mut self, offset: u64, value: u64) {
        let start = offset as usize * self.bits;
        self.storage[start..start + self.bits].store_le::<u64>(value);
    }

    /// The raw bits of the element at a logical index.
    pub fn get(&self, index: &[i64]) -> Result<u64, LayoutError> {
        Ok(self.get_raw(self.geometry.linear_index(index)?))
    }

    /// Sets the element at a logical index to raw bits.
    pub fn set(&mut self, index: &[i64], value: u64) -> Result<(), LayoutError> {
        let off = self.geometry.linear_index(index)?;
        self.set_raw(off, value);
        Ok(())
    }

    /// Reads an f32 element (the buffer must hold 32-bit elements).
    pub fn get_f32(&self, index: &[i64]) -> Result<f32, LayoutError> {
        Ok(f32::from_bits(self.get(index)? as u32))
    }

    /// Writes an f32 element.
    pub fn set_f32(&mut self, index: &[i64], value: f32) -> Result<(), LayoutError> {
        self.set(index, value.to_bits() as u64)
    }

    /// The same logical contents stored under another layout of the same dims and element type.
    pub fn relayout(&self, target: ArrayShape) -> Result<TiledBuffer, LayoutError> {
        if target.dims != self.shape.dims || target.element_type != self.shape.element_type {
            return Err(LayoutError::Unsupported(format!(
                "relayout keeps dims and element type: {} cannot become {}",
                self.shape, target
            )));
        }
        let mut out = TiledBuffer::zeroed(target)?;
        let dims = self.geometry.dims.clone();
        let mut idx = vec![0u64; dims.len()];
        for _ in 0..self.geometry.element_count() {
            let v = self.get_raw(self.geometry.linear_index_unchecked(&idx));
            out.set_raw(out.geometry.linear_index_unchecked(&idx), v);
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{parse_shape, Shape};

    fn arr(t: &str) -> ArrayShape {
        match parse_shape(t).unwrap() {
            Shape::Array(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn padding_is_real_storage_and_relayout_preserves_values() {
        let mut b = TiledBuffer::zeroed(arr("f32[3,5]{1,0:T(2,2)}")).unwrap();
        assert_eq!(b.size_bytes(), 96);
        for i in 0..3 {
            for j in 0..5 {
                b.set_f32(&[i, j], (i * 10 + j) as f32).unwrap();
            }
        }
        assert_eq!(f32::from_bits(b.get_raw(17) as u32), 23.0);
        let row_major = b.relayout(arr("f32[3,5]{1,0}")).unwrap();
        assert_eq!(row_major.size_bytes(), 60);
        assert_eq!(f32::from_bits(row_major.get_raw(13) as u32), 23.0);
        let back = row_major.relayout(arr("f32[3,5]{0,1:T(8,128)}")).unwrap();
        assert_eq!(back.get_f32(&[2, 3]).unwrap(), 23.0);
    }

    #[test]
    fn sub_byte_elements_are_packed() {
        let mut b = TiledBuffer::zeroed(arr("s4[9,7]{1,0:T(8,128)(8,1)E(4)}")).unwrap();
        assert_eq!(b.size_bytes(), 1024);
        b.set(&[8, 6], 0xF).unwrap();
        b.set(&[8, 5], 0x3).unwrap();
        assert_eq!(b.get(&[8, 6]).unwrap(), 0xF);
        assert_eq!(b.get(&[8, 5]).unwrap(), 0x3);
        assert!(b.get(&[9, 0]).is_err());
    }
}
