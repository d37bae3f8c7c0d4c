"""tpusim from Python: a cycle-approximate simulator of Google TPU chips.

Numpy arrays and dicts in, dicts, numpy arrays and DataFrames out. Every function mirrors a CLI
command's JSON output field for field (same names, same numbers), because both call the same Rust
library. Errors raise :class:`tpusim.Error` (a ``ValueError``) with the CLI's message.

>>> import tpusim
>>> tpusim.layout("bf16[8,1,1280,16384]", tpu="v5p")["padded_bytes"]
335544320
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping, Sequence, Union

from . import _native
from ._native import Error, LimitExceededError
from . import limits

__all__ = [
    "Error",
    "LimitExceededError",
    "layout",
    "preprocess",
    "limits",
    "op",
    "hlo",
    "run",
    "sensitivity",
    "chips",
    "select",
    "explain",
    "sweep",
    "sweep_frame",
    "sweep_plan",
    "sweep_configs",
    "sweep_write",
    "sweep_answers",
]

PathLike = Union[str, "os.PathLike[str]"]


def layout(shape: str, tpu: str | None = None, index: Sequence[int] | None = None,
           offset: int | None = None) -> dict:
    """Sizes, padding and index maps of one XLA shape: ``tpusim layout --json``.

    ``shape`` is XLA text (``'f32[3,5]{1,0:T(2,2)}'``); ``tpu`` gives a shape without a layout the
    layout the XLA TPU compiler assigns on that chip; ``index`` adds ``linear_index``, ``offset``
    adds ``logical_index`` (None: padding).
    """
    return _native.layout(shape, tpu, None if index is None else list(index), offset)


def preprocess(spec: Mapping[str, Any] | PathLike, ids: Mapping[str, Any] | PathLike,
               stats_only: bool = False) -> dict:
    """SparseCore host preprocessing of one batch, bit-exact with jax-tpu-embedding:
    ``tpusim preprocess --json``.

    ``spec`` is a dict in the preprocess contract (or the path of SPEC.json). ``ids`` maps feature
    names to numpy arrays in the contract's NPZ layout: ``"f"`` dense int32/int64 ``[rows, valency]``,
    or ragged ``"f.values"`` + ``"f.row_splits"`` (or ``{"f": {"values": ..., "row_splits": ...}}``),
    optional ``"f.weights"`` (float32); or the path of an NPZ file. Returns
    ``{"stacks": {name: {...}}}`` with ``row_pointers``, ``embedding_ids``, ``sample_ids`` (int32) and
    ``gains`` (float32, NaN in padding) as numpy arrays, and the statistics as in the CLI.
    A limit exceeded with ``allow_id_dropping`` off raises :class:`LimitExceededError`.
    """
    return _native.preprocess(spec, ids, stats_only)


def op(spec: Mapping[str, Any] | str, chip: str) -> dict:
    """The cost of one op on a chip: ``tpusim op --json``.

    ``spec`` is ``{"op": "matmul", "params": {"M": ..., "K": ..., "N": ..., "dtype": "bfloat16"}}``
    (the compiler calibration schema) or its JSON text.
    """
    return _native.op(spec, chip)


def hlo(text_or_path: Any, chip: str, overrides: Mapping[str, Any] | Sequence[str] | None = None) -> dict:
    """The cost of a JAX program's HLO module on a chip: ``tpusim hlo --json``.

    ``text_or_path`` is HLO text, the path of an HLO text file, or an object with an ``as_text``
    method such as a ``jax.stages.Lowered`` (``jax.jit(f).lower(x)``; its HLO dialect is used).
    ``overrides`` are what-if chip values: ``{"hbm_bytes_per_s": 3.2e12}`` or
    ``["chip.hbm_bytes_per_s=3.2e12"]``.
    """
    origin = "hlo"
    if hasattr(text_or_path, "as_text"):
        try:
            text = text_or_path.as_text(dialect="hlo")
        except TypeError:
            text = text_or_path.as_text()
    elif isinstance(text_or_path, os.PathLike) or (
            isinstance(text_or_path, str) and "\n" not in text_or_path and "HloModule" not in text_or_path):
        origin = os.fspath(text_or_path)
        try:
            with open(origin, "rb") as f:
                data = f.read()
        except OSError as e:
            raise Error(f"reading {origin}: {e.strerror or e}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Error(f"{origin}: not UTF-8 text") from None
    elif isinstance(text_or_path, str):
        text = text_or_path
    else:
        raise Error(f"hlo: expected HLO text, a path or an object with as_text(), got {type(text_or_path).__name__}")
    if overrides is None:
        sets = []
    elif isinstance(overrides, Mapping):
        sets = [f"{k if k.startswith('chip.') else 'chip.' + k}={v if isinstance(v, str) else json.dumps(v)}"
                for k, v in overrides.items()]
    else:
        sets = list(overrides)
    return _native.hlo(text, chip, sets, origin)


def run(workload: PathLike | None = None, preset: str | None = None,
        overrides: Mapping[str, Any] | Sequence[str] | None = None, functional: bool = False, *,
        chip: str | None = None, chips: int | None = None, batch: int | None = None,
        steps: int | None = None, pipelining: str | None = None) -> dict:
    """Simulates training steps: the ``tpusim run --json`` summary.

    ``workload`` is a TOML/JSON workload file, or ``preset`` a built-in one (``dlrm-small``, ...).
    ``overrides`` are the ``--set`` keys: ``{"shuffle_ids": True, "limits.max_ids_per_partition":
    512}``. ``chip``, ``chips``, ``batch``, ``steps``, ``pipelining`` as the CLI's options.
    """
    return _native.run(workload, preset, overrides, functional, chip, chips, batch, steps, pipelining)


def sensitivity(workload: PathLike | None = None, preset: str | None = None,
                overrides: Mapping[str, Any] | Sequence[str] | None = None, *,
                chip: str | None = None, chips: int | None = None, batch: int | None = None,
                steps: int | None = None, pipelining: str | None = None) -> dict:
    """The step time with each assumed constant halved and doubled: ``tpusim run --sensitivity --json``
    (``step_time_us``, ``assumptions`` with each one's halved and doubled step time and swing,
    ``range_us`` with all halved or all doubled together, and the ``dominant`` ones). Arguments as
    :func:`run`."""
    return _native.sensitivity(workload, preset, overrides, chip, chips, batch, steps, pipelining)


def chips(chip: str | None = None, chip_file: PathLike | None = None) -> dict:
    """The chip presets, or one chip (``chip``, a preset) with the overrides of a chip file:
    ``{chip: {field: {"value", "unit", "source"}}}`` with the fields of ``tpusim chips --json``
    (chip values, then step parameters); ``unit`` is ``"bytes"``, ``"bytes/s"``, ``"FLOP/s"`` or
    None where the field's name does not say."""
    return _native.chips(chip, chip_file)


def select(graph: Mapping[str, Any] | PathLike, chip: str = "v5p") -> dict:
    """Kernels, precisions and formats for a small op graph, with the conversions inserted:
    ``tpusim select --json``. ``graph`` is ``{"input": [N, C, H, W], "ops": [{"op": "conv2d",
    "dtype": "float32", "format": "NCHW", "kernel": [3, 3, 64, 64]}, ...]}`` or the path of GRAPH.json."""
    return _native.select(graph, chip)


def explain(view: str, *, preset: str = "balanced", steps: int = 6,
            spec: Mapping[str, Any] | PathLike | None = None,
            ids: Mapping[str, Any] | PathLike | None = None) -> dict:
    """The numbers behind a teaching view: ``tpusim explain VIEW --json``.

    ``view="pipelining"``: ``preset`` run sequential and pipelined for ``steps`` steps (step times,
    speedup, gradient staleness; no picture). ``view="limits"``: one batch ``ids`` counted per
    partition against the limits of ``spec`` (as :func:`preprocess` takes them).
    """
    if view == "pipelining":
        return _native.explain_pipelining(preset, steps)
    if view == "limits":
        if spec is None or ids is None:
            raise Error("explain('limits') needs spec and ids")
        return _native.explain_limits(spec, ids)
    raise Error(f"explain: '{view}', expected 'pipelining' or 'limits'")


def sweep_plan(workload: PathLike | None = None, preset: str | None = None, chip: Sequence[str] | str = (),
               chips: Sequence[int] | int = (), batch: Sequence[int] | int | str = (),
               limits: PathLike | None = None, steps: int = 4,
               overrides: Mapping[str, Any] | Sequence[str] | None = None,
               prices: Mapping[str, float] | None = None, target: float | None = None) -> str:
    """The plan of a sweep (JSON text): the workload and every configuration in a fixed order.
    Pass it with configuration indices to :func:`sweep_configs`, anywhere ``tpusim`` is installed.
    ``prices`` (USD per chip-hour, >= 0, keys v4, v5e, v5p, v6e, tpu7x) and ``target`` (samples/s)
    are ``--price`` and ``--target``."""
    return _native.sweep_plan(workload, preset, _seq(chip), _seq(chips), _batches(batch), limits, steps,
                              overrides, target, None if prices is None else dict(prices))


def sweep_configs(plan: str, indices: Iterable[int], jobs: int | None = None) -> list[dict]:
    """Simulates configurations ``indices`` of a plan (the per-configuration function Ray tasks
    call); one row of ``sweep.json`` per index, in the order given. ``jobs`` threads (None: all cores)."""
    return _native.sweep_configs(plan, list(indices), jobs)


def sweep_write(plan: str, rows: Sequence[Mapping[str, Any]], output: PathLike) -> str:
    """Writes ``sweep.csv``, ``sweep.json`` and the plots of ``tpusim sweep -o OUTPUT`` for the rows
    of a sweep; returns the answers the CLI prints (largest batch that fits each configuration)."""
    return _native.sweep_write(plan, list(rows), output)


def sweep_answers(plan: str, rows: Sequence[Mapping[str, Any]]) -> dict:
    """The answers of a sweep, as ``tpusim sweep --json`` prints them under ``answers``:
    ``best_throughput_that_fits`` per chip and chip count (the batch it needs), ``largest_batch_that_fits``,
    ``cheapest`` (the cheapest fitting configuration reaching the plan's target, with its ``limits``)
    and ``prices`` (per chip-hour, with ``currency`` and ``source``)."""
    return _native.sweep_answers(plan, list(rows))


def sweep(workload: PathLike | None = None, preset: str | None = None, chip: Sequence[str] | str = (),
          chips: Sequence[int] | int = (), batch: Sequence[int] | int | str = (),
          limits: PathLike | None = None, executor: str | None = None, *, steps: int = 4,
          overrides: Mapping[str, Any] | Sequence[str] | None = None, jobs: int | None = None,
          chunk_size: int | None = None, output: PathLike | None = None,
          prices: Mapping[str, float] | None = None, target: float | None = None) -> list[dict]:
    """A capacity sweep over ``chip`` x ``chips`` x ``batch``: the rows of ``tpusim sweep``'s
    ``sweep.json`` (chip, chips, batch, step_time_us, samples_per_s, fits, bottleneck,
    needed_max_ids, needed_max_unique_ids, cost_per_hour, error, fit_reasons, minibatches_per_step,
    limits, price_per_chip_hour, currency, price_source), in configuration order.

    ``batch`` is a list, an int or ``"4096..65536x2"``; ``prices`` per chip-hour (USD) override the
    assumed ones in ``cost_per_hour`` (``--price``); ``target`` samples/s is ``--target`` (drawn on
    the chart ``output`` writes; :func:`sweep_frame` puts the answers, with the cheapest configuration
    reaching it, in ``df.attrs["answers"]``); ``overrides`` are ``--set`` keys for every configuration. ``executor=None`` runs on this machine's
    cores (``jobs`` threads); ``executor="ray"`` runs each chunk of ``chunk_size`` configurations as
    a Ray task on the cluster ``ray.init(address="auto")`` (or ``RAY_ADDRESS``) finds, else on a local
    one. Both give the same rows in the same order. ``output`` also writes the CLI's files there.
    """
    return _sweep(workload, preset, chip, chips, batch, limits, executor, steps=steps, overrides=overrides,
                  jobs=jobs, chunk_size=chunk_size, output=output, prices=prices, target=target)[1]


def _sweep(workload, preset, chip, chips, batch, limits, executor, *, steps, overrides, jobs, chunk_size, output,
           prices, target) -> tuple[str, list[dict]]:
    plan = sweep_plan(workload, preset, chip, chips, batch, limits, steps, overrides, prices, target)
    n = _native.sweep_len(plan)
    if executor is None or executor == "local":
        rows = sweep_configs(plan, range(n), jobs)
    elif executor == "ray":
        from . import _ray

        rows = _ray.run_plan(plan, n, chunk_size)
    else:
        raise Error(f"executor: '{executor}', expected None, 'local' or 'ray'")
    if output is not None:
        sweep_write(plan, rows, output)
    return plan, rows


def sweep_frame(workload: PathLike | None = None, preset: str | None = None, chip: Sequence[str] | str = (),
                chips: Sequence[int] | int = (), batch: Sequence[int] | int | str = (),
                limits: PathLike | None = None, executor: str | None = None, *, steps: int = 4,
                overrides: Mapping[str, Any] | Sequence[str] | None = None, jobs: int | None = None,
                chunk_size: int | None = None, output: PathLike | None = None,
                prices: Mapping[str, float] | None = None, target: float | None = None):
    """:func:`sweep` as a pandas DataFrame (one row per configuration; needs pandas), with the
    answers of :func:`sweep_answers` in ``df.attrs["answers"]``."""
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("tpusim.sweep_frame needs pandas: pip install pandas") from e
    plan, rows = _sweep(workload, preset, chip, chips, batch, limits, executor, steps=steps, overrides=overrides,
                        jobs=jobs, chunk_size=chunk_size, output=output, prices=prices, target=target)
    columns = list(rows[0].keys()) if rows else None
    df = pd.DataFrame(rows, columns=columns)
    df.attrs["answers"] = sweep_answers(plan, rows)
    return df


def _seq(x: Any) -> Any:
    if isinstance(x, (str, int)):
        return x
    return list(x)


def _batches(x: Any) -> Any:
    if isinstance(x, (str, int)):
        return x
    return [int(b) for b in x]
