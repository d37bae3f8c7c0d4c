#!/usr/bin/env python3
"""What the corpus's random fit split covers: per family, programs and records fitted on, the range of the
compiler's FLOPs and of argument + output bytes, dtypes, modes and chips. Reads testdata/hlo/corpus (never run by
tests or CI).

Usage: python3 tools/corpus/coverage.py
"""
import gzip
import json
from collections import defaultdict
from pathlib import Path

root = Path(__file__).resolve().parent.parent.parent
recs = [json.loads(l) for l in gzip.open(root / "testdata/hlo/corpus/records.jsonl.gz", "rt")]
fam = defaultdict(lambda: {"progs": set(), "n": 0, "flops": [], "bytes": [], "dtypes": set(), "modes": set(),
                           "chips": set()})
for r in recs:
    if r["split"] != "fit":
        continue
    f = fam[r["family"]]
    f["progs"].add(r["program"])
    f["n"] += 1
    f["flops"].append(r.get("flops") or 0)
    f["bytes"].append(r["argument_bytes"] + r["output_bytes"])
    f["dtypes"].add(r["params"].get("dtype", "-"))
    f["modes"].add(r["params"].get("mode", "-"))
    f["chips"].add(r["chip"])


def si(x):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


print("| family | programs | records | FLOPs | argument + output bytes | dtypes | modes | chips |")
print("|---|---|---|---|---|---|---|---|")
for name in sorted(fam):
    f = fam[name]
    print(f"| {name} | {len(f['progs'])} | {f['n']} | {si(min(f['flops']))}-{si(max(f['flops']))} | "
          f"{si(min(f['bytes']))}-{si(max(f['bytes']))} | {', '.join(sorted(f['dtypes']))} | "
          f"{', '.join(sorted(f['modes']))} | {len(f['chips'])} |")
print(f"\n{sum(f['n'] for f in fam.values())} fit records of {len(recs)}")
