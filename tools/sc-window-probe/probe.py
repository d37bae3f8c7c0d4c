"""Ask the XLA TPU compiler whether SparseCore embedding programs compile.

Compiles each case of CASES ahead of time (no TPU needed: the device comes from a topology
description) and writes one JSON object per case to stdout:

    chip, kind, vocab, dim, batch, max_ids, max_unique,
    status  "compiled" or "compile_error",
    error_class  "valid_window" | "e3001" | "hbm_per_tensor" | "tilespmem_row" | "hbm_oom" | "crash"
                 | "other"
                 (null when compiled),
    error  the compiler's first error line, trimmed (null when compiled).

The output is testdata/limits/window_probes.jsonl; sim-sparsecore/tests/limits_window_probes.rs
checks compile_check against it. The project's Rust tests never run this script.

--set picks the built-in cases (base, fit-2, fresh-2, fresh-3, fresh-4; see --help), --cases a
file of cases instead. --lowering also reads the compiler's HLO dumps of each fwd case: which
lookup it lowered to and the activation scatter's window (read_lowering); --lowering-out sends
those records to testdata/limits/fwd_lowering.jsonl. testdata/limits/window_probes.md has the
commands that made both files.

Needs a Python venv with jax 0.10.2, jaxlib 0.10.2, libtpu 0.0.52 and jax-tpu-embedding 0.1.0
(other versions may give other verdicts). Run from anywhere:

    python tools/sc-window-probe/probe.py > testdata/limits/window_probes.jsonl

Each case is compiled in a worker process; the compiler aborts on some inputs (tpu7x grad_sgd
widths above 1024 that are not a multiple of 16), which is recorded as error_class "crash" and
the worker is restarted. Progress goes to stderr.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

CHIPS = ("v5p", "v6e", "tpu7x")
TOPOLOGY = {"v5p": "v5p:2x2x1", "v6e": "v6e:2x2", "tpu7x": "tpu7x:2x2x1"}
SC_PER_DEVICE = {"v5p": 4, "v6e": 2, "tpu7x": 2}
MARK = "@@probe "


def case(chip, kind, dim, batch=256, ids=4096, unique=None, vocab=10000):
    unique = ids if unique is None else unique
    return dict(chip=chip, kind=kind, vocab=vocab, dim=dim, batch=batch, max_ids=ids, max_unique=unique)


def cases():
    out = []
    add = lambda *a, **k: out.append(case(*a, **k))
    # Ordinary cases: widths 8..16384, a few batches and id counts.
    for chip in CHIPS:
        for dim in (8, 64, 128, 512, 1024, 4096, 8192, 16384):
            add(chip, "fwd", dim, ids=1024)
            add(chip, "grad_sgd", dim, ids=1024)
        for batch in (32, 4096):
            add(chip, "fwd", 256, batch=batch, ids=2048)
            add(chip, "grad_sgd", 256, batch=batch, ids=2048)
    # grad_sgd width edges (gradient-dedup window), at two id counts / batches each.
    for chip, ok, bad in (("v5p", 13096, 13104), ("v6e", 6544, 6552), ("tpu7x", 13088, 13104)):
        for batch, ids in ((256, 4096), (1024, 512)):
            add(chip, "grad_sgd", ok, batch=batch, ids=ids)
            add(chip, "grad_sgd", bad, batch=batch, ids=ids)
    add("tpu7x", "grad_sgd", 13096)  # not a multiple of 16 on tpu7x
    add("tpu7x", "grad_sgd", 1000, ids=1024)  # not a multiple of 16, narrow
    add("v6e", "grad_sgd", 100, ids=1024)  # not a multiple of 8
    # fwd activation-scatter window edges, with max_unique on the scatter side.
    for chip, batch, unique, widths in (
        ("v6e", 256, 8192, (2728, 2736)),
        ("v6e", 1024, 8192, (1360, 1368)),
        ("v6e", 32, 8192, (3848, 3856)),
        ("v6e", 4096, 8192, (448, 456, 944, 952, 960, 968)),
        ("v5p", 256, 16384, (6544, 6552, 6560)),
        ("v5p", 1024, 16384, (4088, 4096)),
        ("tpu7x", 256, 16384, (3264, 3280)),
        ("tpu7x", 1024, 16384, (2032, 2048)),
    ):
        for dim in widths:
            add(chip, "fwd", dim, batch=batch, ids=unique)
    # fwd lookup switch points in max_unique at a width the scatter cannot take.
    for chip, batch, dim, pairs in (
        ("v6e", 256, 4096, (8096, 8104)),
        ("v6e", 1024, 4096, (8072, 8080)),
        ("v6e", 32, 4096, (8104, 8112)),
        ("v5p", 256, 8192, (15608, 15616, 16232, 16240)),
        ("tpu7x", 256, 4096, (15680, 15688, 15808, 15816)),
    ):
        for unique in pairs:
            add(chip, "fwd", dim, batch=batch, ids=unique)
    add("v6e", "fwd", 4096, ids=16384, unique=8096)  # max_ids above max_unique
    # fwd wide rows with few unique ids: the fused lookup slices columns.
    for chip in CHIPS:
        for dim in (32768, 65536):
            add(chip, "fwd", dim, ids=256, vocab=1000)
        add(chip, "fwd", 262144, ids=256, vocab=100)
    # The other limits near their edges (dim 128, batch 256).
    for chip, fwd_ok, grad_ok in (("v5p", 114688, 12288), ("v6e", 32768, 4096), ("tpu7x", 114688, 12288)):
        add(chip, "fwd", 128, ids=fwd_ok, vocab=100000)
        add(chip, "fwd", 128, ids=2 * fwd_ok, vocab=100000)
        add(chip, "grad_sgd", 128, ids=grad_ok, vocab=100000)
        add(chip, "grad_sgd", 128, ids=2 * grad_ok, vocab=100000)
    add("v5p", "fwd", 1024, ids=256, vocab=4194304)  # a 16 GiB table
    add("v5p", "fwd", 1024, ids=256, vocab=4194304 + 32)
    add("v6e", "fwd", 1024, ids=256, vocab=4194304)  # 16 GiB, but no room for it in v6e's HBM
    add("v6e", "fwd", 1024, ids=256, vocab=4194304 + 16)
    return out


def case_from_json(d):
    """A case from {chip, kind, dim, batch?, max_ids?, max_unique?, vocab?}: max_ids defaults to
    max_unique (and max_unique to max_ids), the rest as case()."""
    d = dict(d)
    ids, unique = d.pop("max_ids", None), d.pop("max_unique", None)
    ids = unique if ids is None else ids
    return case(**d, **({} if ids is None else {"ids": ids}), unique=unique)


def error_class(text):
    for key, cls in (
        ("Valid window was not found", "valid_window"),
        ("E3001", "e3001"),
        ("16 GiB of HBM per tensor", "hbm_per_tensor"),
        ("Can't fit a single row", "tilespmem_row"),
        ("CompileTimeHbmOom", "hbm_oom"),
    ):
        if key in text:
            return cls
    return "other"


def first_line(text, limit=400):
    lines = [l.strip() for l in text.strip().split("\n") if l.strip()]
    line = " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]  # E3001 puts its facts on line 2
    return line if len(line) <= limit else line[:limit] + "..."


def worker():
    """Compile cases read from stdin, one JSON object a line; answer each after MARK on stdout."""
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    import jax
    import jax.numpy as jnp
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding
    from jax_tpu_embedding.sparsecore.lib.core.primitives import sparse_dense_matmul_csr as fwd
    from jax_tpu_embedding.sparsecore.lib.core.primitives import sparse_dense_matmul_grad_with_sgd as sgd

    devices = {}
    for line in sys.stdin:
        c = json.loads(line)
        chip = c["chip"]
        if chip not in devices:
            topo = topologies.get_topology_desc(platform="tpu", topology_name=TOPOLOGY[chip])
            devices[chip] = SingleDeviceSharding(topo.devices[0])
        sh = devices[chip]
        spec = lambda shape, dt: jax.ShapeDtypeStruct(shape, dt, sharding=sh)
        n = SC_PER_DEVICE[chip]
        coo = c["max_ids"] * n * n
        args = [spec((8 * n,), jnp.int32), spec((coo,), jnp.int32), spec((coo,), jnp.int32),
                spec((coo,), jnp.float32), spec((), jnp.int32), spec((c["vocab"], c["dim"]), jnp.float32)]
        limits = dict(max_ids_per_partition=c["max_ids"], max_unique_ids_per_partition=c["max_unique"])
        if c["kind"] == "fwd":
            f = lambda *a: fwd.tpu_sparse_dense_matmul_csr_primitive.bind(
                *a, device_batch_size=c["batch"], **limits)
        else:
            args += [spec((c["batch"], c["dim"]), jnp.float32), spec((), jnp.float32)]
            f = lambda *a: sgd.tpu_sparse_dense_matmul_grad_with_sgd_primitive.bind(*a, **limits)
        lowering = bool(os.environ.get("SC_PROBE_LOWERING")) and c["kind"] == "fwd"
        dump = tempfile.mkdtemp(prefix="sc-probe-dump-") if lowering else None
        options = dict(xla_dump_to=dump, xla_dump_hlo_as_text=True, xla_dump_hlo_pass_re=DECOMPOSER) if dump else {}
        try:
            jax.jit(f).lower(*args).compile(compiler_options=options)
            r = dict(status="compiled", error_class=None, error=None)
        except Exception as e:  # the compiler's verdict
            r = dict(status="compile_error", error_class=error_class(str(e)), error=first_line(str(e)))
            if os.environ.get("SC_PROBE_FULL_ERRORS"):
                r["error_full"] = str(e)
        if dump:
            r.update(read_lowering(dump))
            shutil.rmtree(dump)
        print(MARK + json.dumps(r), flush=True)


DECOMPOSER = "sparse-dense-matmul-op-decomposer"
LOWERING_FIELDS = ("lowering", "window_rows", "window_cols", "scratchpad_bytes")


def read_lowering(dump):
    """The compiler's dump of one fwd compile: which lookup it lowered to and, when it compiled
    the activation scatter, that scatter's window.

    lowering  "fused" (each SparseCore deduplicates its ids and scatters inside the compute loop)
              or "scatter" (global deduplication, then a gather and a scatter into the
              activations), read off the HLO after the decomposer pass; null without that dump.
    window_rows, window_cols  the activation scatter's output_window_bounds (compiled scatter only).
    scratchpad_bytes  that window's scratchpad_allocation_size."""
    out = dict(lowering=None, window_rows=None, window_cols=None, scratchpad_bytes=None)
    after = glob.glob(os.path.join(dump, f"*after_{DECOMPOSER}.*"))
    if after:
        with open(after[0]) as f:
            out["lowering"] = "scatter" if "global_unique_mask" in f.read() else "fused"
    final = glob.glob(os.path.join(dump, "*after_optimizations.txt"))
    if final:
        with open(final[0]) as f:
            for line in f:
                if not re.search(r"%activations[.0-9]* = f32\[[^\]]*\]\{[^}]*\} scatter\(", line):
                    continue
                m = re.search(r'"output_window_bounds":\["(\d+)","(\d+)"\].*?"scratchpad_allocation_size":"(\d+)"', line)
                if m:
                    out.update(window_rows=int(m.group(1)), window_cols=int(m.group(2)),
                               scratchpad_bytes=int(m.group(3)))
    return out


def crash_line(log_path):
    """The fatal check of an aborted compile, without its log prefix."""
    with open(log_path, errors="replace") as f:
        for line in f:
            if re.match(r"F\d{4} ", line):
                return first_line(re.sub(r"^F\d{4} [\d:.]+\s+\d+ ", "", line))
    return "compiler process aborted"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="base", choices=sorted(CASE_SETS),
                    help="which built-in cases to compile: base (the first 136 records), fit-2 (the "
                         "cases the wide-row rules were read off), fresh-2, -3 and -4 "
                         "(cases predicted before they were probed)")
    ap.add_argument("--lowering-out", metavar="JSONL",
                    help="with --lowering: write the fwd records with their lowering fields here and "
                         "only the verdict fields to stdout")
    ap.add_argument("--cases", metavar="JSONL",
                    help="compile these cases instead (one object a line with chip, kind, dim and "
                         "optionally batch, max_ids, max_unique, vocab; see case_from_json)")
    ap.add_argument("--full-errors", action="store_true",
                    help="add the compiler's whole error text as error_full (exploration only)")
    ap.add_argument("--lowering", action="store_true",
                    help="also record which lookup the compiler lowered a fwd case to and its "
                         "activation-scatter window (lowering, window_rows, window_cols, "
                         "scratchpad_bytes; see read_lowering), from the compiler's HLO dumps")
    args = ap.parse_args()
    if args.full_errors:
        os.environ["SC_PROBE_FULL_ERRORS"] = "1"
    if args.lowering:
        os.environ["SC_PROBE_LOWERING"] = "1"
    if args.cases:
        with open(args.cases) as f:
            todo = [case_from_json(json.loads(l)) for l in f if l.strip()]
    else:
        todo = CASE_SETS[args.set]()
    log = tempfile.NamedTemporaryFile(prefix="sc-probe-", suffix=".log", delete=False).name
    proc = None
    t0 = time.time()
    for i, c in enumerate(todo):
        if proc is None:
            proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
        proc.stdin.write(json.dumps(c) + "\n")
        proc.stdin.flush()
        r = None
        for line in proc.stdout:
            if line.startswith(MARK):
                r = json.loads(line[len(MARK):])
                break
        if r is None:
            proc.wait()
            proc = None
            r = dict(status="compile_error", error_class="crash", error=crash_line(log))
        c.update(r)
        if args.lowering_out and "lowering" in c:
            with open(args.lowering_out, "a") as f:
                f.write(json.dumps(c) + "\n")
        print(json.dumps({k: v for k, v in c.items() if k not in LOWERING_FIELDS or not args.lowering_out}),
              flush=True)
        print(f"[{i + 1}/{len(todo)} {time.time() - t0:.0f}s] {c['chip']} {c['kind']} dim={c['dim']} "
              f"batch={c['batch']} ids={c['max_ids']}/{c['max_unique']}: {r['error_class'] or 'compiled'}",
              file=sys.stderr, flush=True)
    if proc is not None:
        proc.stdin.close()
        proc.wait()
    os.unlink(log)


def pairs(chip, kind, dim, batch, edges, field="unique", **kw):
    """Cases on both sides of each edge: edges are (last that compiles or stays fused, first that
    does not) in `field` ("unique": max_unique with max_ids equal; "ids": max_ids; "dim")."""
    out = []
    for edge in edges:
        for v in edge:
            if field == "unique":
                out.append(case(chip, kind, dim, batch=batch, ids=kw.get("ids", v), unique=v,
                                vocab=kw.get("vocab", 10000)))
            elif field == "ids":
                out.append(case(chip, kind, dim, batch=batch, ids=v, unique=kw["unique"],
                                vocab=kw.get("vocab", 10000)))
            else:
                out.append(case(chip, kind, v, batch=batch, ids=kw["unique"], unique=kw["unique"],
                                vocab=kw.get("vocab", 10000)))
    return out


def fit_cases():
    """The cases the wide-row rules of sim-sparsecore/src/limits/compile.rs were read off (the
    edges found by bisecting, probed again on both sides). Run with --lowering: at widths where
    the activation scatter fits, only the lowering shows the lookup's switch."""
    out = []
    # The fused lookup's switch in max_unique (max_ids equal), per width class and batch.
    for chip, batch, edges in (
        ("v5p", 32, {8: 16240, 2048: 16144, 4096: 15960, 8192: 15608}),
        ("v5p", 256, {8: 16232, 1024: 16232, 1280: 16144, 2048: 16144, 2304: 15960, 4096: 15960,
                      4352: 15608, 8192: 15608, 10240: 13104, 12288: 10920}),
        ("v5p", 1024, {8: 16224, 2048: 16128, 4096: 15952, 8192: 15592}),
        ("v5p", 4096, {8: 16176, 8192: 15544}),
        ("tpu7x", 32, {8: 15808, 2048: 15776, 4096: 15688, 8192: 15504}),
        ("tpu7x", 256, {8: 15808, 1024: 15808, 1280: 15768, 2048: 15768, 2304: 15680, 4096: 15680,
                        4608: 15496, 8192: 15496, 16384: 15152}),
        ("tpu7x", 1024, {8: 15784, 2048: 15744, 4096: 15656, 8192: 15480}),
        ("v6e", 32, {8: 8104, 2048: 8104, 4096: 8104, 8192: 8056}),
        ("v6e", 256, {8: 8096, 2048: 8096, 4096: 8096, 4608: 8048, 8192: 8048, 16384: 7952,
                      32768: 7776}),
        ("v6e", 1024, {8: 8072, 2048: 8072, 4096: 8072, 8192: 8024}),
        ("v6e", 4096, {8: 7976, 8192: 7928}),
    ):
        for dim, last in edges.items():
            out += pairs(chip, "fwd", dim, batch, [(last, last + 8)])
    out += pairs("v5p", "fwd", 8192, 256, [(15608, 15616)], vocab=1000)
    out += pairs("v5p", "fwd", 8192, 256, [(15608, 15616)], vocab=100000)
    # The switch in max_ids with max_unique kept: the per-id cost of the width term.
    for chip, dim, unique, last in (
        ("v5p", 8192, 15600, 15744), ("v5p", 8192, 15592, 15936), ("v5p", 8192, 15544, 16960),
        ("v5p", 8192, 15480, 18304), ("v5p", 8192, 15352, 21056), ("v5p", 8192, 15096, 26496),
        ("v5p", 8192, 14584, 37440), ("v5p", 2048, 15888, 38400), ("v5p", 4096, 15704, 27008),
        ("tpu7x", 4096, 15424, 37888), ("tpu7x", 8192, 15240, 26752), ("tpu7x", 16384, 14896, 20736),
        ("v6e", 8192, 7920, 19400), ("v6e", 16384, 7824, 13824), ("v6e", 32768, 7648, 10624),
        ("v6e", 4096, 8096, 8208),
        # Up to width 1024 the per-id cost is not linear (the compiler minibatches the ids).
        ("v5p", 8, 16224, 18448), ("v5p", 8, 16216, 19968), ("v5p", 8, 15976, 227328),
        ("tpu7x", 8, 15552, 389248), ("v6e", 8, 7968, 112640),
    ):
        out += pairs(chip, "fwd", dim, 256, [(last, last + 8)], field="ids", unique=unique)
    # The activation scatter's widest width per batch (max_unique on the scatter side).
    for chip, unique, edges in (
        ("v6e", 8192, {512: 2040, 1280: 1168, 1536: 1016, 1792: 960, 2048: 960, 8192: 960,
                       16384: 960}),
        ("v5p", 16384, {2048: 2728, 2560: 2336, 3072: 2040, 3584: 1920, 4096: 1920, 8192: 1920,
                        16384: 1920}),
        ("tpu7x", 16384, {2048: 1360, 2560: 1296, 3072: 1296, 3584: 1296, 4096: 1296, 8192: 1296}),
    ):
        for batch, last in edges.items():
            out += pairs(chip, "fwd", 0, batch, [(last, last + 8)], field="dim", unique=unique)
    for unique in (12000, 16000, 24000):
        out += pairs("v6e", "fwd", 0, 4096, [(960, 968)], field="dim", unique=unique)
    for dim in (1000, 1272, 1280, 1288):  # tpu7x's split window pads 2 L + 36 rows to 16 lanes
        out.append(case("tpu7x", "fwd", dim, batch=4096, ids=16384))
    # Whole-share windows that fill the scratchpad exactly, and their neighbours.
    for chip, batch, dims in (
        ("v5p", 768, (4672, 4680, 4688)), ("v5p", 1280, (3640, 3648)), ("v5p", 2304, (2520,)),
        ("v5p", 128, (7272, 7280)), ("v5p", 320, (6240, 6248)),
        ("tpu7x", 448, (2848, 2856)), ("tpu7x", 1920, (1424, 1440)),
    ):
        for dim in dims:
            out.append(case(chip, "fwd", dim, batch=batch, ids=16384))
    # Compiled scatter windows over widths and batches (their scratchpad sizes, with --lowering).
    for chip, unique in (("v6e", 8192), ("tpu7x", 16384), ("v5p", 16384)):
        for batch in (2048, 8192, 32768):
            for dim in (64, 128, 200, 256, 384, 520, 640, 1000):
                out.append(case(chip, "fwd", dim, batch=batch, ids=unique))
    # E3001: the gathered rows of all SparseCores over 2^31 B.
    for chip, kind, dim, unique in (
        ("v5p", "fwd", 16384, 8192), ("v5p", "fwd", 16384, 8193), ("v5p", "fwd", 16392, 8192),
        ("v5p", "fwd", 16376, 8192), ("v6e", "fwd", 32768, 8200), ("tpu7x", "fwd", 65536, 4096),
        ("tpu7x", "fwd", 65536, 4104), ("v5p", "grad_sgd", 12288, 10920),
        ("v5p", "grad_sgd", 12288, 11000),
    ):
        out.append(case(chip, kind, dim, ids=unique, vocab=1000 if dim == 65536 else 10000))
    out.append(case("v5p", "fwd", 16384, ids=20000, unique=8192))
    # E3001 for grad_sgd widths that are not a multiple of 8 (split factor 1).
    for chip, dim, unique in (
        ("v6e", 100, 600), ("v6e", 100, 800), ("v6e", 100, 1032), ("v6e", 100, 2048),
        ("v6e", 100, 256), ("v6e", 100, 64), ("v6e", 1004, 64), ("v6e", 1004, 128),
        ("v6e", 1004, 256), ("v6e", 500, 256), ("v6e", 500, 512), ("v6e", 204, 1024),
        ("v6e", 108, 1024), ("v6e", 12, 1024), ("v6e", 4, 1024), ("v6e", 36, 1024),
        ("v5p", 100, 1024), ("v5p", 1004, 256), ("tpu7x", 100, 1024), ("tpu7x", 100, 2048),
        ("tpu7x", 100, 4096), ("tpu7x", 1004, 256),
    ):
        out.append(case(chip, "grad_sgd", dim, ids=unique))
    # tpu7x's grad_sgd abort: widths above 1024 that are not a multiple of 16.
    for dim, unique in ((1000, 1024), (1016, 1024), (1024, 1024), (1032, 1024), (1040, 1024),
                        (1048, 1024), (1064, 64), (1528, 1024), (1544, 256), (2008, 1024),
                        (2024, 1024), (3000, 1024), (6008, 1024), (12008, 1024), (13112, 1024),
                        (20008, 1024)):
        out.append(case("tpu7x", "grad_sgd", dim, ids=unique))
    return without(out, cases())


def without(todo, done):
    """`todo` without the cases already in `done`."""
    key = lambda c: json.dumps(c, sort_keys=True)
    seen = {key(c) for c in done}
    return [c for c in todo if key(c) not in seen]


def fresh_cases():
    """Cases chosen after the rules were written, to test them out of sample: widths, batches,
    vocabularies and chips none of fit_cases used. Each pair straddles the edge the rule predicted
    before the compiler was asked (the last value compile_check passes, then the next)."""
    out = []
    # The lookup's switch in max_unique, where the activation scatter cannot take the width.
    for chip, dim, batch, vocab, last in (
        ("v5p", 6144, 512, 10000, 15600), ("v5p", 3000, 8192, 10000, 15840),
        ("v5p", 9000, 256, 10000, 14912),  # E3001 (2^31 B of gathered rows) comes first
        ("tpu7x", 12288, 512, 10000, 15144), ("tpu7x", 3000, 4096, 10000, 15560),
        ("tpu7x", 6000, 128, 10000, 15504),
        ("v6e", 24576, 128, 10000, 7784), ("v6e", 6000, 2048, 10000, 7992),
        ("v6e", 2000, 4096, 10000, 7976), ("v6e", 1024, 2048, 10000, 8040),
        ("v6e", 8192, 256, 500000, 8048), ("v6e", 20000, 256, 10000, 7776),
    ):
        out += pairs(chip, "fwd", dim, batch, [(last, last + 8)], vocab=vocab)
    # The switch in max_ids, max_unique kept below its edge.
    # (The second edge of three is the final rule's; the first the rule's a revision earlier.)
    for chip, dim, batch, unique, last in (
        ("v5p", 6144, 512, 15400, 19968), ("tpu7x", 12288, 512, 14944, 19528),
        ("tpu7x", 12288, 512, 14944, 19520), ("v6e", 24576, 128, 7720, 9168),
        ("v6e", 24576, 128, 7720, 9152), ("v6e", 6000, 2048, 7800, 24744),
        ("v6e", 6000, 2048, 7800, 24832),
    ):
        out += pairs(chip, "fwd", dim, batch, [(last, last + 8)], field="ids", unique=unique)
    # The activation scatter's widest width at new batches (whole share, split, exact fill).
    for chip, unique, batch, last in (
        ("v6e", 8192, 1408, 1088), ("v6e", 8192, 3000, 960), ("v6e", 8192, 100000, 960),
        ("v5p", 16384, 5000, 1920), ("v5p", 16384, 3200, 1984),
        ("tpu7x", 16384, 2112, 1336), ("tpu7x", 16384, 6000, 1296),
        ("v5p", 16384, 1216, 3744), ("v5p", 16384, 1472, 3360), ("tpu7x", 16384, 1824, 1472),
    ):
        out += pairs(chip, "fwd", 0, batch, [(last, last + 8)], field="dim", unique=unique)
    # E3001: gathered rows over 2^31 B (v6e at 20000 wide scatters and fails first).
    out += pairs("v6e", "fwd", 20000, 256, [(13416, 13424)])
    out += pairs("tpu7x", "fwd", 40000, 256, [(6704, 6712)], vocab=1000)
    out += pairs("v5p", "grad_sgd", 12000, 256, [(11184, 11192)])
    # E3001: grad_sgd widths that are not a multiple of 8 (max_unique not a multiple of 8 either).
    out += pairs("v6e", "grad_sgd", 300, 256, [(183, 184)])
    out += pairs("v5p", "grad_sgd", 2001, 256, [(34, 35)])
    out += pairs("tpu7x", "grad_sgd", 77, 256, [(1563, 1564)])
    # tpu7x's grad_sgd abort above 1024 wide (predicted: 1096, 2056 and 4104 abort).
    for chip, dim, unique in (("v5p", 1096, 1024), ("tpu7x", 1096, 1024), ("tpu7x", 1104, 1024),
                              ("tpu7x", 2056, 512), ("tpu7x", 4104, 2048), ("tpu7x", 4112, 2048)):
        out.append(case(chip, "grad_sgd", dim, ids=unique))
    return without(out, cases() + fit_cases())


def fresh3_cases():
    """After fresh-2 showed that the grad_sgd E3001 check rounds max_ids and max_unique up to 8 and
    the width up to 4 (a width that is then a multiple of 8 splits into vectors): cases that test
    that revision, each pair straddling the edge it predicted before the compiler was asked."""
    out = []
    for chip, dim, last in (("v6e", 302, 7104), ("v6e", 306, 176), ("v5p", 1001, 96),
                            ("tpu7x", 45, 13824), ("tpu7x", 1003, 96), ("v6e", 1, 7104)):
        out += pairs(chip, "grad_sgd", dim, 256, [(last, last + 1)])
    out += pairs("v5p", "grad_sgd", 6, 256, [(304256, 304257)], field="ids", unique=8192)
    return without(out, cases() + fit_cases() + fresh_cases())


def fresh4_cases():
    """After fresh-3 showed the unsplit grad_sgd width is the padded width less 4 (not the width
    rounded up to 4): cases that test that revision, pairs straddling its predicted edges."""
    out = []
    for chip, dim, last in (("v6e", 302, 176), ("v6e", 19, 2568), ("v5p", 250, 472),
                            ("tpu7x", 45, 2632), ("tpu7x", 606, 184), ("v6e", 3, 7104)):
        out += pairs(chip, "grad_sgd", dim, 256, [(last, last + 1)])
    out += pairs("v5p", "grad_sgd", 6, 256, [(304296, 304297)], field="ids", unique=8192)
    return without(out, cases() + fit_cases() + fresh_cases() + fresh3_cases())


CASE_SETS = {"base": cases, "fit-2": fit_cases, "fresh-2": fresh_cases, "fresh-3": fresh3_cases,
             "fresh-4": fresh4_cases}

if __name__ == "__main__":
    worker() if sys.argv[1:] == ["--worker"] else main()
