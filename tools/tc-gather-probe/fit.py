"""Fit the TensorCore gather model's per-chip constants (sim-tpu/src/tensorcore/gather.json) on the
fit split of testdata/tensorcore/gather.jsonl (tables of 5,120 and 1,000,000 rows, and 2,048-wide
rows; the rest is held out and checked by sim-tpu/tests/tc_gather.rs). Rows narrower than 256 B are
left out: the compiler relayouts them with kernels of their own, which the model does not have.

    python tools/tc-gather-probe/fit.py testdata/tensorcore/gather.jsonl > sim-tpu/src/tensorcore/gather.json

Objective: sum of squared log errors, by grid search (deterministic). The model is the one in
sim-tpu/src/tensorcore/gather.rs; the HBM rate per cycle is model_hbm_bytes_per_s / model_clock_mhz of
the chip presets (reference/chips.md).
"""

import json
import math
import sys

RATE = {"v4": (491e9, 1045e6), "v5e": (738e9, 1503e6), "v5p": (2350e9, 1503e6), "v6e": (1638e9, 1751e6),
        "tpu7x": (3686e9, 1900e6)}
ELEM = {"float32": 4, "bfloat16": 2}


def in_fit(r):
    return r["vocab"] in (5120, 1_000_000) or r["dim"] == 2048


def modelled(r, launch, row, take_eff, scatter_eff):
    per_cycle = RATE[r["chip"]][0] / RATE[r["chip"]][1]
    row_bytes = r["dim"] * ELEM[r["dtype"]]
    if r["op"] == "take":
        return launch + max(r["ids"] * row, 2 * r["ids"] * row_bytes / (take_eff * per_cycle))
    return launch + 2 * r["vocab"] * r["dim"] * 4 / (scatter_eff * per_cycle)


def loss(rs, *p):
    return sum(math.log(modelled(r, *p) / r["total_estimated_cycles"]) ** 2 for r in rs)


def main():
    recs = [json.loads(line) for line in open(sys.argv[1])]
    chips = []
    for chip in RATE:
        rs = [r for r in recs if r["chip"] == chip and r["dim"] * ELEM[r["dtype"]] >= 256 and in_fit(r)]
        if not rs:
            chips.append(dict(name=chip, source="assumed: as v4; the compiler refused the probe's programs on this chip"))
            continue
        takes = [r for r in rs if r["op"] == "take"]
        scatters = [r for r in rs if r["op"] == "scatter_add"]
        best = min(
            (loss(takes, launch, row / 20, eff / 100, 1.0), launch, row / 20, eff / 100)
            for launch in range(0, 8001, 100)
            for row in range(20, 161)
            for eff in range(40, 101, 2)
        )
        _, launch, row, take_eff = best
        scatter_eff = min((loss(scatters, launch, row, take_eff, e / 100), e / 100) for e in range(30, 101))[1]
        chips.append(dict(name=chip, source=f"compiler: fitted on {len(rs)} records", launch_cycles=launch, row_cycles=row, take_hbm_efficiency=take_eff,
                          scatter_hbm_efficiency=scatter_eff))
    v4 = next(c for c in chips if c["name"] == "v4")
    for c in chips:
        for k, v in v4.items():
            c.setdefault(k, v)
    out = dict(source="fitted by tools/tc-gather-probe/fit.py on the fit split of testdata/tensorcore/gather.jsonl "
                      "(the XLA TPU compiler's estimated_cycles, libtpu 0.0.52)", chips=chips)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
