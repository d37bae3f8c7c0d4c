//! SparseCore timing and functional model: a sequencer per SparseCore dispatching partition work to tiles (SIMD, TileSpmem, 32-byte DMA granules).
