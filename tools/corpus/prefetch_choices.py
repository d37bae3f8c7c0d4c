#!/usr/bin/env python3
"""Which entry parameters the compiler copies on chip, per corpus record: the cross-program prefetch
(`copy-start(p), cross_program_prefetch_index=0`) and the other `copy-start`s of entry parameters, beside the
record's dtype, mode and total estimate. Reads the optimized modules (never run by tests or CI); used to check
`hlo::prefetch` and `hlo::operand_prefetch` against the compiler's choices.

Usage: python3 tools/corpus/prefetch_choices.py [ID_PREFIX] [--opt DIR]   (DIR: /work/scratch-corpus/opt)
"""
import argparse
import gzip
import json
import re
from pathlib import Path

root = Path(__file__).resolve().parent.parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("prefix", nargs="?", default="")
ap.add_argument("--opt", default="/work/scratch-corpus/opt")
args = ap.parse_args()

recs = {}
for line in gzip.open(root / "testdata" / "hlo" / "corpus" / "records.jsonl.gz", "rt"):
    r = json.loads(line)
    recs[r["id"]] = r

# `%copy-start.N = (...) copy-start(%param)` in the entry; the cross-program one carries its index.
copy = re.compile(r"%copy-start(?:\.\d+)? = .*? copy-start\(%([\w.]+)\)(, cross_program_prefetch_index=\d+)?")
for rid in sorted(recs):
    if not rid.startswith(args.prefix):
        continue
    path = Path(args.opt) / f"{rid}.txt.gz"
    if not path.exists():
        continue
    entry = gzip.open(path, "rt").read().split("\nENTRY ", 1)[-1]
    params = set(re.findall(r"%([\w.]+) = \S+ parameter\(\d+\)", entry))
    cross, others = None, []
    for m in copy.finditer(entry):
        if m.group(2):
            cross = m.group(1)
        elif m.group(1) in params:
            others.append(m.group(1))
    r = recs[rid]
    p = r.get("params", {})
    print(f"{rid:<28} {str(p.get('dtype')):<5} {str(p.get('mode')):<7} cross={cross} copies={others} "
          f"est={r['total_estimated_cycles']}")
