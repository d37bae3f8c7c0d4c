//! SparseCore timing model. Each SparseCore has a sequencer that hands partition work to its tiles;
//! tiles run in parallel, each with SIMD lanes and a DMA engine that moves rows between HBM and
//! TileSpmem in 32-byte granules. Work per step comes from the real preprocessing statistics.
//!
//! Per SparseCore and step (the ids it owns after dedup, the unique rows among them):
//! - forward: read the CSR slice (12 B per id), sort/dedup on the cross-lane units, gather each unique
//!   row from HBM (padded to the DMA granule), scale-and-add each id's row into its sample's activation
//!   (dim / lanes SIMD cycles per id), write activations (samples x dim x 4 B);
//! - backward: read the activation gradients, reduce per unique id (dim / lanes cycles per id), then
//!   read-modify-write every unique row and its optimizer slots.
//!
//! Constants not published by Google (the tile DMA rate, per-id sequencer overhead) are calibrated on
//! the one published SparseCore figure (Pallas gather on TPU7x: 4,194,304 rows x 512 B in 4.05 ms on
//! 2 SparseCores) and marked as such; they can be overridden.

use serde::{Deserialize, Serialize};

/// Embedding optimizers and the f32 slots they keep per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// Plain SGD: no slots.
    Sgd,
    /// Adagrad: one accumulator.
    Adagrad,
    /// Adam: two moments.
    Adam,
}

impl Optimizer {
    /// Slot rows per table row.
    pub fn slots(self) -> u64 {
        match self {
            Optimizer::Sgd => 0,
            Optimizer::Adagrad => 1,
            Optimizer::Adam => 2,
        }
    }
}

/// The SparseCore parameters the model uses (from the chip preset).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScParams {
    /// SparseCores per chip.
    pub sparsecores: u32,
    /// Tiles per SparseCore.
    pub tiles: u32,
    /// f32 SIMD lanes per tile.
    pub lanes_f32: u32,
    /// bf16 SIMD lanes per tile.
    pub lanes_bf16: u32,
    /// SparseCore clock in Hz.
    pub clock_hz: u64,
    /// DMA granule in bytes.
    pub dma_granule_bytes: u64,
    /// Bytes one tile's DMA engine moves per cycle (I: calibrated on the Pallas gather figure).
    pub tile_dma_bytes_per_cycle: f64,
    /// Sequencer and sort/dedup cycles per id on a tile (assumed: cross-lane sort of 8-16 keys).
    pub cycles_per_id: u64,
    /// Share of the chip's HBM bandwidth the SparseCores can draw (0..=1).
    pub hbm_share: f64,
}

/// Work of one SparseCore in one step (from preprocessing statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScWork {
    /// Ids after within-sample dedup (not dropped).
    pub ids: u64,
    /// Unique rows among them.
    pub unique: u64,
    /// Samples whose activations it writes.
    pub samples: u64,
}

/// Cost of one SparseCore pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScCost {
    /// Compute cycles on the busiest tile (SIMD + sequencing).
    pub compute_cycles: u64,
    /// HBM bytes moved (padded to granules).
    pub hbm_bytes: u64,
    /// Of which padding (row padding to the DMA granule).
    pub hbm_padding_bytes: u64,
    /// Cycles the tiles' DMA engines need at their own rate.
    pub dma_cycles: u64,
}

/// Row bytes as stored: the dim padded to 8 f32 (32 B), rounded up to the DMA granule.
pub fn padded_row_bytes(dim: u64, elem_bytes: u64, granule: u64) -> u64 {
    let padded_dim = dim.div_ceil(8) * 8;
    (padded_dim * elem_bytes).div_ceil(granule) * granule
}

impl ScParams {
    fn lanes(&self, elem_bytes: u64) -> u64 {
        if elem_bytes == 2 {
            self.lanes_bf16.max(1) as u64
        } else {
            self.lanes_f32.max(1) as u64
        }
    }

    /// Forward pass of one SparseCore over one table stack.
    pub fn forward(&self, w: ScWork, dim: u64, elem_bytes: u64) -> ScCost {
        let tiles = self.tiles.max(1) as u64;
        let row = padded_row_bytes(dim, elem_bytes, self.dma_granule_bytes);
        let logical_row = dim * elem_bytes;
        let simd = dim.div_ceil(self.lanes(elem_bytes));
        let ids_per_tile = w.ids.div_ceil(tiles);
        let compute_cycles = ids_per_tile * (self.cycles_per_id + simd);
        let gather = w.unique * row;
        let csr = w.ids * 12;
        let activations = w.samples * dim * 4;
        let hbm_bytes = gather + csr + activations;
        ScCost {
            compute_cycles,
            hbm_bytes,
            hbm_padding_bytes: w.unique * (row - logical_row.min(row)),
            dma_cycles: (hbm_bytes as f64 / (self.tile_dma_bytes_per_cycle * tiles as f64)).ceil() as u64,
        }
    }

    /// Backward pass (gradient reduction and optimizer update) of one SparseCore over one stack.
    pub fn backward(&self, w: ScWork, dim: u64, elem_bytes: u64, optimizer: Optimizer) -> ScCost {
        let tiles = self.tiles.max(1) as u64;
        let row = padded_row_bytes(dim, elem_bytes, self.dma_granule_bytes);
        let logical_row = dim * elem_bytes;
        let simd = dim.div_ceil(self.lanes(elem_bytes));
        let rows_touched = 1 + optimizer.slots();
        // Reduce every id's gradient, then update each unique row (and its slots).
        let compute_cycles =
            w.ids.div_ceil(tiles) * (self.cycles_per_id + simd) + w.unique.div_ceil(tiles) * simd * rows_touched * 2;
        let rmw = w.unique * row * rows_touched * 2;
        let grads = w.samples * dim * 4 + w.ids * 12;
        let hbm_bytes = rmw + grads;
        ScCost {
            compute_cycles,
            hbm_bytes,
            hbm_padding_bytes: w.unique * (row - logical_row.min(row)) * rows_touched * 2,
            dma_cycles: (hbm_bytes as f64 / (self.tile_dma_bytes_per_cycle * tiles as f64)).ceil() as u64,
        }
    }

    /// Of `n` items dealt evenly to the tiles, how many tile `tile` gets (the first tiles take
    /// the remainder, so tile 0 is the busiest).
    pub fn tile_share(&self, n: u64, tile: u32) -> u64 {
        let tiles = self.tiles.max(1) as u64;
        n / tiles + u64::from((tile as u64) < n % tiles)
    }

    /// Compute cycles of tile `tile` in a forward pass: its share of the ids. The busiest tile's
    /// figure is [`ScParams::forward`]'s `compute_cycles`.
    pub fn forward_tile_cycles(&self, w: ScWork, dim: u64, elem_bytes: u64, tile: u32) -> u64 {
        let simd = dim.div_ceil(self.lanes(elem_bytes));
        self.tile_share(w.ids, tile) * (self.cycles_per_id + simd)
    }

    /// Compute cycles of tile `tile` in a backward pass: its share of the ids and unique rows. The
    /// busiest tile's figure is [`ScParams::backward`]'s `compute_cycles`.
    pub fn backward_tile_cycles(&self, w: ScWork, dim: u64, elem_bytes: u64, optimizer: Optimizer, tile: u32) -> u64 {
        let simd = dim.div_ceil(self.lanes(elem_bytes));
        let rows_touched = 1 + optimizer.slots();
        self.tile_share(w.ids, tile) * (self.cycles_per_id + simd)
            + self.tile_share(w.unique, tile) * simd * rows_touched * 2
    }

    /// Time in picoseconds of `cycles` SparseCore cycles.
    pub fn cycles_to_ps(&self, cycles: u64) -> u64 {
        (cycles as u128 * 1_000_000_000_000u128).div_ceil(self.clock_hz.max(1) as u128) as u64
    }
}

/// A gather of `rows` rows of `row_bytes` on the SparseCores of one device (`sparsecores` of them):
/// time in ns, limited by the tiles' DMA rate, the per-row sequencing and the HBM bandwidth.
pub fn sc_gather_ns(p: &ScParams, sparsecores: u32, rows: u64, row_bytes: u64, hbm_bytes_per_s: u64) -> (f64, u64) {
    let tiles = (sparsecores * p.tiles).max(1) as u64;
    let bytes = rows * row_bytes.div_ceil(p.dma_granule_bytes) * p.dma_granule_bytes;
    let dma_cycles = bytes as f64 / (p.tile_dma_bytes_per_cycle * tiles as f64);
    let ns_dma = dma_cycles / p.clock_hz as f64 * 1e9;
    let ns_hbm = bytes as f64 / (hbm_bytes_per_s as f64 * p.hbm_share) * 1e9;
    (ns_dma.max(ns_hbm), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpu7x() -> ScParams {
        ScParams {
            sparsecores: 4,
            tiles: 16,
            lanes_f32: 16,
            lanes_bf16: 32,
            clock_hz: 1_900_000_000,
            dma_granule_bytes: 32,
            // The step parameters' values (sim-tpu chips/params.json).
            tile_dma_bytes_per_cycle: 8.73,
            cycles_per_id: 4,
            hbm_share: 1.0,
        }
    }

    #[test]
    fn tiles_share_the_work_and_the_busiest_is_the_pass() {
        let p = tpu7x();
        let w = ScWork {
            ids: 1000,
            unique: 333,
            samples: 64,
        };
        // 1000 ids on 16 tiles: 62 each, the first 8 take one more.
        assert_eq!(
            (p.tile_share(1000, 0), p.tile_share(1000, 7), p.tile_share(1000, 8)),
            (63, 63, 62)
        );
        assert_eq!((0..p.tiles).map(|t| p.tile_share(1000, t)).sum::<u64>(), 1000);
        let f: Vec<u64> = (0..p.tiles).map(|t| p.forward_tile_cycles(w, 64, 4, t)).collect();
        let b: Vec<u64> = (0..p.tiles)
            .map(|t| p.backward_tile_cycles(w, 64, 4, Optimizer::Adagrad, t))
            .collect();
        assert_eq!(f.iter().max(), Some(&p.forward(w, 64, 4).compute_cycles));
        assert_eq!(
            b.iter().max(),
            Some(&p.backward(w, 64, 4, Optimizer::Adagrad).compute_cycles)
        );
    }

    #[test]
    fn pallas_gather_figure() {
        // Published: 4.05 ms on 2 SparseCores (the TensorCore take is `sim_tpu::tensorcore::gather`'s).
        let (sc, _) = sc_gather_ns(&tpu7x(), 2, 4_194_304, 512, 3_686_000_000_000);
        assert!((sc / 4.05e6 - 1.0).abs() < 0.02, "{sc}");
    }

    #[test]
    fn width_one_rows_waste_seven_eighths() {
        assert_eq!(padded_row_bytes(1, 4, 32), 32);
        let c = tpu7x().forward(
            ScWork {
                ids: 800,
                unique: 100,
                samples: 0,
            },
            1,
            4,
        );
        assert_eq!(c.hbm_padding_bytes, 100 * 28);
    }
}
