//! Sizes and index maps of arrays under (nested) tiled layouts: XLA's ArraySize, ArrayDataSize,
//! ByteSizeOf, and logical index <-> linear offset, per docs/tiled_layout.md.

use super::error::LayoutError;
use super::types::{ArrayShape, Layout, COMBINE_DIMENSION};

/// One tiling step: how the physical dims before it were reshaped and tiled.
#[derive(Clone, Debug)]
struct TileStep {
    /// Size-1 dims prepended because the tile is longer than the current rank.
    prepended: usize,
    /// For each merge of a `*` entry: (position, size of the more-minor dim merged into it), in order applied.
    merges: Vec<(usize, u64)>,
    /// Dims after prepending and merging, before tiling.
    dims_before: Vec<u64>,
    /// Effective tile sizes for the last `tile.len()` of `dims_before`.
    tile: Vec<u64>,
}

/// The physical geometry of an array under its layout: everything the index maps and sizes need.
#[derive(Clone, Debug)]
pub struct Geometry {
    /// Logical dims (static sizes or bounds).
    pub dims: Vec<u64>,
    /// minor_to_major of the layout.
    pub minor_to_major: Vec<usize>,
    steps: Vec<TileStep>,
    /// Dims after all tiles, major to minor: row-major over these gives the linear offset.
    pub tiled_dims: Vec<u64>,
    /// Bits per stored element (E, or the byte width x 8).
    pub element_bits: u64,
    /// tail_padding_alignment_in_elements.
    pub tail_alignment: u64,
    /// Element count with padding from the first tile and L (XLA's ArraySize / element size).
    pub padded_elements: u64,
}

fn overflow(what: &str) -> LayoutError {
    LayoutError::Overflow(what.to_string())
}

fn checked_product(dims: &[u64]) -> Result<u64, LayoutError> {
    dims.iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| overflow("element count"))
}

impl Geometry {
    /// Builds the geometry of an array shape that has a layout (a missing layout means row-major).
    pub fn of(array: &ArrayShape) -> Result<Geometry, LayoutError> {
        let dims: Vec<u64> = array
            .dims
            .iter()
            .map(|d| {
                d.upper_bound()
                    .map(|n| n as u64)
                    .ok_or_else(|| LayoutError::Unsupported("an unbounded dynamic dimension ('?') has no size".into()))
            })
            .collect::<Result<_, _>>()?;
        let default_layout;
        let layout: &Layout = match &array.layout {
            Some(l) => l,
            None => {
                default_layout = Layout::row_major(dims.len());
                &default_layout
            }
        };
        let rank = dims.len();
        let minor_to_major: Vec<usize> = layout.minor_to_major.iter().map(|&d| d as usize).collect();
        if minor_to_major.len() != rank || minor_to_major.iter().any(|&d| d >= rank) {
            return Err(LayoutError::invalid(None, "layout does not match the shape's rank"));
        }
        let mut phys: Vec<u64> = minor_to_major.iter().rev().map(|&d| dims[d]).collect();
        let mut steps = Vec::with_capacity(layout.tiles.len());
        let mut padded_elements = None;
        for tile in &layout.tiles {
            let k = tile.dims.len();
            let prepended = k.saturating_sub(phys.len());
            let mut cur: Vec<u64> = std::iter::repeat_n(1, prepended).chain(phys.iter().copied()).collect();
            let mut t: Vec<i64> = tile.dims.clone();
            // Merge `*` entries into the next more-minor dim, right to left.
            let mut merges = Vec::new();
            let mut j = k;
            while j > 0 {
                j -= 1;
                if t[j] == COMBINE_DIMENSION {
                    let pos = cur.len() - k + j;
                    if j + 1 >= t.len() {
                        return Err(LayoutError::invalid(None, format!("tile {tile} ends with '*'")));
                    }
                    let minor = cur[pos + 1];
                    cur[pos] = cur[pos]
                        .checked_mul(minor)
                        .ok_or_else(|| overflow("combined dimension"))?;
                    cur.remove(pos + 1);
                    t.remove(j);
                    merges.push((pos, minor));
                }
            }
            let kt = t.len();
            let tile_u: Vec<u64> = t.iter().map(|&x| x as u64).collect();
            let split = cur.len() - kt;
            let mut next: Vec<u64> = cur[..split].to_vec();
            for (d, tt) in cur[split..].iter().zip(&tile_u) {
                next.push(d.div_ceil(*tt));
            }
            next.extend_from_slice(&tile_u);
            if padded_elements.is_none() {
                padded_elements = Some(checked_product(&next)?);
            }
            steps.push(TileStep {
                prepended,
                merges,
                dims_before: cur,
                tile: tile_u,
            });
            phys = next;
        }
        let base = match padded_elements {
            Some(n) => n,
            None => checked_product(&dims)?,
        };
        let tail_alignment = layout.tail_padding_alignment_in_elements.max(1) as u64;
        let padded_elements = base
            .div_ceil(tail_alignment)
            .checked_mul(tail_alignment)
            .ok_or_else(|| overflow("padded element count"))?;
        let element_bits = if layout.element_size_in_bits != 0 {
            layout.element_size_in_bits as u64
        } else {
            array.element_type.byte_width() * 8
        };
        checked_product(&phys)?;
        Ok(Geometry {
            dims,
            minor_to_major,
            steps,
            tiled_dims: phys,
            element_bits,
            tail_alignment,
            padded_elements,
        })
    }

    /// Number of logical elements.
    pub fn element_count(&self) -> u64 {
        self.dims.iter().product()
    }

    fn bytes_of(&self, elements: u64) -> Result<u64, LayoutError> {
        elements
            .checked_mul(self.element_bits)
            .map(|bits| bits.div_ceil(8))
            .ok_or_else(|| overflow("byte size"))
    }

    /// Bytes with padding (XLA's ShapeUtil::ArraySize).
    pub fn padded_bytes(&self) -> Result<u64, LayoutError> {
        self.bytes_of(self.padded_elements)
    }

    /// Bytes without any padding (XLA's ByteSizeOf: elements x width, or ceil(elements x E / 8)).
    pub fn unpadded_bytes(&self) -> Result<u64, LayoutError> {
        self.bytes_of(self.element_count())
    }

    /// Bytes up to and including the last element (XLA's ArrayDataSize).
    pub fn data_bytes(&self) -> Result<u64, LayoutError> {
        if self.element_count() == 0 {
            return Ok(0);
        }
        let last: Vec<u64> = self.dims.iter().map(|d| d - 1).collect();
        self.bytes_of(self.linear_index_unchecked(&last) + 1)
    }

    /// Padding overhead: padded / unpadded - 1 (0 for empty arrays).
    pub fn padding_overhead(&self) -> Result<f64, LayoutError> {
        let unpadded = self.unpadded_bytes()?;
        if unpadded == 0 {
            return Ok(0.0);
        }
        // (padded - unpadded) / unpadded in one rounding: 36/60 is 0.6, not 96/60 - 1 = 0.6000000000000001.
        let padded = self.padded_bytes()?;
        Ok((padded as f64 - unpadded as f64) / unpadded as f64)
    }

    /// Linear element offset of a logical index.
    pub fn linear_index(&self, index: &[i64]) -> Result<u64, LayoutError> {
        let oob = || LayoutError::IndexOutOfBounds {
            index: index.to_vec(),
            dims: self.dims.iter().map(|&d| d as i64).collect(),
        };
        if index.len() != self.dims.len() {
            return Err(oob());
        }
        let mut idx = Vec::with_capacity(index.len());
        for (&i, &d) in index.iter().zip(&self.dims) {
            if i < 0 || i as u64 >= d {
                return Err(oob());
            }
            idx.push(i as u64);
        }
        Ok(self.linear_index_unchecked(&idx))
    }

    /// Linear offset of an in-bounds index (no checks).
    pub fn linear_index_unchecked(&self, index: &[u64]) -> u64 {
        let mut e: Vec<u64> = self.minor_to_major.iter().rev().map(|&d| index[d]).collect();
        for step in &self.steps {
            let mut cur: Vec<u64> = std::iter::repeat_n(0, step.prepended)
                .chain(e.iter().copied())
                .collect();
            for &(pos, minor) in &step.merges {
                cur[pos] = cur[pos] * minor + cur[pos + 1];
                cur.remove(pos + 1);
            }
            let kt = step.tile.len();
            let split = cur.len() - kt;
            let mut next: Vec<u64> = cur[..split].to_vec();
            for (x, t) in cur[split..].iter().zip(&step.tile) {
                next.push(x / t);
            }
            for (x, t) in cur[split..].iter().zip(&step.tile) {
                next.push(x % t);
            }
            e = next;
        }
        e.iter().zip(&self.tiled_dims).fold(0u64, |acc, (x, d)| acc * d + x)
    }

    /// The logical index stored at a linear element offset, or `None` for a padding cell.
    pub fn logical_index(&self, offset: u64) -> Option<Vec<u64>> {
        let total: u64 = self.tiled_dims.iter().product();
        if offset >= total {
            return None;
        }
        let mut e = vec![0u64; self.tiled_dims.len()];
        let mut rest = offset;
        for (x, d) in e.iter_mut().zip(&self.tiled_dims).rev() {
            *x = rest % d;
            rest /= d;
        }
        for step in self.steps.iter().rev() {
            let kt = step.tile.len();
            let split = step.dims_before.len() - kt;
            let mut cur: Vec<u64> = e[..split].to_vec();
            for j in 0..kt {
                let v = e[split + j] * step.tile[j] + e[split + kt + j];
                if v >= step.dims_before[split + j] {
                    return None;
                }
                cur.push(v);
            }
            for &(pos, minor) in step.merges.iter().rev() {
                let v = cur[pos];
                cur[pos] = v / minor;
                cur.insert(pos + 1, v % minor);
            }
            if cur[..step.prepended].iter().any(|&x| x != 0) {
                return None;
            }
            e = cur[step.prepended..].to_vec();
        }
        let mut index = vec![0u64; self.dims.len()];
        for (k, &d) in self.minor_to_major.iter().rev().enumerate() {
            if e[k] >= self.dims[d] {
                return None;
            }
            index[d] = e[k];
        }
        Some(index)
    }

    /// Total cells in the tiled storage (all tiles, before L alignment).
    pub fn tiled_cells(&self) -> u64 {
        self.tiled_dims.iter().product()
    }
}
