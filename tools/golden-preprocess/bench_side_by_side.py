#!/usr/bin/env python3
"""Side-by-side preprocessing speed: jax-tpu-embedding's C++ (through its Python binding) and the
`tpusim preprocess --stats` process, on the same npz: 65,536 x 32 Zipf(1.2) ids, vocab 1e6,
4 SparseCores, one device.

  /tmp/jte/bin/python tools/golden-preprocess/bench_side_by_side.py [--tpusim target/release/tpusim]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--tpusim", default="target/release/tpusim")
ap.add_argument("--repeat", type=int, default=5)
args = ap.parse_args()

rows, valency, vocab = 65536, 32, 1_000_000
rng = np.random.default_rng(0)
ids = ((rng.zipf(1.2, (rows, valency)) - 1) % vocab).astype(np.int32)
limit = 1 << 20
spec = {"num_sc_per_device": 4, "local_device_count": 1, "global_device_count": 1, "allow_id_dropping": False,
        "tables": [{"name": "t", "vocabulary_size": vocab, "embedding_dim": 8, "combiner": "sum",
                    "max_ids_per_partition": limit, "max_unique_ids_per_partition": limit,
                    "suggested_coo_buffer_size_per_device": rows * valency + 4096}],
        "features": [{"name": "f", "table": "t", "input_shape": [rows, valency]}]}
tmp = tempfile.mkdtemp()
spec_path, npz_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "ids.npz")
json.dump(spec, open(spec_path, "w"))
np.savez(npz_path, f=ids)

from jax_tpu_embedding.sparsecore.lib.nn import embedding, embedding_spec
from jax_tpu_embedding.sparsecore.lib.core import pybind_input_preprocessing as pp
t = embedding_spec.TableSpec(vocabulary_size=vocab, embedding_dim=8, initializer=lambda: None,
                             optimizer=embedding_spec.SGDOptimizerSpec(learning_rate=0.1), combiner="sum", name="t",
                             max_ids_per_partition=limit, max_unique_ids_per_partition=limit,
                             suggested_coo_buffer_size_per_device=rows * valency + 4096)
f = embedding_spec.FeatureSpec(table_spec=t, input_shape=[rows, valency], output_shape=[rows, 8], name="f")
embedding.prepare_feature_specs_for_training([f], global_device_count=1, num_sc_per_device=4)
w = np.ones_like(ids, np.float32)
n = rows * valency


def best(fn):
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


lib = best(lambda: pp.preprocess_sparse_dense_matmul_input([ids], [w], [f], local_device_count=1,
                                                           global_device_count=1, num_sc_per_device=4))
ours = best(lambda: subprocess.run([args.tpusim, "preprocess", "--stats", "--spec", spec_path, "--ids", npz_path],
                                   check=True, capture_output=True))
print(f"ids: {n}")
print(f"jax-tpu-embedding (in-process call): {lib*1e3:.1f} ms = {n/lib/1e6:.2f} M ids/s")
print(f"tpusim preprocess --stats (whole process incl. npz load): {ours*1e3:.1f} ms = {n/ours/1e6:.2f} M ids/s")
print(f"ratio: {lib/ours:.2f}x")
