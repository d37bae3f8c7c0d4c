#!/usr/bin/env python3
"""Golden cases for tpusim's preprocessing, computed by the real jax-tpu-embedding 0.1.0 on CPU.

Run (outside the repo's tests; the tests only read the output):
  python3 -m venv /tmp/jte && /tmp/jte/bin/pip install jax jaxlib 'jax-tpu-embedding==0.1.0'
  /tmp/jte/bin/python tools/golden-preprocess/generate.py --count 120 --seed 1
writes testdata/preprocess/golden/cases.jsonl.gz: one case per line with the contract's spec, the ids
(inline), and what the library returned (or that it aborted on a limit).
Each case runs in a subprocess: a limit violation without id dropping aborts the process (SIGABRT).
"""
import argparse
import dataclasses
import gzip
import json
import os
import random
import subprocess
import sys

import numpy as np


def random_case(rng):
    nsc = rng.choice([2, 4])  # jax-tpu-embedding 0.1.0 rejects 1
    g = rng.choice([1, 1, 2, 4])
    while not (nsc * g) & (nsc * g - 1) == 0:
        g = 1
    l = rng.choice([1, g]) if g <= 2 else 1
    n_tables = rng.choice([1, 1, 2, 3])
    combiner = rng.choice(["sum", "mean", "sqrtn"])
    num_scs = nsc * g
    tables = []
    for t in range(n_tables):
        lim = rng.choice([2, 4, 8, 16, 64, 256])
        tables.append({
            "name": f"t{t}", "vocabulary_size": rng.choice([8, 16, 40, 100, 1000]),
            "embedding_dim": rng.choice([4, 8, 12, 16]), "combiner": combiner,
            "max_ids_per_partition": lim, "max_unique_ids_per_partition": max(1, lim // rng.choice([1, 2])),
            "suggested_coo_buffer_size_per_device": None,
        })
    stacks = []
    if n_tables >= 2 and rng.random() < 0.6:
        stacks = [[t["name"] for t in tables[:2]]]
    rows = l * nsc * rng.choice([1, 2, 4])
    features = []
    for i in range(max(n_tables, rng.choice([1, 2, 3]))):
        t = tables[i] if i < n_tables else rng.choice(tables)
        features.append({"name": f"f{i}", "table": t["name"], "input_shape": [rows, rng.choice([1, 3, 4, 8])]})
    spec = {
        "num_sc_per_device": nsc, "local_device_count": l, "global_device_count": g,
        "allow_id_dropping": rng.random() < 0.4, "enable_minibatching": rng.random() < 0.3,
        "tables": tables, "features": features, "stacks": stacks, "stack_limits": {},
    }
    if stacks:
        name = "_".join(stacks[0])
        lim = rng.choice([4, 16, 256])
        spec["stack_limits"][name] = {"max_ids_per_partition": lim, "max_unique_ids_per_partition": lim}
    elif rng.random() < 0.2:
        t = tables[0]
        t["suggested_coo_buffer_size_per_device"] = rng.choice([8, 64, 128])
    ragged = rng.random() < 0.4
    weighted = rng.random() < 0.5
    ids = {}
    for f in features:
        t = next(x for x in tables if x["name"] == f["table"])
        n, v = f["input_shape"]
        hot = rng.random() < 0.5
        def one():
            return rng.randrange(min(4, t["vocabulary_size"])) if hot and rng.random() < 0.6 else rng.randrange(t["vocabulary_size"])
        if ragged:
            lens = [rng.randint(0 if rng.random() < 0.2 else 1, v) for _ in range(n)]
            vals = [one() for _ in range(sum(lens))]
            splits = [0]
            for x in lens:
                splits.append(splits[-1] + x)
            ids[f["name"]] = {"values": vals, "row_splits": splits}
        else:
            ids[f["name"]] = {"dense": [[one() for _ in range(v)] for _ in range(n)]}
        if weighted:
            k = len(ids[f["name"]]["values"]) if ragged else n * v
            ids[f["name"]]["weights"] = [rng.choice([0.5, 1.0, 2.0, 3.0, 0.25]) for _ in range(k)]
    return {"spec": spec, "ids": ids}


def run_library(case):
    """Runs in a subprocess: prints the library's result as JSON."""
    from jax_tpu_embedding.sparsecore.lib.nn import embedding, embedding_spec, table_stacking
    from jax_tpu_embedding.sparsecore.lib.core import pybind_input_preprocessing as pp
    spec, ids = case["spec"], case["ids"]
    nsc, l, g = spec["num_sc_per_device"], spec["local_device_count"], spec["global_device_count"]
    tables = {}
    for t in spec["tables"]:
        tables[t["name"]] = embedding_spec.TableSpec(
            vocabulary_size=t["vocabulary_size"], embedding_dim=t["embedding_dim"],
            initializer=lambda: None, optimizer=embedding_spec.SGDOptimizerSpec(learning_rate=0.1),
            combiner=t["combiner"], name=t["name"], max_ids_per_partition=t["max_ids_per_partition"],
            max_unique_ids_per_partition=t["max_unique_ids_per_partition"],
            suggested_coo_buffer_size_per_device=t["suggested_coo_buffer_size_per_device"])
    feats = []
    for f in spec["features"]:
        n, v = f["input_shape"]
        feats.append(embedding_spec.FeatureSpec(table_spec=tables[f["table"]], input_shape=[n * g // l, v],
                                                output_shape=[n * g // l, tables[f["table"]].embedding_dim],
                                                name=f["name"]))
    for group in spec["stacks"]:
        name = "_".join(group)
        lim = spec["stack_limits"].get(name, {})
        table_stacking.stack_tables(
            feats, group, global_device_count=g, num_sc_per_device=nsc,
            stack_to_max_ids_per_partition=lambda s, b: lim.get("max_ids_per_partition", 256),
            stack_to_max_unique_ids_per_partition=lambda s, b: lim.get("max_unique_ids_per_partition", 256))
    embedding.prepare_feature_specs_for_training(feats, global_device_count=g, num_sc_per_device=nsc)
    arrays, weights = [], []
    for f in spec["features"]:
        x = ids[f["name"]]
        if "dense" in x:
            a = np.array(x["dense"], dtype=np.int32)
            w = np.array(x["weights"], np.float32).reshape(a.shape) if "weights" in x else np.ones_like(a, np.float32)
        else:
            splits = x["row_splits"]
            a = np.array([np.array(x["values"][splits[i]:splits[i + 1]], dtype=np.int32)
                          for i in range(len(splits) - 1)], dtype=object)
            wv = x.get("weights")
            w = np.array([np.array(wv[splits[i]:splits[i + 1]] if wv else [1.0] * (splits[i + 1] - splits[i]),
                                   dtype=np.float32) for i in range(len(splits) - 1)], dtype=object)
        arrays.append(a)
        weights.append(w)
    rp, eids, sids, gains, nmb, stats = pp.preprocess_sparse_dense_matmul_input(
        arrays, weights, feats, local_device_count=l, global_device_count=g, num_sc_per_device=nsc,
        allow_id_dropping=spec["allow_id_dropping"], enable_minibatching=spec["enable_minibatching"])
    out = {}
    for k in rp:
        out[k] = {
            "row_pointers": np.asarray(rp[k]).reshape(-1).tolist(),
            "embedding_ids": np.asarray(eids[k]).reshape(-1).tolist(),
            "sample_ids": np.asarray(sids[k]).reshape(-1).tolist(),
            "gains_bits": np.asarray(gains[k], dtype=np.float32).reshape(-1).view(np.uint32).tolist(),
            "num_minibatches": int(nmb[k]) if not isinstance(nmb, int) else nmb,
            "max_ids_per_partition": np.asarray(stats.max_ids_per_partition[k]).reshape(-1).tolist(),
            "max_unique_ids_per_partition": np.asarray(stats.max_unique_ids_per_partition[k]).reshape(-1).tolist(),
            "required_buffer_sizes": np.asarray(stats.required_buffer_sizes[k]).reshape(-1).tolist(),
            "dropped_id_count": int(stats.dropped_id_count[k]) if k in stats.dropped_id_count else 0,
        }
    print(json.dumps(out))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        run_library(json.load(sys.stdin))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="testdata/preprocess/golden/cases.jsonl.gz")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    written = aborted = failed = 0
    with gzip.open(args.out, "wt") as out:
        while written < args.count:
            case = random_case(rng)
            p = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(case), capture_output=True,
                               text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
            if p.returncode == 0:
                case["expected"] = json.loads(p.stdout.strip().splitlines()[-1])
            elif p.returncode in (-6, 134) and "is greater than the set max" in p.stderr:
                case["expected"] = {"abort": True}
                aborted += 1
            else:
                failed += 1
                print("library error:", p.stderr.strip().splitlines()[-1:], file=sys.stderr)
                continue
            out.write(json.dumps(case) + "\n")
            written += 1
    print(f"wrote {written} cases ({aborted} aborts), {failed} rejected by the library", file=sys.stderr)


if __name__ == "__main__":
    main()
