"""Per chip, the fixed cycles of a TensorCore kernel: the intercept (at zero rows) of the compiler's
estimates of tiny kernels in testdata/tensorcore/launch.jsonl, by least squares over the four sizes
of each kind. VPU kernels (add, reduce, three-op fusion) share one figure, their mean; matmul kernels
(an MXU fusion) have their own. Prints them with the op model's fitted launch constants beside them
(sim-tpu/src/tensorcore/calibration.json), which sim-tpu/tests/tc_launch.rs checks against these
records (fitted on other programs: a held-out check).

    python tools/tc-launch-probe/fit.py testdata/tensorcore/launch.jsonl
"""

import json
import sys


def intercept(points):
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - slope * mx


def main():
    recs = [json.loads(line) for line in open(sys.argv[1]) if "error" not in line]
    cal = {c["name"]: c["params"] for c in json.load(open("sim-tpu/src/tensorcore/calibration.json"))["chips"]}
    for chip in dict.fromkeys(r["chip"] for r in recs):
        fixed = {}
        for kind in ("add", "reduce", "fusion", "matmul"):
            pts = [(r["rows"], r["total_estimated_cycles"]) for r in recs if r["chip"] == chip and r["kind"] == kind]
            fixed[kind] = intercept(pts)
        vpu = (fixed["add"] + fixed["reduce"] + fixed["fusion"]) / 3
        print(f"{chip}: VPU kernel {vpu:.0f} cycles (op model launch_cycles {cal[chip]['launch_cycles']:.0f}), "
              f"MXU kernel {fixed['matmul']:.0f} cycles (op model mxu_launch_cycles {cal[chip]['mxu_launch_cycles']:.0f})")


if __name__ == "__main__":
    main()
