#!/usr/bin/env python3
"""Collects every distinct shape string from compiled HLO text files into a gzipped list (one per line)
for the round-trip test of sim-core's layout parser.

Usage: python3 tools/extract_hlo_shapes.py ../shared/reference/tpu-compiler/hlo/*.txt.gz \
           > /dev/null  (writes testdata/layout/hlo_shapes.txt.gz)
A shape is the text after ' = ' in an instruction line (a tuple in balanced parentheses, or up to the
next space), plus each shape of the entry_computation_layout and of computation signatures.
"""
import gzip
import re
import sys

TYPE = re.compile(r"(?:pred|token|opaque|[suf]\d+|bf16|c64|c128|f8e\w+|f4e\w+)\[")


def take_shape(text, i):
    """Returns the shape starting at text[i] (balanced tuple or array with layout)."""
    if text[i] == "(":
        depth = 0
        for j in range(i, len(text)):
            if text[j] == "(":
                depth += 1
            elif text[j] == ")":
                depth -= 1
                if depth == 0:
                    return text[i:j + 1]
        return None
    m = TYPE.match(text, i)
    if not m:
        return None
    j = text.index("]", i) + 1
    if j < len(text) and text[j] == "{":
        depth = 0
        for k in range(j, len(text)):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    return text[i:k + 1]
    return text[i:j]


shapes = set()
for path in sys.argv[1:]:
    for line in gzip.open(path, "rt"):
        pos = line.find(" = ")
        if pos >= 0 and line.lstrip().startswith(("%", "ROOT")):
            s = take_shape(line, pos + 3)
            if s:
                shapes.add(s)
        start = line.find("entry_computation_layout={")
        if start >= 0:
            i = start + len("entry_computation_layout={")
            depth = 1
            j = i
            while depth:
                depth += {"{": 1, "}": -1}.get(line[j], 0)
                j += 1
            sig = line[i:j - 1]
            args, _, result = sig.rpartition(")->")
            shapes.add(args + ")")
            shapes.add(result)
with gzip.open("testdata/layout/hlo_shapes.txt.gz", "wt") as out:
    for s in sorted(shapes):
        out.write(s + "\n")
print(len(shapes), "shapes")
