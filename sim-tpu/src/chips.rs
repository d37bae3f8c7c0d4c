//! Chip presets v4, v5e, v5p, v6e, tpu7x as embedded JSON data files; every value carries its source or is marked assumed.
