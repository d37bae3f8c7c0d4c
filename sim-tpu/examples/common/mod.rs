//! Helpers shared by the calibration and fit examples.

// Each example uses only part of it.
#[allow(dead_code)]
pub mod corpus;
