//! The TensorCore model: ops lowered to windowed loops (DMA in, MXU/VPU work on padded tiles, DMA out), calibrated against the XLA TPU compiler cost model.
