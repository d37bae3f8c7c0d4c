#!/usr/bin/env python3
"""Which chip values and step parameters move `dlrm-criteo`'s step time: each numeric value of the
workload's chip (sim-tpu/chips/<chip>.json) and of the step parameters (sim-tpu/chips/params.json)
doubled in turn with `tpusim run --set chip.FIELD=...`, the step time compared with the base run.
Feeds the table in docs/step_time_walk.md. Not run by tests.
Run: python3 tools/step-walk/moving_params.py [target/release/tpusim] [preset]
"""
import json
import subprocess
import sys

exe = sys.argv[1] if len(sys.argv) > 1 else "target/release/tpusim"
preset = sys.argv[2] if len(sys.argv) > 2 else "dlrm-criteo"


def step_us(*sets):
    args = [exe, "run", "--preset", preset, "--json"]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        return None, out.stderr.strip().splitlines()[-1:]
    return json.loads(out.stdout)["step_time_us"], None


base, _ = step_us()
chip = json.load(open("sim-tpu/chips/v4.json"))
params = json.load(open("sim-tpu/chips/params.json"))
fields = [(k, v["value"]) for k, v in chip.items() if isinstance(v.get("value"), (int, float)) and not isinstance(v.get("value"), bool)]
fields += [(k, v["value"]) for k, v in params.items() if isinstance(v.get("value"), (int, float))]
print(f"base {base:.3f} us")
for k, v in fields:
    doubled = v * 2
    t, err = step_us(f"chip.{k}={doubled}")
    if t is None:
        print(f"{k:40} refused: {err}")
    elif abs(t - base) > 1e-6:
        print(f"{k:40} {v} -> {doubled}: {t:.3f} us ({(t / base - 1) * 100:+.1f}%)")
