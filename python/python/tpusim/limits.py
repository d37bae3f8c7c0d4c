"""Embedding limits before compiling: ``tpusim limits compile-check`` and ``tpusim limits validate``."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence, Union

from . import _native

__all__ = ["compile_check", "validate"]

PathLike = Union[str, "os.PathLike[str]"]


def compile_check(case: Mapping[str, Any] | str, chip: str) -> dict:
    """Will the XLA TPU compiler accept these limits? One ``compile-check --json`` line.

    ``case`` is ``{"kind": "fwd" | "grad_sgd", "vocab", "dim", "batch", "max_ids", "max_unique"}``
    (one f32 table on one device); the verdict has ``compiles``, ``class``, ``message`` (the
    compiler's, with its numbers) and the largest limits that compile.
    """
    return _native.compile_check(case, chip)


def validate(spec: Mapping[str, Any] | PathLike, chip: str, limits: PathLike | None = None,
             ids: Any = None, fdo: PathLike | None = None) -> dict:
    """The verdict per stack: ``tpusim limits validate --json``.

    ``spec`` as :func:`tpusim.preprocess`; ``limits`` a limits file (JSON/TOML) or ``fdo`` a
    directory of jax-tpu-embedding FDO stats overriding the spec's limits; ``ids`` one batch (a dict
    of numpy arrays or an NPZ path) or a list of them, for the run-time verdicts. ``ok`` is False
    when a check fails (the CLI exits 1 then).
    """
    return _native.validate(spec, chip, limits, fdo, ids)
