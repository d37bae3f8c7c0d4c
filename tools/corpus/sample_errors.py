#!/usr/bin/env python3
"""`tpusim hlo` against the compiler on every scored record of the reference sample (its fit and held-out
splits together): median and p90 of max(pred/est, est/pred) - 1 per chip, the share of compiler totals inside
tpusim's 80% band, and the worst records. Never run by tests or CI.

Usage: python3 tools/corpus/sample_errors.py [PROGRAMS_DIR] [--worst N]
(PROGRAMS_DIR: default ../shared/reference/tpu-compiler/programs beside the repository; tpusim built in
target/release.)
"""
import json
import statistics
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent.parent
args = [a for a in sys.argv[1:] if not a.startswith("--")]
programs = Path(args[0]) if args and not args[0].isdigit() else root.parent / "shared/reference/tpu-compiler/programs"
worst = int(sys.argv[sys.argv.index("--worst") + 1]) if "--worst" in sys.argv else 20


def error(ratio):
    return max(ratio, 1 / ratio) - 1


rows = []
for line in open(programs / "programs.jsonl"):
    r = json.loads(line)
    if not r.get("estimate_complete", True):
        continue
    out = subprocess.run([str(root / "target/release/tpusim"), "hlo", "--json", "--chip", r["chip"],
                          str(programs / r["hlo_input"])], capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    est = r["total_estimated_cycles"]
    inside = d["total_cycles_low"] <= est <= d["total_cycles_high"]
    rows.append((r["chip"], r["program"], d["total_cycles"] / est, inside))
print("chip     n  median    p90  inside 80% band")
for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"]:
    errs = sorted(error(x[2]) for x in rows if x[0] == chip)
    if not errs:
        continue
    p90 = errs[min(len(errs) - 1, int(0.9 * (len(errs) - 1) + 0.5))]
    inside = sum(1 for x in rows if x[0] == chip and x[3])
    print(f"{chip:6} {len(errs):3} {100 * statistics.median(errs):6.1f}% {100 * p90:6.1f}%  {inside}/{len(errs)}")
for chip, prog, ratio, inside in sorted(rows, key=lambda x: -error(x[2]))[:worst]:
    print(f"{chip:6} {prog:52} {ratio:5.2f}x {'inside' if inside else 'outside'} band")
