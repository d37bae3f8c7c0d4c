"""Ask the XLA TPU compiler what tiny TensorCore kernels cost, ahead of time, per chip: an
elementwise add, a reduce, a small matmul and a three-op fusion, each at a few sizes of one to a
few vregs. Their estimates are almost all fixed cost; fit.py takes the per-chip intercept.

One JSON object per case on stdout:
    chip, kind ("add" | "reduce" | "matmul" | "fusion"), rows, cols,
    kernels [{"shape", "opcode", "estimated_cycles"}], total_estimated_cycles.

    ALLOW_MULTIPLE_LIBTPU_LOAD=1 nice -n 10 /work/venv-tpu/bin/python tools/tc-launch-probe/probe.py \
        > testdata/tensorcore/launch.jsonl

Needs jax 0.10.2 and libtpu 0.0.52. The project's Rust tests never run this script.
"""

import json
import re
import sys

import jax
import jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import SingleDeviceSharding

TOPOLOGY = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2", "tpu7x": "tpu7x:2x2x1"}
SIZES = ((8, 128), (16, 128), (32, 128), (64, 128))


def fusion_estimates(text):
    """(result shape, opcode, estimated cycles) of every instruction that carries an estimate."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith(("%", "ROOT")) or "estimated_cycles" not in s:
            continue
        m = re.search(r"= (\S+) (\w[\w-]*)\(", s)
        cyc = re.search(r"estimated_cycles\D+(\d+)", s)
        if m and cyc:
            out.append({"shape": m.group(1), "opcode": m.group(2), "estimated_cycles": int(cyc.group(1))})
    return out


def program(kind, rows, cols, sh):
    x = jax.ShapeDtypeStruct((rows, cols), jnp.float32, sharding=sh)
    if kind == "add":
        return (lambda a, b: a + b), (x, x)
    if kind == "reduce":
        return (lambda a: jnp.sum(a, axis=1)), (x,)
    if kind == "matmul":
        w = jax.ShapeDtypeStruct((cols, 128), jnp.float32, sharding=sh)
        return (lambda a, b: a @ b), (x, w)
    return (lambda a, b, c: jnp.exp(a * b + c)), (x, x, x)


def main():
    chips = sys.argv[1:] or list(TOPOLOGY)
    for chip in chips:
        dev = topologies.get_topology_desc(platform="tpu", topology_name=TOPOLOGY[chip]).devices[0]
        sh = SingleDeviceSharding(dev)
        for kind in ("add", "reduce", "matmul", "fusion"):
            for rows, cols in SIZES:
                case = dict(chip=chip, kind=kind, rows=rows, cols=cols)
                try:
                    f, args = program(kind, rows, cols, sh)
                    k = fusion_estimates(jax.jit(f).lower(*args).compile().as_text())
                except Exception as e:  # a chip the compiler refuses: recorded, not fatal
                    print(json.dumps(dict(case, error=str(e).splitlines()[0][:200])), flush=True)
                    continue
                rec = dict(case, kernels=k, total_estimated_cycles=sum(x["estimated_cycles"] for x in k))
                print(json.dumps(rec), flush=True)
                print(chip, kind, rows, rec["total_estimated_cycles"], file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
