//! workloads: workload specs and presets, id generators and id/FDO file readers, and the
//! training-step program builder (TensorCore/SparseCore pipelining with stale gradients).
