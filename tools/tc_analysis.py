"""Exploration helpers for calibrating the TensorCore model against ops.jsonl (analysis only; not used at run time)."""
import json, re, math, sys, collections
REF = '/work/shared/reference/tpu-compiler/ops.jsonl'
BITS = {'pred': 8, 's8': 8, 'u8': 8, 'f8e4m3fn': 8, 'bf16': 16, 'f16': 16, 's32': 32, 'f32': 32, 'u32': 32}
CHIPS = ['v4', 'v5e', 'v5p', 'v6e', 'tpu7x']

def parse_shape(s):
    m = re.match(r'(\w+)\[([\d,]*)\](?:\{([^}]*)\})?', s)
    ty, dims, lay = m.group(1), m.group(2), m.group(3)
    dims = [int(d) for d in dims.split(',')] if dims else []
    m2m = None; tile = None
    if lay is not None:
        parts = lay.split(':')
        m2m = [int(x) for x in parts[0].split(',')] if parts[0] else []
        if len(parts) > 1:
            t = re.match(r'T\(([\d,]+)\)', parts[1])
            if t: tile = [int(x) for x in t.group(1).split(',')]
    return ty, dims, m2m, tile

def padded_bytes(s):
    ty, dims, m2m, tile = parse_shape(s)
    bits = BITS.get(ty, 32)
    if m2m is None: m2m = list(range(len(dims)))[::-1]
    phys = [dims[i] for i in reversed(m2m)]  # major-to-minor
    if tile:
        n = len(tile)
        phys = [1] * max(0, n - len(phys)) + phys
        for i in range(n):
            j = len(phys) - n + i
            phys[j] = -(-phys[j] // tile[i]) * tile[i]
    cnt = 1
    for d in phys: cnt *= d
    return cnt * bits // 8

def load():
    recs = [json.loads(l) for l in open(REF)]
    for r in recs: r['c'] = r['chip'].split(':')[0]
    return recs
