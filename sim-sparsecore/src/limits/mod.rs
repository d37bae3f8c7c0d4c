//! Limits: our limits files, jax-tpu-embedding FDO stats (NPZ and CSV), estimation from data, and verdicts (compile-time SparseCore memory, HBM, run-time minibatching and dropping).
