#!/usr/bin/env python3
"""Prints the README's table of sharded programs on v5p slices (`tpusim hlo --slice --json` on
testdata/shard/models/, next to the compiler's per-device memory_analysis). tests/cli_hlo_slice.rs checks the
README's rows against the same commands.

Usage: python3 tools/shard-probe/readme_table.py [path/to/tpusim]
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TPUSIM = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/release/tpusim")
MODELS = ROOT / "testdata/shard/models"


def main():
    mem = json.loads((MODELS / "memory.json").read_text())
    print("| program | slice | step µs | compute µs | collectives µs (summed; by kind) | exposed µs | "
          "temp MiB (compiler) |")
    print("|---|---|---|---|---|---|---|")
    for name in sorted(mem, key=lambda n: (n.split(".")[0], n.split(".")[1], len(n), n)):
        model, par, shape = name.split(".")
        out = subprocess.run([TPUSIM, "hlo", f"testdata/shard/models/{name}.hlo.txt", "--chip", "v5p", "--slice",
                              shape, "--json"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        r = json.loads(out)
        s = r["step"]
        us = lambda c: c * s["step_us"] / max(s["step_cycles"], 1)
        kinds = "; ".join(f"{k} {us(c):.1f}" for k, c in sorted(s["collective_cycles_by_kind"].items()))
        print(f"| {model} {par} | {shape} | {s['step_us']:.1f} | {us(s['compute_cycles']):.1f} | "
              f"{us(s['collective_cycles']):.1f} ({kinds}) | "
              f"{us(s['exposed_communication_cycles']):.1f} | "
              f"{r['temp_bytes'] / 2**20:.1f} ({mem[name]['temp_size_in_bytes'] / 2**20:.1f}) |")


if __name__ == "__main__":
    main()
