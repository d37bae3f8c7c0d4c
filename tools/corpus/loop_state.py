#!/usr/bin/env python3
"""Where the XLA TPU compiler keeps each `while` loop's state: for every optimized module of the corpus, the
loop result tuple's array elements with their (tiled) sizes and memory spaces (S(1) VMEM, S(3) CMEM, none HBM),
and the bytes on chip per loop. The evidence for `sim-tpu/src/hlo/loop_state.rs`. Never run by tests or CI.

Usage: tools/corpus/loop_state.py [OPT_DIR] [ID_PREFIX]   (OPT_DIR defaults to /work/scratch-corpus/opt)
"""
import glob
import gzip
import os
import re
import sys

ARRAY = re.compile(r"(pred|s4|u4|s8|u8|s16|u16|bf16|f16|s32|u32|f32|s64|u64|f64|f8e4m3fn|f8e5m2)"
                   r"\[([0-9,]*)\](\{[^}]*\})?")
BITS = {"pred": 8, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "bf16": 16, "f16": 16,
        "s32": 32, "u32": 32, "f32": 32, "s64": 64, "u64": 64, "f64": 64, "f8e4m3fn": 8, "f8e5m2": 8}


def tiled_bytes(dtype, dims):
    """Bytes under (8,128) tiling of the two minor dimensions (row-major order assumed)."""
    d = list(dims) or [1]
    d[-1] = -(-d[-1] // 128) * 128
    if len(d) >= 2:
        d[-2] = -(-d[-2] // 8) * 8
    n = 1
    for x in d:
        n *= x
    return n * BITS[dtype] // 8


def loops(path):
    """(elements, on-chip bytes, total bytes) per `while` of one optimized module."""
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            if " while(" not in line or not line.startswith("  %"):
                continue
            shape = line.split(" = ", 1)[1].split(" while(")[0]
            elems = []
            for m in ARRAY.finditer(shape):
                dims = [int(x) for x in m.group(2).split(",") if x]
                space = re.search(r"S\((\d)\)", m.group(3) or "")
                elems.append((m.group(1), dims, tiled_bytes(m.group(1), dims), int(space.group(1)) if space else 0))
            on = sum(e[2] for e in elems if e[3])
            out.append((elems, on, sum(e[2] for e in elems)))
    return out


def main():
    opt = sys.argv[1] if len(sys.argv) > 1 else "/work/scratch-corpus/opt"
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    for path in sorted(glob.glob(os.path.join(opt, prefix + "*.txt.gz"))):
        rid = os.path.basename(path)[: -len(".txt.gz")]
        for elems, on, total in loops(path):
            arrays = " ".join(f"{d}{list(s)}:S{sp}" for d, s, _, sp in elems if s)
            print(f"{rid:24s} state {total / 1e6:9.2f} MB, on chip {on / 1e6:9.2f} MB  {arrays}")


if __name__ == "__main__":
    main()
