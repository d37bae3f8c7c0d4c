#!/usr/bin/env python3
"""Compiles a sharded MLP and a transformer block training step (data- and tensor-parallel) ahead-of-time on
several v5p slices (the block tensor-parallel only where its 16 heads split evenly: not on 4x4x4's 64 devices)
and writes each per-device optimized module (what `tpusim hlo --slice` reads) with the compiler's per-device
memory_analysis.

Usage (venv from requirements.txt; never run by tests or CI):
  ALLOW_MULTIPLE_LIBTPU_LOAD=1 nice -n 10 python tools/shard-probe/models.py OUT_DIR

Writes OUT_DIR/<model>.<parallelism>.<slice>.hlo.txt and OUT_DIR/memory.json. The mesh takes the devices in
coordinate order (core fastest, then x, y, z), as tpusim's device ids count.
"""
import json
import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.topologies import get_topology_desc
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

SLICES = ["v5p:2x2x1", "v5p:2x2x2", "v5p:2x2x4", "v5p:4x4x4"]
D, H = 2048, 8192
TOKENS_PER_DEVICE = 2048


def mesh_for(topo_name):
    devs = sorted(get_topology_desc(platform="tpu", topology_name=topo_name).devices,
                  key=lambda d: (d.coords[2], d.coords[1], d.coords[0], getattr(d, "core_on_chip", 0)))
    return Mesh(np.array(devs), ("d",))


def mlp(params, x):
    w1, w2 = params
    return jnp.maximum(x @ w1, 0) @ w2


def block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    b, s, _ = x.shape
    heads = 16
    q, k, v = (jnp.einsum("bsd,dhk->bshk", x, w) for w in (wq, wk, wv))
    a = jax.nn.softmax(jnp.einsum("bshk,bthk->bhst", q, k) / 8.0, axis=-1)
    o = jnp.einsum("bhst,bthk->bshk", a, v)
    x = x + jnp.einsum("bshk,hkd->bsd", o, wo)
    return x + jnp.maximum(x @ w1, 0) @ w2


def train_step(f):
    def step(params, x):
        loss, g = jax.value_and_grad(lambda p: jnp.mean(f(p, x) ** 2))(params)
        return jax.tree.map(lambda p, q: p - 1e-3 * q, params, g), loss
    return step


def specs(model, par, n):
    bf = jnp.bfloat16
    if model == "mlp":
        shapes = [(D, H), (H, D)]
        tp = [P(None, "d"), P("d", None)]
        x = ((TOKENS_PER_DEVICE * n if par == "dp" else TOKENS_PER_DEVICE, D), P("d") if par == "dp" else P())
    else:
        hd = 128
        shapes = [(D, 16, hd)] * 3 + [(16, hd, D), (D, H), (H, D)]
        tp = [P(None, "d", None)] * 3 + [P("d", None, None), P(None, "d"), P("d", None)]
        seq = 1024
        bsz = 2 * n if par == "dp" else 2
        x = ((bsz, seq, D), P("d") if par == "dp" else P())
    pspecs = tp if par == "tp" else [P()] * len(shapes)
    return shapes, pspecs, x, bf


def compile_one(model, par, topo):
    mesh = mesh_for(topo)
    n = mesh.devices.size
    shapes, pspecs, (xshape, xspec), dt = specs(model, par, n)
    if par == "tp" and model == "block" and 16 % n:
        return None
    params = [jax.ShapeDtypeStruct(s, dt, sharding=NamedSharding(mesh, p)) for s, p in zip(shapes, pspecs)]
    x = jax.ShapeDtypeStruct(xshape, dt, sharding=NamedSharding(mesh, xspec))
    f = mlp if model == "mlp" else block
    out_sh = ([NamedSharding(mesh, p) for p in pspecs], NamedSharding(mesh, P()))
    compiled = jax.jit(train_step(f), out_shardings=out_sh).lower(params, x).compile()
    ma = compiled.memory_analysis()
    mem = {k: getattr(ma, k) for k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")}
    text = compiled.as_text()
    # Debug sections and backend configs are not needed by tpusim hlo.
    text = re.sub(r", (metadata|backend_config|frontend_attributes)=\{.*$", "", text, flags=re.M)
    return text, mem


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    memory = {}
    for topo in SLICES:
        for model in ("mlp", "block"):
            for par in ("dp", "tp"):
                r = compile_one(model, par, topo)
                if r is None:
                    continue
                name = f"{model}.{par}.{topo.split(':')[1]}"
                (out / f"{name}.hlo.txt").write_text(r[0])
                memory[name] = r[1]
                print(name, r[1], flush=True)
    (out / "memory.json").write_text(json.dumps(memory, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(main())
