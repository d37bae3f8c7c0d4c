#!/usr/bin/env python3
"""When does the XLA TPU compiler run an FSDP matmul as a windowed einsum (a `while` loop of
collective-permutes and partial dots) instead of one all-gather or reduce-scatter?

Compiles `x @ w` (forward: w split on its contracting dim, all-gather side) and `x.T @ dy` (weight gradient:
result split on its first dim, reduce-scatter side) with the batch split on one mesh axis of every device,
over slices and sizes, and prints one JSON line per case: devices, dims, and what the optimized module holds.

Usage (never run by tests or CI):
  ALLOW_MULTIPLE_LIBTPU_LOAD=1 nice -n 10 /work/venv-tpu/bin/python tools/partition-probe/windowed.py > OUT.jsonl
"""
import json
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.topologies import get_topology_desc
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

SLICES = ["v5p:2x2x1", "v5p:2x2x2", "v5p:2x2x4", "v6e:2x2", "v6e:2x4"]
SIZES = [(1024, 512, 512), (1024, 1024, 4096), (1024, 4096, 4096), (256, 1024, 4096), (4096, 1024, 1024)]


def kinds(text):
    return {
        "windowed_ag": len(re.findall(r"^%wide\.windowed_dot_general_body_ag[^ ]* ", text, re.M)),
        "windowed_rs": len(re.findall(r"^%wide\.windowed_dot_general_body_rs[^ ]* ", text, re.M)),
        "all_gather": len(re.findall(r" all-gather(?:-start)?\(", text)),
        "reduce_scatter": len(re.findall(r" (?:reduce-scatter|all-reduce)(?:-start)?\(", text)),
    }


def main():
    for topo in SLICES:
        devs = sorted(get_topology_desc(platform="tpu", topology_name=topo).devices,
                      key=lambda d: (d.coords[2], d.coords[1], d.coords[0], getattr(d, "core_on_chip", 0)))
        n = len(devs)
        mesh = Mesh(np.array(devs), ("d",))
        for t, d, h in SIZES:
            sh = lambda *s: NamedSharding(mesh, P(*s))
            x = jax.ShapeDtypeStruct((t * n, d), jnp.bfloat16, sharding=sh("d", None))
            w = jax.ShapeDtypeStruct((d, h), jnp.bfloat16, sharding=sh("d", None))
            dy = jax.ShapeDtypeStruct((t * n, h), jnp.bfloat16, sharding=sh("d", None))
            for side, f, args, out in (("ag", lambda w, x: x @ w, (w, x), sh("d", None)),
                                       ("rs", lambda x, dy: x.T @ dy, (x, dy), sh("d", None))):
                text = jax.jit(f, out_shardings=out).lower(*args).compile().as_text()
                rec = {"topology": topo, "devices": n, "tokens_per_device": t, "d": d, "h": h, "side": side}
                rec.update(kinds(text))
                print(json.dumps(rec, sort_keys=True), flush=True)


if __name__ == "__main__":
    sys.exit(main())
