#!/usr/bin/env python3
"""Takes the cycle constants of a joint hlo fit (hlo_fit --corpus) and keeps the temp-bytes constants of the
installed calibration. No longer part of the fit (since the 1,826-record refit the temp constants fitted on the
sample and the corpus together keep the sample's held-out temp within 25 % on every chip); kept to compare.

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
