#!/usr/bin/env python3
"""Leave-one-family-out for `tpusim hlo`: for every corpus family, refits the cycle constants without it
(`hlo_fit --corpus --split family:NAME`) and checks them on all of its records (`hlo_calibration --corpus --split
family:NAME --params FILE`); writes OUT_DIR/family_<NAME>.json (the fit) and OUT_DIR/lofo.md (median / p90 per
family and chip). Never run by tests or CI; niced; resumes (a family whose fit exists is not refitted).

Usage: python3 tools/corpus/lofo.py OUT_DIR [--full] [--reverse]   (default: `--quick` fits, one search round,
temp constants and VMEM budget kept; `--full` runs the whole fit per family; `--reverse` takes the families in
reverse order, so a second copy on the same OUT_DIR shares the work)
"""
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent.parent
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
quick = "--full" not in sys.argv
subprocess.run(["cargo", "build", "--release", "-p", "sim-tpu", "--example", "hlo_fit", "--example",
                "hlo_calibration"], cwd=root, check=True)
bins = root / "target" / "release" / "examples"
recs = [json.loads(l) for l in gzip.open(root / "testdata/hlo/corpus/records.jsonl.gz", "rt")]
families = sorted({r["family"] for r in recs})
order = families[::-1] if "--reverse" in sys.argv else families
rows = {}
for fam in order:
    fit = out / f"family_{fam}.json"
    if not fit.exists():
        args = ["nice", "-n", "10", str(bins / "hlo_fit"), "--corpus", "--split", f"family:{fam}"]
        text = subprocess.run(args + (["--quick"] if quick else []), cwd=root, check=True, capture_output=True,
                              text=True).stdout
        if not fit.exists():  # a second copy may have finished it meanwhile
            fit.write_text(text)
    check = subprocess.run(["nice", "-n", "10", str(bins / "hlo_calibration"), "--corpus", "--split",
                            f"family:{fam}", "--params", str(fit)], cwd=root, check=True, capture_output=True,
                           text=True).stdout
    for line in check.splitlines():
        m = re.match(rf"family {re.escape(fam)} (\S+)\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%", line)
        if m:
            rows[(fam, m.group(1))] = (int(m.group(2)), float(m.group(3)), float(m.group(4)))
    print(fam, {c: rows.get((fam, c)) for c in ("v4", "v5e", "v5p", "v6e", "tpu7x", "all")}, flush=True)
chips = ["v4", "v5e", "v5p", "v6e", "tpu7x", "all"]
lines = ["| family | " + " | ".join(chips) + " |", "|---|" + "---|" * len(chips)]
for fam in families:
    cells = []
    for c in chips:
        v = rows.get((fam, c))
        cells.append(f"{v[1]:.0f}% / {v[2]:.0f}%" if v and v[0] else "-")
    lines.append(f"| {fam} | " + " | ".join(cells) + " |")
mode = "quick fits (one search round, temp constants and VMEM budget kept)" if quick else "full fits"
table = "\n".join(lines) + "\n"
(out / "lofo.md").write_text(f"Leave-one-family-out, cycles median / p90 per chip ({mode}):\n\n" + table)
print(table)
