#!/usr/bin/env python3
"""Takes the cycle constants of a joint hlo fit (hlo_fit --corpus) and keeps the temp-bytes constants of the
installed calibration (fitted on the reference sample's temp bytes, which the corpus-fitted ones miss).

Usage: python3 tools/corpus/merge_temp.py FIT.json > sim-tpu/src/hlo/calibration.json
"""
import json
import sys
from pathlib import Path

TEMP = ("temp_fast_bytes", "temp_overhead_bytes", "temp_row_reduce_bytes")
root = Path(__file__).resolve().parent.parent.parent
installed = {p["name"]: p for p in json.load(open(root / "sim-tpu/src/hlo/calibration.json"))}
fit = json.load(open(sys.argv[1]))
for p in fit:
    for k in TEMP:
        p[k] = installed[p["name"]][k]
print(json.dumps(fit, indent=2))
