#!/usr/bin/env python3
"""Compiles the 8-bit decode-matmul probes behind `tensorcore::narrow` (int8 and fp8 `[M, K] x [K, N]` with K a
multiple of 32, of 8 only, or of neither) and prints one record per line in testdata/ops/tc_records.jsonl.gz's
schema, plus `retile` (the fusion re-tiles an operand: `copy(%input...)`) and the fusion's iteration bounds.

Usage (venv from tools/corpus/requirements.txt; never run by tests or CI):
  ALLOW_MULTIPLE_LIBTPU_LOAD=1 python tools/corpus/probe_int8.py | gzip -9n > testdata/ops/int8_tiling_probes.jsonl.gz
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jax  # noqa: E402
from jax.experimental.topologies import get_topology_desc  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

from families import op_matmul_build  # noqa: E402
from gen_corpus import CHIPS  # noqa: E402
from hlo_extract import summarize  # noqa: E402

# v4: int8 at three M, eight K of the three tilings, three N; v4, v5e, v5p: int8, fp8 and bf16 at M 8.
GRIDS = [
    (["v4"], [{"M": m, "K": k, "N": n, "dtype": "int8"} for m in (2, 8, 32)
              for k in (1024, 1032, 1920, 1930, 1960, 3840, 3848, 6514) for n in (1917, 2048, 6656)]),
    (["v4", "v5e", "v5p"], [{"M": 8, "K": k, "N": n, "dtype": d} for d in ("int8", "float8_e4m3fn", "bfloat16")
                            for k in (1920, 1930, 1960, 3840, 3848, 3850) for n in (2048, 6656)]),
    (["v4"], [{"M": 8, "K": k, "N": 6656, "dtype": "int8"} for k in (1928, 1931, 1932, 1934, 1936, 1944)]),
]


def main():
    seen = set()
    for chips, cases in GRIDS:
        for chip in chips:
            topo = get_topology_desc(platform="tpu", topology_name=CHIPS[chip])
            sh = SingleDeviceSharding(topo.devices[0])
            for p in cases:
                key = (chip, json.dumps(p, sort_keys=True))
                if key in seen:
                    continue
                seen.add(key)
                f, specs = op_matmul_build(p)
                c = jax.jit(f).lower(*[jax.ShapeDtypeStruct(s, d, sharding=sh) for s, d in specs]).compile()
                t = c.as_text()
                s = summarize(t)
                print(json.dumps({"id": f"P8.{len(seen) - 1:03d}", "chip": chip, "op": "matmul", "params": p,
                                  "total_estimated_cycles": s["total_estimated_cycles"],
                                  "retile": "copy(%input" in t,
                                  "iteration_bounds": [i.get("iteration_bounds") for i in s["instructions"]
                                                       if "estimated_cycles" in i]},
                                 separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
