//! Tiled buffers: elements stored in physical (tiled) order, padding cells included, with get/set by logical index and relayout.
