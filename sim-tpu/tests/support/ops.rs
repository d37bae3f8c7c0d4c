//! Op specs shared by the op model's rule tests.

#![allow(dead_code)]

use sim_tpu::tensorcore::OpSpec;

/// A `matmul` op `[m, k] x [k, n]` of `dtype`.
pub fn matmul(m: u64, k: u64, n: u64, dtype: &str) -> OpSpec {
    OpSpec::from_json(&format!(
        r#"{{"op":"matmul","params":{{"M":{m},"K":{k},"N":{n},"dtype":"{dtype}"}}}}"#
    ))
    .unwrap()
}
