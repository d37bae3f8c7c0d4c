"""Measures the Python layer against the CLI (same workload, in-process call vs a process running
`tpusim ... --json`) and a Ray sweep against the local one. Needs `pip install ./python ray` and
`cargo build --release`. Usage: python tools/python-overhead.py [--ray]"""

import json
import subprocess
import sys
import time
from pathlib import Path

import tpusim
import tpusim._ray

ROOT = Path(__file__).resolve().parents[1]
CLI = str(ROOT / "target" / "release" / "tpusim")
EX = ROOT / "testdata" / "preprocess" / "example"


def best(f, n):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def cli(*args):
    return json.loads(subprocess.run([CLI, *map(str, args)], capture_output=True, check=False, text=True).stdout)


CASES = [
    ("layout bf16[8,1,1280,16384] --tpu v5p", lambda: tpusim.layout("bf16[8,1,1280,16384]", tpu="v5p"),
     lambda: cli("layout", "--json", "--tpu", "v5p", "bf16[8,1,1280,16384]"), 200),
    ("preprocess example (CSR buffers)", lambda: tpusim.preprocess(EX / "spec.json", EX / "ids.npz"),
     lambda: cli("preprocess", "--json", "--spec", EX / "spec.json", "--ids", EX / "ids.npz"), 100),
    ("run --preset dlrm-small", lambda: tpusim.run(preset="dlrm-small"),
     lambda: cli("run", "--json", "--preset", "dlrm-small"), 10),
    ("run --preset dlrm-criteo", lambda: tpusim.run(preset="dlrm-criteo"),
     lambda: cli("run", "--json", "--preset", "dlrm-criteo"), 3),
]

# A large batch: 2,097,152 ids as numpy arrays in memory (Python) vs the same ids in an NPZ file (CLI).
import tempfile

import numpy as np

BIG_SPEC = {"num_sc_per_device": 4, "local_device_count": 1, "global_device_count": 1,
            "allow_id_dropping": True, "enable_minibatching": False,
            "tables": [{"name": "t", "vocabulary_size": 1_000_000, "embedding_dim": 32, "combiner": "sum"}],
            "features": [{"name": "f", "table": "t", "input_shape": [65536, 32]}]}
BIG_IDS = {"f": np.random.default_rng(1).zipf(1.1, size=(65536, 32)).astype(np.int32) % 1_000_000}
tmp = Path(tempfile.mkdtemp())
(tmp / "spec.json").write_text(json.dumps(BIG_SPEC))
np.savez(tmp / "ids.npz", **BIG_IDS)
CASES.append(("preprocess 2M ids --stats (numpy vs NPZ)", lambda: tpusim.preprocess(BIG_SPEC, BIG_IDS, True),
              lambda: cli("preprocess", "--json", "--stats", "--spec", tmp / "spec.json", "--ids", tmp / "ids.npz"),
              5))
CASES.append(("preprocess 2M ids, CSR buffers (numpy vs NPZ)", lambda: tpusim.preprocess(BIG_SPEC, BIG_IDS),
              lambda: cli("preprocess", "--json", "--spec", tmp / "spec.json", "--ids", tmp / "ids.npz"), 3))
CASES.append(("sweep 2 x 2 x 3 dlrm-small (sweep -o)",
              lambda: tpusim.sweep(preset="dlrm-small", chip=["v5p", "v6e"], chips=[4, 8], batch=[4096, 8192, 16384],
                                   output=tmp / "py"),
              lambda: subprocess.run([CLI, "sweep", "--preset", "dlrm-small", "--chip", "v5p,v6e", "--chips", "4,8",
                                      "--batch", "4096,8192,16384", "-o", tmp / "cli"], capture_output=True), 3))

for name, py, proc, n in CASES:
    a, b = best(py, n), best(proc, n)
    print(f"{name:<40} python {a * 1e3:9.2f} ms   CLI process (incl. JSON parse) {b * 1e3:9.2f} ms   "
          f"difference {(a - b) * 1e3:+9.2f} ms")

if "--ray" in sys.argv:
    grid = dict(preset="dlrm-small", chip=["v5p", "v6e"], chips=[4, 8], batch="4096..65536x2")
    t = time.perf_counter()
    local = tpusim.sweep(**grid)
    t_local = time.perf_counter() - t
    import ray

    t = time.perf_counter()
    tpusim._ray.connect()
    t_connect = time.perf_counter() - t
    t = time.perf_counter()
    remote = tpusim.sweep(**grid, executor="ray")
    t_ray = time.perf_counter() - t
    t = time.perf_counter()
    remote2 = tpusim.sweep(**grid, executor="ray")
    t_ray2 = time.perf_counter() - t
    assert remote == local and remote2 == local
    print(f"sweep of {len(local)} configurations: local {t_local:.2f} s; Ray: connect/start {t_connect:.2f} s, "
          f"first sweep {t_ray:.2f} s, second {t_ray2:.2f} s (cluster CPUs {ray.cluster_resources().get('CPU')})")
    ray.shutdown()
