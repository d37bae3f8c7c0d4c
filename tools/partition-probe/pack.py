#!/usr/bin/env python3
"""Packs probe records into what the tests read: testdata/shard/partition/records.jsonl.gz, one record per
case with the annotated module, the compiler's per-device module (debug sections, metadata and backend
configs removed), the sum of its per-instruction estimated cycles and its memory_analysis.

Usage: python3 tools/partition-probe/pack.py RAW.jsonl testdata/shard/partition/records.jsonl.gz
"""
import gzip
import json
import re
import sys

# What an earlier strip of `frontend_attributes={...}` stopping at the first `}` left behind.
LEFTOVER = re.compile(r', \{[^=\n]*?\]>(?:\]>)?"\}')


def drop_attr(line, key):
    """Removes `, key={...}` (braces balanced, strings skipped) from one line."""
    i = line.find(f", {key}={{")
    while i >= 0:
        j, depth, in_str = i + len(key) + 3, 0, False
        while j < len(line):
            c = line[j]
            if in_str:
                if c == "\\":
                    j += 1
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        line = line[:i] + line[j + 1:]
        i = line.find(f", {key}={{")
    return line


def clean(text):
    out = []
    for line in text.splitlines():
        if re.match(r'^\d+ [{"]', line) or line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            continue
        # The module's Shardy mesh and a shard_map boundary's specs are kept: the partitioner reads them.
        keep = line.startswith("HloModule") or 'custom_call_target="xla.sdy.' in line
        for key in ("metadata", "backend_config", "frontend_attributes"):
            if key != "frontend_attributes" or not keep:
                line = drop_attr(line, key)
        out.append(line if keep else LEFTOVER.sub("", line))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)) + "\n"


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f, gzip.open(dst, "wt", compresslevel=9) as g:
        for line in f:
            r = json.loads(line)
            r["pre_hlo"], r["post_hlo"] = clean(r["pre_hlo"]), clean(r["post_hlo"])
            g.write(json.dumps(r, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(main())
