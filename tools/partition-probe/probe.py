#!/usr/bin/env python3
"""Lowers sharded training steps (an MLP, a transformer block, an MoE layer) for several slices and records, per
case, the module before partitioning (what `jax.jit(f, in_shardings=..., out_shardings=...).lower(...)
.as_text(dialect="hlo")` prints, with `sharding={...}` annotations) and what the XLA TPU compiler makes of it:
the optimized per-device module, the sum of its per-instruction `estimated_cycles`, and `memory_analysis()`.

Usage (venv /work/venv-tpu or tools/shard-probe/requirements.txt; never run by tests or CI):
  ALLOW_MULTIPLE_LIBTPU_LOAD=1 nice -n 10 python tools/partition-probe/probe.py OUT.jsonl [--shard-map]
  gzip -9 OUT.jsonl   # what testdata/shard/partition/ holds

Appends one record per case as it is compiled; cases already in OUT.jsonl are skipped, so a stopped run
resumes. The MLPs and the MoE layer come first on every slice, then the transformer blocks (slower to compile).

Patterns over a one-axis mesh `d` of every device (devices in coordinate order, as tpusim counts ids):
  dp    activations split on the batch, weights replicated (gradient all-reduce)
  fsdp  activations split on the batch, weights split on their first dim (all-gather, reduce-scatter)
  tp    weights split on the hidden / head dim, activations replicated (all-reduce of the contracting split)
  moe   tokens split on groups, experts split over `d` (all-to-all dispatch and return)
and `2d`: an MLP over a data x model mesh (dp on one axis, tp on the other).

`smap` cases are `jax.jit(shard_map(...))` programs with explicit collectives (`--shard-map`, v5p 2x2x1 and
2x2x2, v6e 2x2):
  dp    an MLP training step on the local batch, gradients `psum`med
  tp    a Megatron MLP (w1 split on columns, w2 on rows), the output `psum`med
  rs    the same with `psum_scatter` of the output over the tokens
  ring  a ring all-gather matmul: n-1 `ppermute`s of the activations, each block multiplied as it arrives
  a2a   tokens `all_to_all`ed to their experts, an expert matmul, and back
"""
import json
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.topologies import get_topology_desc
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

SLICES = ["v5p:2x2x1", "v5p:2x2x2", "v6e:2x2", "v5p:2x2x4", "v6e:4x4"]
PATTERNS = ["dp", "fsdp", "tp", "moe", "2d"]
SMAP_SLICES = ["v5p:2x2x1", "v5p:2x2x2", "v6e:2x2"]
SMAP_PATTERNS = ["dp", "tp", "rs", "ring", "a2a"]
D, H = 1024, 4096
TOKENS_PER_DEVICE = 1024
HEADS, HD, SEQ = 16, 64, 512
EXPERTS, CAP = 16, 128


def devices(topo):
    return sorted(get_topology_desc(platform="tpu", topology_name=topo).devices,
                  key=lambda d: (d.coords[2], d.coords[1], d.coords[0], getattr(d, "core_on_chip", 0)))


def mlp(params, x):
    w1, w2 = params
    return jnp.maximum(x @ w1, 0) @ w2


def block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    q, k, v = (jnp.einsum("bsd,dhk->bshk", x, w) for w in (wq, wk, wv))
    a = jax.nn.softmax(jnp.einsum("bshk,bthk->bhst", q, k) / 8.0, axis=-1)
    o = jnp.einsum("bhst,bthk->bshk", a, v)
    x = x + jnp.einsum("bshk,hkd->bsd", o, wo)
    return x + jnp.maximum(x @ w1, 0) @ w2


def moe(mesh):
    def f(params, x):
        w1, w2 = params
        g, s, _ = x.shape
        # Top-1 routing by a fixed hash of the position: dispatch and combine are one-hot einsums.
        expert = jnp.arange(s) % EXPERTS
        slot = (jnp.arange(s) // EXPERTS) % CAP
        mask = jax.nn.one_hot(expert, EXPERTS, dtype=x.dtype)[:, :, None] * \
            jax.nn.one_hot(slot, CAP, dtype=x.dtype)[:, None, :]
        xe = jnp.einsum("gsd,sec->egcd", x, mask)
        xe = jax.lax.with_sharding_constraint(xe, NamedSharding(mesh, P("d")))
        h = jnp.maximum(jnp.einsum("egcd,edh->egch", xe, w1), 0)
        ye = jnp.einsum("egch,ehd->egcd", h, w2)
        ye = jax.lax.with_sharding_constraint(ye, NamedSharding(mesh, P(None, "d")))
        return jnp.einsum("egcd,sec->gsd", ye, mask)
    return f


def train_step(f):
    def step(params, x):
        loss, g = jax.value_and_grad(lambda p: jnp.mean(f(p, x).astype(jnp.float32) ** 2))(params)
        return jax.tree.map(lambda p, q: p - 1e-3 * q, params, g), loss
    return step


def case(model, pattern, n):
    """(param shapes, param specs, x shape, x spec, mesh axes) or None when the split does not divide."""
    if pattern == "2d":
        if model != "mlp" or n < 4:
            return None
        return [(D, H), (H, D)], [P(None, "m"), P("m", None)], (TOKENS_PER_DEVICE * n // 2, D), P("d"), 2
    if model == "mlp":
        shapes = [(D, H), (H, D)]
        x = (TOKENS_PER_DEVICE * n if pattern in ("dp", "fsdp") else TOKENS_PER_DEVICE, D)
        specs = {"dp": [P(), P()], "fsdp": [P("d", None), P("d", None)], "tp": [P(None, "d"), P("d", None)]}
    elif model == "block":
        shapes = [(D, HEADS, HD)] * 3 + [(HEADS, HD, D), (D, H), (H, D)]
        x = ((2 * n if pattern in ("dp", "fsdp") else 2), SEQ, D)
        specs = {"dp": [P()] * 6, "fsdp": [P("d")] * 6,
                 "tp": [P(None, "d", None)] * 3 + [P("d", None, None), P(None, "d"), P("d", None)]}
        if pattern == "tp" and HEADS % n:
            return None
    else:
        if pattern != "moe" or EXPERTS % n:
            return None
        return [(EXPERTS, D, H), (EXPERTS, H, D)], [P("d"), P("d")], (n, EXPERTS * CAP, D), P("d"), 1
    if pattern not in specs:
        return None
    return shapes, specs[pattern], x, (P("d") if pattern in ("dp", "fsdp") else P()), 1


def smap_case(pattern, mesh, n):
    """(function, argument ShapeDtypeStructs) of one shard_map program over the mesh axis `d`."""
    from jax import shard_map
    dt = jnp.bfloat16
    arg = lambda shape, spec: jax.ShapeDtypeStruct(shape, dt, sharding=NamedSharding(mesh, spec))
    if pattern == "dp":
        def body(params, x):
            loss, g = jax.value_and_grad(lambda p: jnp.mean(mlp(p, x).astype(jnp.float32) ** 2))(params)
            g = jax.lax.psum(g, "d")
            return jax.tree.map(lambda p, q: p - 1e-3 * q, params, g), jax.lax.pmean(loss, "d")
        f = shard_map(body, mesh=mesh, in_specs=((P(), P()), P("d")), out_specs=((P(), P()), P()))
        return f, ((arg((D, H), P()), arg((H, D), P())), arg((TOKENS_PER_DEVICE * n, D), P("d")))
    if pattern in ("tp", "rs"):
        def body(w1, w2, x):
            y = jnp.maximum(x @ w1, 0) @ w2
            if pattern == "tp":
                return jax.lax.psum(y, "d")
            return jax.lax.psum_scatter(y, "d", scatter_dimension=0, tiled=True)
        out = P() if pattern == "tp" else P("d")
        f = shard_map(body, mesh=mesh, in_specs=(P(None, "d"), P("d", None), P()), out_specs=out)
        return f, (arg((D, H), P(None, "d")), arg((H, D), P("d", None)), arg((TOKENS_PER_DEVICE * 4, D), P()))
    if pattern == "ring":
        def body(w, x):
            # x: this device's block of tokens; w: its columns. Blocks travel the ring, each multiplied.
            outs, blk = [], x
            for _ in range(n):
                outs.append(blk @ w)
                blk = jax.lax.ppermute(blk, "d", [(i, (i + 1) % n) for i in range(n)])
            return jnp.concatenate(outs, axis=0)
        f = shard_map(body, mesh=mesh, in_specs=(P(None, "d"), P("d")), out_specs=P(None, "d"))
        return f, (arg((D, H), P(None, "d")), arg((TOKENS_PER_DEVICE * n, D), P("d")))
    if pattern == "a2a":
        def body(w, x):
            # x: [experts, tokens, D] per device; experts are split over `d` after the all-to-all.
            xe = jax.lax.all_to_all(x, "d", 0, 1, tiled=True)
            h = jnp.maximum(jnp.einsum("etd,edh->eth", xe, w), 0)
            return jax.lax.all_to_all(h, "d", 1, 0, tiled=True)
        f = shard_map(body, mesh=mesh, in_specs=(P("d"), P(None, "d")), out_specs=P(None, "d"))
        return f, (arg((EXPERTS, D, H // 4), P("d")), arg((EXPERTS, CAP * n, D), P(None, "d")))
    return None


def compile_smap(pattern, topo):
    devs = devices(topo)
    n = len(devs)
    mesh = Mesh(np.array(devs), ("d",))
    f, args = smap_case(pattern, mesh, n)
    lowered = jax.jit(f).lower(*args)
    return lowered, n


def estimates(text):
    total, n = 0, 0
    for line in text.splitlines():
        m = re.search(r'"estimated_cycles":"?(\d+)', line)
        if m:
            total += int(m.group(1))
            n += 1
    return total, n


def loop_aware(text):
    comps, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if m:
            cur = m.group(1)
            comps[cur] = []
        elif cur is not None:
            comps[cur].append(line)
    trips = {}
    for lines in comps.values():
        for line in lines:
            if " while(" in line:
                body = re.search(r"body=%?([\w.\-]+)", line).group(1)
                n = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
                if not n:
                    # The condition compares the counter (from 0) with a constant.
                    cond = re.search(r"condition=%?([\w.\-]+)", line).group(1)
                    n = re.search(r"constant\((\d+)\)", "\n".join(comps.get(cond, [])))
                trips[body] = int(n.group(1)) if n else 1
    total = 0
    for name, lines in comps.items():
        k = trips.get(name, 1)
        for line in lines:
            m = re.search(r'"estimated_cycles":"?(\d+)', line)
            if m:
                total += k * int(m.group(1))
    return total, trips


def compile_case(model, pattern, topo):
    devs = devices(topo)
    n = len(devs)
    if model == "smap":
        lowered, axes = compile_smap(pattern, topo)[0], 1
    else:
        c = case(model, pattern, n)
        if c is None:
            return None
        shapes, pspecs, xshape, xspec, axes = c
        if axes == 2:
            mesh = Mesh(np.array(devs).reshape(2, n // 2), ("d", "m"))
        else:
            mesh = Mesh(np.array(devs), ("d",))
        dt = jnp.bfloat16
        params = [jax.ShapeDtypeStruct(s, dt, sharding=NamedSharding(mesh, p)) for s, p in zip(shapes, pspecs)]
        x = jax.ShapeDtypeStruct(xshape, dt, sharding=NamedSharding(mesh, xspec))
        f = {"mlp": mlp, "block": block}.get(model) or moe(mesh)
        out_sh = ([NamedSharding(mesh, p) for p in pspecs], NamedSharding(mesh, P()))
        lowered = jax.jit(train_step(f), out_shardings=out_sh).lower(params, x)
    pre = lowered.as_text(dialect="hlo")
    compiled = lowered.compile()
    text = compiled.as_text()
    ma = compiled.memory_analysis()
    total, count = estimates(text)
    # Per-instruction estimates are summed here; pack.py strips the texts to what tpusim reads.
    return {
        "case": f"{model}.{pattern}.{topo}", "model": model, "pattern": pattern, "topology": topo,
        "devices": n, "mesh": "d=%d" % n if axes == 1 else "d=2,m=%d" % (n // 2),
        "pre_hlo": pre, "post_hlo": text,
        "estimated_cycles": total, "estimated_instructions": count,
        # While bodies (windowed einsums) counted once per trip; `estimated_cycles` counts each once.
        "estimated_cycles_loops_counted": loop_aware(text)[0],
        "memory": {k: getattr(ma, k) for k in ("argument_size_in_bytes", "output_size_in_bytes",
                                               "temp_size_in_bytes")},
    }


def main():
    out = sys.argv[1]
    done = set()
    if os.path.exists(out):
        with open(out) as f:
            done = {json.loads(l)["case"] for l in f if l.strip()}
    # Small slices of every model first, then the larger slices.
    if "--shard-map" in sys.argv:
        order = [(t, "smap", p) for t in SMAP_SLICES for p in SMAP_PATTERNS]
    else:
        order = [(t, m, p) for part in (SLICES[:3], SLICES[3:]) for t in part
                 for m in ("mlp", "moe", "block") for p in PATTERNS]
    for topo, model, pattern in order:
        if f"{model}.{pattern}.{topo}" in done:
            continue
        try:
            r = compile_case(model, pattern, topo)
        except Exception as e:  # recorded, not fatal
            print("error", model, pattern, topo, str(e).splitlines()[0][:200], file=sys.stderr, flush=True)
            continue
        if r is None:
            continue
        with open(out, "a") as f:
            f.write(json.dumps(r, sort_keys=True) + "\n")
        print(r["case"], r["memory"], r["estimated_cycles"], file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
