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

Needs a Python venv with jax 0.10.2, jaxlib 0.10.2, libtpu 0.0.52 and jax-tpu-embedding 0.1.0
(other versions may give other verdicts). Run from anywhere:

    python tools/sc-window-probe/probe.py > testdata/limits/window_probes.jsonl

Each case is compiled in a worker process; the compiler aborts on some inputs (tpu7x grad_sgd
widths that are not a multiple of 16), which is recorded as error_class "crash" and the worker
is restarted. Progress goes to stderr.
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
                    help="which built-in cases to compile (default: base, the first 136 records)")
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
        print(json.dumps(c), flush=True)
        print(f"[{i + 1}/{len(todo)} {time.time() - t0:.0f}s] {c['chip']} {c['kind']} dim={c['dim']} "
              f"batch={c['batch']} ids={c['max_ids']}/{c['max_unique']}: {r['error_class'] or 'compiled'}",
              file=sys.stderr, flush=True)
    if proc is not None:
        proc.stdin.close()
        proc.wait()
    os.unlink(log)


CASE_SETS = {"base": cases}

if __name__ == "__main__":
    worker() if sys.argv[1:] == ["--worker"] else main()
