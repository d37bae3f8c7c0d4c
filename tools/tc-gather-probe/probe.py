"""Ask the XLA TPU compiler what a TensorCore gather (`jnp.take`) and scatter-add
(`table.at[ids].add(rows)`) cost, ahead of time (no TPU needed: the device comes from a
topology description).

For each chip, table size (rows x width, f32 or bf16) and id count, compiles both programs on
one device and writes one JSON object per case to stdout:

    chip, op ("take" | "scatter_add"), vocab, dim, dtype, ids,
    kernels  [{"shape", "estimated_cycles"}] for every fusion of the entry that carries an estimate,
    total_estimated_cycles  their sum.

The output is testdata/tensorcore/gather.jsonl; sim-tpu/tests/tc_gather.rs checks the
TensorCore gather model against it. The project's Rust tests never run this script.

Needs a venv with jax 0.10.2, jaxlib 0.10.2 and libtpu 0.0.52:

    python tools/tc-gather-probe/probe.py > testdata/tensorcore/gather.jsonl
"""

import json
import re
import sys

import jax
import jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import SingleDeviceSharding

TOPOLOGY = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2", "tpu7x": "tpu7x:2x2x1"}
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def cases():
    out = []
    for vocab, dim, dtype, ids in (
        (5120, 128, "float32", 4752),  # MLPerf DLRM v1.0's TensorCore table, one replica's ids
        (5120, 128, "float32", 512),
        (5120, 128, "float32", 32768),
        (100_000, 128, "float32", 4752),
        (1_000_000, 128, "float32", 4752),
        (1_000_000, 128, "float32", 65536),
        (4_000_000, 128, "float32", 16384),
        (100_000, 32, "float32", 16384),
        (100_000, 512, "float32", 4096),
        (100_000, 2048, "float32", 1024),
        (100_000, 128, "bfloat16", 16384),
        (20_000, 64, "bfloat16", 8192),
    ):
        for op in ("take", "scatter_add"):
            out.append(dict(op=op, vocab=vocab, dim=dim, dtype=dtype, ids=ids))
    return out


def fusion_estimates(text):
    """(result shape, estimated cycles) of every entry fusion that carries an estimate."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith(("%", "ROOT")) or "estimated_cycles" not in s:
            continue
        m = re.search(r"= (\S+) (\w[\w-]*)\(", s)
        cyc = re.search(r'estimated_cycles\D+(\d+)', s)
        if m and cyc:
            out.append({"shape": m.group(1), "opcode": m.group(2), "estimated_cycles": int(cyc.group(1))})
    return out


def compile_case(dev, c):
    sh = SingleDeviceSharding(dev)
    dt = DTYPES[c["dtype"]]
    table = jax.ShapeDtypeStruct((c["vocab"], c["dim"]), dt, sharding=sh)
    idx = jax.ShapeDtypeStruct((c["ids"],), jnp.int32, sharding=sh)
    if c["op"] == "take":
        f = lambda t, i: jnp.take(t, i, axis=0)
        args = (table, idx)
    else:
        rows = jax.ShapeDtypeStruct((c["ids"], c["dim"]), dt, sharding=sh)
        f = lambda t, i, u: t.at[i].add(u)
        args = (table, idx, rows)
    return jax.jit(f).lower(*args).compile().as_text()


def main():
    chips = sys.argv[1:] or list(TOPOLOGY)
    for chip in chips:
        dev = topologies.get_topology_desc(platform="tpu", topology_name=TOPOLOGY[chip]).devices[0]
        for c in cases():
            try:
                k = fusion_estimates(compile_case(dev, c))
            except Exception as e:  # the compiler refuses some chips' programs (v5p: an async-update check)
                print(json.dumps(dict(chip=chip, **c, error=str(e).splitlines()[0][:200])), flush=True)
                continue
            rec = dict(chip=chip, **c, kernels=k, total_estimated_cycles=sum(x["estimated_cycles"] for x in k))
            print(json.dumps(rec), flush=True)
            print(chip, c, rec["total_estimated_cycles"], file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
