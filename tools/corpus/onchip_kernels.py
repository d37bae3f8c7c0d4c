#!/usr/bin/env python3
"""MXU (kOutput) fusion estimates of the corpus's optimized entry modules, by where their operands and result
live (VMEM `S(1)` or HBM), per chip: the evidence of `sim-tpu/src/hlo/onchip_kernel.rs`.

Usage: tools/corpus/onchip_kernels.py OPT_DIR RECORDS_JSONL_GZ [--split fit|heldout|all] [--list | --smallest]
`--smallest` prints instead, per chip, the smallest kOutput fusion estimate anywhere in the module (loop bodies
included) whose non-scalar operands are all on chip (`S(1)`, or v4's CMEM `S(3)`): the `onchip_mxu_launch_cycles`
of `sim-tpu/src/hlo/calibration.json` (read off the fit records, not fitted; `hlo_fit` carries it over).
(OPT_DIR: the generator's `opt/` folder of `<program>@<chip>.txt.gz`; RECORDS: testdata/hlo/corpus/records.jsonl.gz).
Kernels of at most 256 KiB of operands and result are counted (their estimate is mostly the launch); operands of
4 bytes or less (scalars) are ignored. Never run by tests.
"""
import collections
import glob
import gzip
import json
import os
import re
import sys

MAX_BYTES = 256 * 1024
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "f32": 4, "s32": 4, "u32": 4}
INSTR = re.compile(r"\s*(?:ROOT )?%(\S+) = (.*?) ([\w-]+)\((.*?)\)(?:, |$)")


def nbytes(shape):
    total = 0
    for dt, dims in re.findall(r"(pred|s8|u8|bf16|f16|f32|s32|u32)\[([\d,]*)\]", shape):
        n = 1
        for d in dims.split(","):
            if d:
                n *= int(d)
        total += n * DTYPE_BYTES[dt]
    return total


def kout_fusions(lines):
    """(name, estimate, result shape, operand shapes) of each estimated kOutput fusion among HLO `lines`."""
    shapes = {}
    for line in lines:
        m = INSTR.match(line)
        if not m:
            continue
        name, shape, op, args = m.groups()
        shapes[name] = shape
        est = re.search(r'"estimated_cycles":"(\d+)"', line)
        if op == "fusion" and "kind=kOutput" in line and est:
            operands = [a.strip().lstrip("%") for a in args.split(",") if a.strip().startswith("%")]
            yield name, int(est.group(1)), shape, [shapes.get(o, "") for o in operands]


def entry_kernels(path):
    """The entry computation's kOutput fusions (`kout_fusions`)."""
    text = gzip.open(path, "rt").read()
    return list(kout_fusions(text[text.index("\nENTRY"):].split("\n")[1:]))


def smallest_onchip(opt_dir, splits, split):
    """Per chip, (estimate, record, fusion) of the cheapest kOutput fusion reading only on-chip operands."""
    best = {}
    for path in sorted(glob.glob(os.path.join(opt_dir, "*.txt.gz"))):
        rid = os.path.basename(path)[: -len(".txt.gz")]
        if rid not in splits or (split != "all" and splits[rid] != split):
            continue
        chip = rid.split("@")[1]
        for name, est, _, operands in kout_fusions(gzip.open(path, "rt")):
            ins = [s for s in operands if nbytes(s) > 4]
            if ins and all("S(1)" in s or "S(3)" in s for s in ins) and est < best.get(chip, (1 << 62,))[0]:
                best[chip] = (est, rid, name)
    for chip, (est, rid, name) in sorted(best.items()):
        print(f"{chip:6} onchip_mxu_launch_cycles {est:6}  ({rid} {name})")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    opt_dir, records = sys.argv[1], sys.argv[2]
    split = sys.argv[sys.argv.index("--split") + 1] if "--split" in sys.argv else "fit"
    listing = "--list" in sys.argv
    splits = {}
    for line in gzip.open(records, "rt"):
        r = json.loads(line)
        splits[r["id"]] = r["split"]
    if "--smallest" in sys.argv:
        smallest_onchip(opt_dir, splits, split)
        return
    cells = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(opt_dir, "*.txt.gz"))):
        rid = os.path.basename(path)[: -len(".txt.gz")]
        if rid not in splits or (split != "all" and splits[rid] != split):
            continue
        chip = rid.split("@")[1]
        for name, est, shape, operands in entry_kernels(path):
            if sum(map(nbytes, operands)) + nbytes(shape) > MAX_BYTES:
                continue
            ins = [s for s in operands if nbytes(s) > 4]
            where_in = "V" if all("S(1)" in s for s in ins) else ("h" if not any("S(1)" in s for s in ins) else "m")
            where_out = "V" if "S(1)" in shape else "h"
            cells[(chip, where_in, where_out)].append(est)
            if listing and (where_in, where_out) == ("V", "V"):
                print(rid, name, est, shape[:70])
    for (chip, i, o), v in sorted(cells.items()):
        v.sort()
        n = len(v)
        print(f"{chip:6} operands {i} result {o}: n={n:3} q25 {v[n // 4]:6} median {v[n // 2]:6} q75 {v[3 * n // 4]:6}")


if __name__ == "__main__":
    main()
