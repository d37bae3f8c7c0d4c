#!/usr/bin/env python3
"""Side by side: `tpusim hlo --json`'s kernels and the compiler's `kernels[]` for corpus records, to see where the
cycles go. Reads testdata/hlo/corpus (never run by tests or CI).

Usage: python3 tools/corpus/compare_kernels.py PROGRAM[@CHIP] [...]   (e.g. conv.009@v6e; tpusim built in
target/release)
"""
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

root = Path(__file__).resolve().parent.parent.parent
corpus = root / "testdata" / "hlo" / "corpus"
recs = [json.loads(l) for l in gzip.open(corpus / "records.jsonl.gz", "rt")]
for want in sys.argv[1:]:
    prog, _, chip = want.partition("@")
    for r in recs:
        if r["program"] != prog or (chip and r["chip"] != chip):
            continue
        text = gzip.open(corpus / "hlo" / Path(r["hlo"]).name, "rt").read()
        with tempfile.NamedTemporaryFile("w", suffix=".hlo") as f:
            f.write(text)
            f.flush()
            out = subprocess.run([str(root / "target/release/tpusim"), "hlo", "--chip", r["chip"], f.name, "--json"],
                                 capture_output=True, text=True)
        d = json.loads(out.stdout)
        print(f"== {r['id']} {r['params']} compiler {r['total_estimated_cycles']} tpusim {d['total_cycles']}")
        print("  compiler:")
        for k in sorted(r["kernels"], key=lambda k: -k["estimated_cycles"])[:12]:
            print(f"    {k['estimated_cycles']:>10} {k['opcode']:<12} {k.get('fusion_kind') or '':<8} {k['shape'][:60]} "
                  f"{','.join(k.get('called_opcodes') or [])[:80]}")
        print("  tpusim:")
        for k in sorted(d["kernels"], key=lambda k: -k["cycles"])[:12]:
            print(f"    {k['cycles']:>10} {k['kind']:<12} {k['bound_by']:<6} hbm {k['hbm_bytes']:>11} "
                  f"{k['name']} [{len(k['instructions'])}] {','.join(k['instructions'])[:70]}")
