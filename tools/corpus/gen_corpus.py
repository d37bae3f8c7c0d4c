#!/usr/bin/env python3
"""Compiles the corpus families ahead-of-time with the XLA TPU compiler and writes one record per (program, chip).

Usage (in a venv from tools/corpus/requirements.txt; never run by tests or CI):
  ALLOW_MULTIPLE_LIBTPU_LOAD=1 python tools/corpus/gen_corpus.py OUT_DIR [--seed 25] [--families a,b] [--shard i/n]

Writes OUT_DIR/records.jsonl (appended; ids already there are skipped, so a stopped run resumes),
OUT_DIR/hlo/<program>.hlo.txt.gz (pre-optimization HLO: `tpusim hlo`'s input, the same text for every chip) and
OUT_DIR/opt/<id>.txt.gz (the optimized HLO, for reading rules). The cases are drawn from random.Random(f"{seed}:
{family}"), so the same seed gives the same programs. Totals follow reference/tpu-compiler/programs/README.md
(hlo_extract.summarize; checked to reproduce all 120 reference records exactly).
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jax  # noqa: E402
from jax.experimental.topologies import get_topology_desc  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

from families import FAMILIES  # noqa: E402
from hlo_extract import summarize  # noqa: E402

CHIPS = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2", "tpu7x": "tpu7x:2x2x1"}


def size_proxy(params):
    """Product of every integer in the case's params: a rough size, used only to order the compiles."""
    prod = 1
    for v in params.values():
        for x in (v if isinstance(v, list) else [v]):
            if isinstance(x, int) and not isinstance(x, bool) and x > 0:
                prod *= x
    return prod


def cases(seed, families):
    """(family, program name, params) for every case, interleaved across families so a partial run covers all."""
    per = {}
    for fam in families:
        draw, _, n = FAMILIES[fam]
        rng = random.Random(f"{seed}:{fam}")
        per[fam] = [(fam, f"{fam}.{i:03d}", draw(rng)) for i in range(n)]
        # Smaller cases first (compile time grows with size): on two shared cores a run covers every family
        # at several sizes before it reaches the slowest compiles.
        per[fam].sort(key=lambda c: (size_proxy(c[2]), c[1]))
    out = []
    for i in range(max(len(v) for v in per.values())):
        out += [v[i] for v in per.values() if i < len(v)]
    # Forward-only cases first: a fwd+bwd transformer compiles for minutes per chip, a forward one for seconds,
    # so a run stopped early still covers every family. The cases themselves do not depend on the order.
    return [c for c in out if c[2].get("mode") != "fwdbwd"] + [c for c in out if c[2].get("mode") == "fwdbwd"]


def compile_one(build, params, topo_name):
    topo = get_topology_desc(platform="tpu", topology_name=topo_name)
    dev = topo.devices[0]
    f, specs, donate = build(params)
    args = [jax.ShapeDtypeStruct(s, d, sharding=SingleDeviceSharding(dev)) for s, d in specs]
    t0 = time.time()
    lowered = jax.jit(f, donate_argnums=donate).lower(*args)
    hlo = lowered.as_text(dialect="hlo")
    t1 = time.time()
    compiled = lowered.compile()
    t2 = time.time()
    ma = compiled.memory_analysis()
    mem = {k: getattr(ma, k) for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                                       "temp_size_in_bytes", "generated_code_size_in_bytes")}
    ca = compiled.cost_analysis()
    ca = ca[0] if isinstance(ca, list) else ca
    cost = {k: ca.get(k) for k in ("flops", "transcendentals", "bytes accessed", "optimal_seconds")}
    return hlo, compiled.as_text(), mem, cost, round(t1 - t0, 3), round(t2 - t1, 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--chips", default=",".join(CHIPS))
    ap.add_argument("--shard", default="0/1", help="i/n: this process takes every n-th case from the i-th")
    a = ap.parse_args()
    out = Path(a.out)
    (out / "hlo").mkdir(parents=True, exist_ok=True)
    (out / "opt").mkdir(exist_ok=True)
    done = set()
    rec_path = out / "records.jsonl"
    if rec_path.exists():
        done = {json.loads(line)["id"] for line in open(rec_path)}
    si, sn = (int(x) for x in a.shard.split("/"))
    todo = cases(a.seed, a.families.split(","))[si::sn]
    with open(out / "failures.log", "a") as flog:
        for fam, prog, params in todo:
            for chip in a.chips.split(","):
                rid = f"{prog}@{chip}"
                if rid in done:
                    continue
                try:
                    hlo, opt, mem, cost, lower_s, compile_s = compile_one(FAMILIES[fam][1], params, CHIPS[chip])
                except Exception as e:  # a case the compiler rejects is logged, not fatal
                    flog.write(f"{rid} {json.dumps(params)} {type(e).__name__}: {str(e)[:300]}\n")
                    flog.flush()
                    traceback.print_exc(limit=1)
                    continue
                hpath = out / "hlo" / f"{prog}.hlo.txt.gz"
                if not hpath.exists():
                    with gzip.open(hpath, "wt", compresslevel=9) as g:
                        g.write(hlo)
                with gzip.open(out / "opt" / f"{rid}.txt.gz", "wt", compresslevel=9) as g:
                    g.write(opt)
                s = summarize(opt)
                rec = {"id": rid, "program": prog, "family": fam, "params": params, "chip": chip,
                       "topology": CHIPS[chip], "seed": a.seed, "hlo_input": f"hlo/{prog}.hlo.txt.gz",
                       "hlo_input_sha1": hashlib.sha1(hlo.encode()).hexdigest(), "lower_s": lower_s,
                       "compile_s": compile_s, "memory_analysis": mem, "cost_analysis": cost, **s}
                with open(rec_path, "a") as fr:
                    fr.write(json.dumps(rec, sort_keys=True) + "\n")
                print(rid, s["total_estimated_cycles"], compile_s, flush=True)


if __name__ == "__main__":
    main()
