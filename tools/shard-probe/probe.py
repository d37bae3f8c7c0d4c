#!/usr/bin/env python3
"""Compiles collectives alone on TPU slices ahead-of-time and records what the XLA TPU compiler says of them.

Usage (in a venv from requirements.txt; never run by tests or CI):
  ALLOW_MULTIPLE_LIBTPU_LOAD=1 nice -n 10 python tools/shard-probe/probe.py OUT.jsonl [--topologies v5p:2x2x1,...]

Each case is one `shard_map` program over a mesh laid on the slice's torus axes (mesh axes z, y, x and, on chips
with two devices per chip, c): one collective (psum, all_gather, psum_scatter, all_to_all, ppermute) over one
mesh axis or all of them, on a per-device f32 block of a given size, plus a 1 KiB ppermute beside it. The
latency-hiding scheduler prices collectives only in programs that have an async op; the small ppermute is that op.
A record holds the collective's instruction as the optimized module has it (opcode, shape, replica groups,
source-target pairs, the compiler's algorithm), the scheduler's cycles for it (end - start in the dumped
schedule, at its cycles_per_microsecond), the device coordinates and per-device memory_analysis.
Appends to OUT.jsonl; cases already there are skipped, so a stopped run resumes. Case order is a fixed shuffle,
so a partial run samples every topology, kind and size.
"""
import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import shard_map
from jax.experimental.topologies import get_topology_desc
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

TOPOLOGIES = ["v5p:2x2x1", "v5p:2x2x2", "v5p:2x2x4", "v5p:4x4x4", "v4:2x2x2", "v4:4x4x4", "v5e:2x2", "v5e:4x4",
              "v6e:2x2", "v6e:4x4", "v6e:16x16", "tpu7x:2x2x1", "tpu7x:2x2x2"]
KINDS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"]
TWO_DEVICE_CHIPS = ["v4", "tpu7x"]
SIZES = [1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28]  # bytes per device


def mesh_for(topo_name):
    topo = get_topology_desc(platform="tpu", topology_name=topo_name)
    devs = list(topo.devices)
    dims = [int(d) for d in topo_name.split(":")[1].split("x")]
    while len(dims) < 3:
        dims.append(1)
    cores = len(devs) // int(np.prod(dims))
    # The mesh takes the devices in coordinate order (core fastest, then x, y, z), so a replica group's
    # logical ids count the same way (what `tpusim hlo --slice` assumes); the runtime's own device order
    # differs on larger slices (host by host).
    devs.sort(key=lambda d: (d.coords[2], d.coords[1], d.coords[0], getattr(d, "core_on_chip", 0)))
    for i, d in enumerate(devs):
        chip = i // cores
        want = [chip % dims[0], chip // dims[0] % dims[1], chip // (dims[0] * dims[1])]
        assert list(d.coords) == want and getattr(d, "core_on_chip", 0) == i % cores, (topo_name, i, d.coords)
    shape, names = [dims[2], dims[1], dims[0]], ["z", "y", "x"]
    if cores > 1:
        shape.append(cores)
        names.append("c")
    mesh = Mesh(np.array(devs).reshape(shape), tuple(names))
    return mesh, dims, cores, [list(d.coords) + [getattr(d, "core_on_chip", 0)] for d in devs]


def body(kind, axes, n):
    def f(a, s):
        if kind == "all-reduce":
            r = jax.lax.psum(a, axes)
        elif kind == "all-gather":
            r = jax.lax.all_gather(a, axes, tiled=True)
        elif kind == "reduce-scatter":
            r = jax.lax.psum_scatter(a, axes, tiled=True)
        elif kind == "all-to-all":
            r = jax.lax.all_to_all(a, axes, 0, 0, tiled=True)
        else:
            r = jax.lax.ppermute(a, axes, [(i, (i + 1) % n) for i in range(n)])
        s2 = jax.lax.ppermute(s, axes, [(i, (i + 1) % n) for i in range(n)])
        return r, s2
    return f


def instruction_line(opt, kind):
    for line in opt.splitlines():
        m = re.match(r"\s*(ROOT )?%?(\S+) = (.+?) (" + re.escape(kind) + r"(-start)?)\(", line)
        if m and "1024]" not in m.group(3).split(")")[0][-6:] or (m and kind != "collective-permute"):
            return line
    return None


def schedule_cycles(dump_dir, opt_name):
    """(cycles of the instruction named opt_name in the latency-hiding schedule, cycles per us), or None."""
    files = list(Path(dump_dir).glob("*schedule.txt"))
    if not files:
        return None
    text = files[0].read_text()
    ids = {}
    for m in re.finditer(r'instructions \{\s*name: "([^"]+)"\s*opcode: "([^"]+)".*?\n      id: (\d+)', text, re.S):
        ids[m.group(3)] = m.group(1)
    cpu = float(re.search(r"cycles_per_microsecond: ([0-9.]+)", text).group(1))
    sched = text[text.index("computation_schedules"):]
    for m in re.finditer(r"instructions \{\s*id: (\d+)\s*(start_timestamp_cycles: ([0-9.e+-]+)\s*)?"
                         r"end_timestamp_cycles: ([0-9.e+-]+)", sched):
        if ids.get(m.group(1)) == opt_name:
            return float(m.group(4)) - float(m.group(3) or 0.0), cpu
    return None


def run_case(topo_name, kind, axes, size):
    mesh, dims, cores, coords = mesh_for(topo_name)
    axes_t = tuple(axes)
    n = int(np.prod([mesh.shape[a] for a in axes_t]))
    rows = max(8, size // 4096)
    spec = P(tuple(mesh.axis_names))
    f = shard_map(body(kind, axes_t if len(axes_t) > 1 else axes_t[0], n), mesh=mesh, in_specs=(spec, spec),
                  out_specs=(spec, spec), check_vma=False)
    ndev = len(coords)
    a = jax.ShapeDtypeStruct((rows * ndev, 1024), jnp.float32, sharding=NamedSharding(mesh, spec))
    s = jax.ShapeDtypeStruct((8 * ndev, 128), jnp.float32, sharding=NamedSharding(mesh, spec))
    dump = tempfile.mkdtemp(prefix="shardprobe")
    try:
        lowered = jax.jit(f).lower(a, s)
        t0 = time.time()
        compiled = lowered.compile(compiler_options={"xla_dump_to": dump, "xla_dump_latency_hiding_schedule": True})
        secs = time.time() - t0
        opt = compiled.as_text()
        lines = [ln for ln in opt.splitlines() if re.search(r" (all-reduce|all-gather|reduce-scatter|all-to-all|"
                                                           r"collective-permute)(-start)?\(", ln)]
        # The probe's collective is the one whose shape is not the 8x128 ppermute block.
        main = [ln for ln in lines if "[8,128]" not in ln.split("=")[1].split("(")[0] or kind != "collective-permute"]
        main = [ln for ln in main if not re.search(r"f32\[8,128\]", ln.split(" = ")[1][:40])]
        rec = {"topology": topo_name, "chip": topo_name.split(":")[0], "dims": dims, "cores_per_chip": cores,
               "kind": kind, "axes": list(axes), "group_size": n, "bytes_per_device": rows * 4096,
               "compile_s": round(secs, 2), "device_coords": coords}
        ma = compiled.memory_analysis()
        rec["memory"] = {k: getattr(ma, k) for k in ("argument_size_in_bytes", "output_size_in_bytes",
                                                     "temp_size_in_bytes")}
        if main:
            ln = main[0]
            name = re.match(r"\s*(ROOT )?%?(\S+) =", ln).group(2)
            rec["instruction"] = re.sub(r", (metadata|backend_config)=.*$", "", ln.strip())
            alg = re.search(r'"collective_algorithm_config":\{"emitter":"([^"]*)"(,"strategy":"([^"]*)")?', ln)
            rec["algorithm"] = (alg.group(1) + ("/" + alg.group(3) if alg.group(3) else "")) if alg else None
            sc = schedule_cycles(dump, name)
            if sc:
                rec["scheduler_cycles"], rec["cycles_per_us"] = sc
                rec["scheduler_us"] = sc[0] / sc[1]
        rec["collectives_in_module"] = [re.sub(r", (metadata|backend_config)=.*$", "", x.strip()) for x in lines]
        return rec
    finally:
        shutil.rmtree(dump, ignore_errors=True)


def cases(topologies):
    out = []
    for t in topologies:
        dims = [int(d) for d in t.split(":")[1].split("x")]
        while len(dims) < 3:
            dims.append(1)
        names = [a for a, d in zip(["x", "y", "z"], dims) if d > 1]
        groups = [[a] for a in names] + ([["z", "y", "x"]] if len(names) > 1 else [])
        for kind in KINDS:
            for g in groups:
                for size in SIZES:
                    out.append((t, kind, g, size))
        # On chips of two devices, an all-reduce over every device (z, y, x and the core axis c) is emitted
        # differently from one over one device per chip (z, y, x): both are recorded.
        if t.split(":")[0] in TWO_DEVICE_CHIPS and len(names) > 1:
            for size in SIZES:
                out.append((t, "all-reduce", ["z", "y", "x", "c"], size))
    random.Random(29).shuffle(out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--topologies", default=",".join(TOPOLOGIES))
    args = ap.parse_args()
    done = set()
    if Path(args.out).exists():
        for line in Path(args.out).read_text().splitlines():
            r = json.loads(line)
            done.add((r["topology"], r["kind"], tuple(r["axes"]), r["size_asked"]))
    for t, kind, g, size in cases(args.topologies.split(",")):
        if (t, kind, tuple(g), size) in done:
            continue
        try:
            rec = run_case(t, kind, g, size)
        except Exception as e:  # a case the compiler refuses is recorded, not fatal
            rec = {"topology": t, "kind": kind, "axes": g, "error": str(e)[:500]}
        rec["size_asked"] = size
        with open(args.out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(t, kind, g, size, rec.get("scheduler_us"), rec.get("error", "")[:100], flush=True)


if __name__ == "__main__":
    sys.exit(main())
