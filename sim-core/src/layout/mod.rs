//! XLA shapes and layouts: parse and print exactly as XLA does, validate, size, and map logical indices to linear offsets under nested tiles. Spec: reference/xla-layout.md.
