//! Convolution op specs and kernel readers shared by the op model's convolution rule tests.

#![allow(dead_code)]

use sim_tpu::tensorcore::lower::{VpuClass, Work};
use sim_tpu::tensorcore::OpSpec;

/// A `conv2d_nhwc` op: NHWC input, HWIO kernel.
pub fn conv(input: [u64; 4], kernel: [u64; 4], stride: u64, padding: &str, dtype: &str) -> OpSpec {
    OpSpec::from_json(&format!(
        r#"{{"op":"conv2d_nhwc","params":{{"input":{input:?},"kernel_hwio":{kernel:?},"stride":{stride},"padding":"{padding}","dtype":"{dtype}"}}}}"#
    ))
    .unwrap()
}

/// A VPU kernel's class and blocks; panics on any other kernel.
pub fn vpu(work: &Work) -> (VpuClass, f64) {
    match work {
        Work::Vpu { class, blocks, .. } => (*class, *blocks),
        other => panic!("expected a VPU kernel, got {other:?}"),
    }
}

/// The symmetric ratio error of a prediction against the compiler's cycles.
pub fn error(pred: u64, compiler: u64) -> f64 {
    let (p, e) = (pred as f64, compiler as f64);
    p.max(e) / p.min(e) - 1.0
}
