#!/usr/bin/env python3
"""The compiler's per-instruction estimates with `while` bodies counted once per trip (`known_trip_count`),
for the records whose optimized module loops (windowed einsums): probe.py's `estimated_cycles` counts each
body once. Recompiles the named cases and prints one JSON line per case.

Usage (never run by tests or CI):
  ALLOW_MULTIPLE_LIBTPU_LOAD=1 nice -n 10 /work/venv-tpu/bin/python tools/partition-probe/loop_estimates.py \
      mlp.fsdp.v5p:2x2x2 block.fsdp.v5p:2x2x2
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import probe  # noqa: E402


def main():
    for case in sys.argv[1:]:
        model, pattern, topo = case.split(".", 2)
        r = probe.compile_case(model, pattern, topo)
        total, trips = probe.loop_aware(r["post_hlo"])
        print(json.dumps({"case": case, "estimated_cycles": r["estimated_cycles"],
                          "estimated_cycles_loops_counted": total, "trip_counts": trips}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
