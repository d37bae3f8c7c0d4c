//! Host preprocessing of embedding ids, bit-exact with jax-tpu-embedding 0.1.0. Spec: reference/sparsecore-preprocessing.md.
