#!/usr/bin/env python3
"""Copies what the calibration needs from a generated corpus (gen_corpus.py / gen_ops.py OUT_DIR) into testdata:

  testdata/hlo/corpus/records.jsonl.gz  one compact record per (program, chip), format in testdata/hlo/corpus/README.md
  testdata/hlo/corpus/hlo/<program>.hlo.txt.gz  the pre-optimization HLO (`tpusim hlo`'s input)
  testdata/ops/corpus_records.jsonl.gz  TensorCore op records in tc_records.jsonl.gz's schema

Usage: python3 tools/corpus/extract_testdata.py OUT_DIR   (plain python3: no jax needed)

Splits (per program, so every chip of a program is on the same side):
- `split`: "heldout" for a fifth of the programs, drawn by sha1(program name); "fit" for the rest.
- `size_rank`: the program's rank by size within its family (0 = smallest); size = the compiler's flops
  (max over chips) then argument + output bytes. `size_split`: "largest" for the top fifth of each family
  (rounded up), "smaller" otherwise. Size extrapolation fits on "smaller" and checks on "largest".
- Leave-one-family-out uses `family`.
"""
import gzip
import hashlib
import json
import shutil
import sys
from collections import defaultdict
from pathlib import Path

src = Path(sys.argv[1])
root = Path(__file__).resolve().parent.parent.parent
out = root / "testdata" / "hlo" / "corpus"
(out / "hlo").mkdir(parents=True, exist_ok=True)
recs = {}
for line in open(src / "records.jsonl"):
    r = json.loads(line)
    recs[r["id"]] = r  # a resumed run may repeat an id: the last one wins
recs = sorted(recs.values(), key=lambda r: r["id"])
size = defaultdict(lambda: (0, 0))
for r in recs:
    ma = r["memory_analysis"]
    s = ((r["cost_analysis"].get("flops") or 0), ma["argument_size_in_bytes"] + ma["output_size_in_bytes"])
    size[r["program"]] = max(size[r["program"]], s)
fam_progs = defaultdict(list)
for p in size:
    fam_progs[p.split(".")[0]].append(p)
rank, largest = {}, set()
for fam, progs in fam_progs.items():
    progs.sort(key=lambda p: (size[p], p))
    k = -(-len(progs) // 5)
    for i, p in enumerate(progs):
        rank[p] = i
        if i >= len(progs) - k:
            largest.add(p)


def heldout(p):
    return int(hashlib.sha1(p.encode()).hexdigest(), 16) % 5 == 0


with gzip.open(out / "records.jsonl.gz", "wt", compresslevel=9) as f:
    for r in recs:
        ma = r["memory_analysis"]
        row = {
            "id": r["id"], "program": r["program"], "family": r["family"], "chip": r["chip"], "params": r["params"],
            "hlo": Path(r["hlo_input"]).name, "split": "heldout" if heldout(r["program"]) else "fit",
            "size_rank": rank[r["program"]], "size_split": "largest" if r["program"] in largest else "smaller",
            "flops": r["cost_analysis"].get("flops"), "estimate_complete": r["estimate_complete"],
            "estimate_gaps": r["estimate_gaps"], "total_estimated_cycles": r["total_estimated_cycles"],
            "entry_estimated_cycles": r["entry_estimated_cycles"],
            "loops": [{k: lp[k] for k in ("trip_count", "body_estimated_cycles")} for lp in r["loops"]],
            "argument_bytes": ma["argument_size_in_bytes"], "output_bytes": ma["output_size_in_bytes"],
            "alias_bytes": ma["alias_size_in_bytes"], "temp_bytes": ma["temp_size_in_bytes"],
            "kernels": [{k: i[k] for k in ("name", "opcode", "fusion_kind", "shape", "estimated_cycles",
                                           "called_opcodes") if k in i}
                        for i in r["instructions"] if "estimated_cycles" in i],
        }
        f.write(json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n")
        dst = out / "hlo" / row["hlo"]
        if not dst.exists():
            shutil.copy(src / r["hlo_input"], dst)
n_ops = 0
if (src / "ops_records.jsonl").exists():
    ops = {}
    for line in open(src / "ops_records.jsonl"):
        r = json.loads(line)
        ops[(r["id"], r["chip"])] = r
    with gzip.open(root / "testdata" / "ops" / "corpus_records.jsonl.gz", "wt", compresslevel=9) as f:
        for k in sorted(ops):
            f.write(json.dumps(ops[k], separators=(",", ":")) + "\n")
            n_ops += 1
print(f"{len(recs)} program records ({len(size)} programs), {n_ops} op records")
