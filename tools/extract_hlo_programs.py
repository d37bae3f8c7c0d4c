#!/usr/bin/env python3
"""Copies the calibration programs' input HLO into testdata/hlo/ and writes testdata/hlo/programs.json: the numbers
`tpusim hlo` is compared with, per (program, chip), and the fit/held-out split.

Usage: python3 tools/extract_hlo_programs.py [PROGRAMS_DIR]   (default ../shared/reference/tpu-compiler/programs)

Split: within each family, programs sorted by name; every third starting with the second (index % 3 == 1) is
held out. Constants may be fitted on `fit` records only; agreement is reported on `heldout` records.
"""
import json
import shutil
import sys
from collections import defaultdict
from pathlib import Path

src = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/reference/tpu-compiler/programs")
out = Path(__file__).resolve().parent.parent / "testdata" / "hlo"
out.mkdir(parents=True, exist_ok=True)
records = [json.loads(l) for l in open(src / "programs.jsonl")]
by_family = defaultdict(set)
for r in records:
    by_family[r["family"]].add(r["program"])
split = {}
for fam, progs in by_family.items():
    for i, p in enumerate(sorted(progs)):
        split[p] = "heldout" if i % 3 == 1 else "fit"
rows = []
for r in sorted(records, key=lambda r: r["id"]):
    shutil.copy(src / r["hlo_input"], out / Path(r["hlo_input"]).name)
    ma = r["memory_analysis"]
    rows.append({
        "id": r["id"],
        "program": r["program"],
        "family": r["family"],
        "chip": r["chip"],
        "hlo": Path(r["hlo_input"]).name,
        "split": split[r["program"]],
        "estimate_complete": r["estimate_complete"],
        "total_estimated_cycles": r["total_estimated_cycles"],
        "argument_bytes": ma["argument_size_in_bytes"],
        "output_bytes": ma["output_size_in_bytes"],
        "alias_bytes": ma["alias_size_in_bytes"],
        "temp_bytes": ma["temp_size_in_bytes"],
    })
with open(out / "programs.json", "w") as f:
    f.write("[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]\n")
# A few optimized modules (tiled layouts, fusions, S(n) memory spaces, debug sections) for reader tests.
(out / "opt").mkdir(exist_ok=True)
for rid in ["norm_residual.layernorm_n4096_d4096_fwd_f32@v4", "norm_residual.rmsnorm_n16384_d4096_fwd_bf16@tpu7x",
            "dlrm_bottom_mlp.b256_fwd_bf16@v5p", "attention.b16_s256_h8_dh64_fwd_bf16@v6e"]:
    shutil.copy(src / "opt" / f"{rid}.txt.gz", out / "opt" / f"{rid}.txt.gz")
print(f"{len(rows)} records, {len(set(r['hlo'] for r in rows))} HLO files -> {out}")
