#!/usr/bin/env python3
"""Compiles TensorCore op cases the op sample lacks (decode-style M <= 32 and N = 1 matmuls, skinny matmuls,
stride-2 convolutions, small-batch MLP layers, 8-bit decode matmuls of every weight tiling) and writes records in testdata/ops/tc_records.jsonl.gz's schema.

Usage (venv from tools/corpus/requirements.txt; never run by tests or CI):
  ALLOW_MULTIPLE_LIBTPU_LOAD=1 python tools/corpus/gen_ops.py OUT_DIR [--seed 25] [--only C25.matmul8]
Writes OUT_DIR/ops_records.jsonl (resumable) and OUT_DIR/ops_opt/<id>.txt.gz. Ids are `C<seed>.<op>.<index>`.
"""
import argparse
import gzip
import json
import random
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jax  # noqa: E402
from jax.experimental.topologies import get_topology_desc  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

from families import OP_FAMILIES, logint, op_matmul_build  # noqa: E402
from gen_corpus import CHIPS  # noqa: E402
from hlo_extract import parse_module, summarize  # noqa: E402


def narrow_decode_draw(rng):
    """An 8-bit decode matmul whose contracting dim K is drawn in one of three alignments, since the compiler
    tiles an 8-bit [K, N] weight T(32,128) when K is a multiple of 32 (and re-tiles it to T(8,128) inside the
    fusion), T(8,128) when it is a multiple of 8, and pads the last tile's rows otherwise."""
    k = logint(rng, 512, 8192, 32)
    k += rng.choice([0, 8, 8 * rng.randint(1, 3) + rng.randint(1, 7)]) if k % 32 == 0 else 0
    return {"M": rng.choice([2, 4, 8, 16, 32]), "K": k, "N": logint(rng, 512, 16384, 128),
            "dtype": rng.choice(["int8", "int8", "float8_e4m3fn"])}


# Families drawn beside families.OP_FAMILIES, under their own id prefix: (record op name, draw, build, count).
EXTRA_FAMILIES = {
    "matmul8": ("matmul", narrow_decode_draw, op_matmul_build, 24),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--only", default="", help="compile only the cases whose id starts with this prefix")
    a = ap.parse_args()
    out = Path(a.out)
    (out / "ops_opt").mkdir(parents=True, exist_ok=True)
    path = out / "ops_records.jsonl"
    done = {json.loads(line)["id"] + "@" + json.loads(line)["chip"] for line in open(path)} if path.exists() else set()
    cases = []
    for op, (draw, build, n) in OP_FAMILIES.items():
        rng = random.Random(f"{a.seed}:op:{op}")
        cases += [(op, f"C{a.seed}.{op}.{i:03d}", draw(rng), build) for i in range(n)]
    for key, (op, draw, build, n) in EXTRA_FAMILIES.items():
        rng = random.Random(f"{a.seed}:op:{key}")
        cases += [(op, f"C{a.seed}.{key}.{i:03d}", draw(rng), build) for i in range(n)]
    for op, cid, params, build in [c for c in cases if c[1].startswith(a.only)]:
        for chip, topo_name in CHIPS.items():
            if f"{cid}@{chip}" in done:
                continue
            try:
                topo = get_topology_desc(platform="tpu", topology_name=topo_name)
                f, specs = build(params)
                sh = SingleDeviceSharding(topo.devices[0])
                compiled = jax.jit(f).lower(*[jax.ShapeDtypeStruct(s, d, sharding=sh) for s, d in specs]).compile()
                # jaxlib cannot print some tpu7x modules (SparseCore data-format offload); such cases are skipped.
                opt = compiled.as_text()
            except Exception:
                traceback.print_exc(limit=1)
                continue
            with gzip.open(out / "ops_opt" / f"{cid}@{chip}.txt.gz", "wt", compresslevel=9) as g:
                g.write(opt)
            s = summarize(opt)
            comps, entry = parse_module(opt)
            params_shapes = [i["shape"] for i in comps[entry] if i["opcode"] == "parameter"]
            root = [i["shape"] for i in comps[entry] if i["root"]][0]
            ma, ca = compiled.memory_analysis(), compiled.cost_analysis()
            ca = ca[0] if isinstance(ca, list) else ca
            rec = {"id": cid, "chip": chip, "op": op, "params": params,
                   "total_estimated_cycles": s["total_estimated_cycles"], "entry_params": params_shapes,
                   "entry_result": root,
                   "kernels": [{"opcode": i["opcode"], "fusion_kind": i.get("fusion_kind"),
                                "estimated_cycles": i["estimated_cycles"],
                                "iteration_bounds": i.get("iteration_bounds")}
                               for i in s["instructions"] if "estimated_cycles" in i],
                   "flops": ca.get("flops"), "argument_bytes": ma.argument_size_in_bytes,
                   "output_bytes": ma.output_size_in_bytes}
            with open(path, "a") as fr:
                fr.write(json.dumps(rec, separators=(",", ":")) + "\n")
            print(cid, chip, s["total_estimated_cycles"], flush=True)


if __name__ == "__main__":
    main()
