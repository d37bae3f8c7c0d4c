//! The TPU tiling policy: the layout the XLA TPU compiler assigns to an array of a given element type and dims.
