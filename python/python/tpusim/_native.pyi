"""Type stubs of the extension module (the Rust side of tpusim's Python package)."""

import os
from typing import Any, Mapping, Sequence, Union

PathLike = Union[str, os.PathLike[str]]

class Error(ValueError):
    """A tpusim error: bad input or usage, with the message the tpusim CLI prints."""

class LimitExceededError(Error):
    """A preprocessing limit is exceeded with allow_id_dropping off."""

def layout(shape: str, tpu: str | None = ..., index: Sequence[int] | None = ..., offset: int | None = ...) -> dict[str, Any]: ...
def preprocess(spec: Mapping[str, Any] | PathLike, ids: Mapping[str, Any] | PathLike, stats_only: bool = ...) -> dict[str, Any]: ...
def compile_check(case: Mapping[str, Any] | str, chip: str) -> dict[str, Any]: ...
def validate(
    spec: Mapping[str, Any] | PathLike,
    chip: str,
    limits: PathLike | None = ...,
    fdo: PathLike | None = ...,
    ids: Any = ...,
) -> dict[str, Any]: ...
def op(spec: Mapping[str, Any] | str, chip: str) -> dict[str, Any]: ...
def hlo(text: str, chip: str, sets: Sequence[str] = ..., origin: str = ...) -> dict[str, Any]: ...
def run(
    workload: PathLike | None = ...,
    preset: str | None = ...,
    overrides: Mapping[str, Any] | Sequence[str] | None = ...,
    functional: bool = ...,
    chip: str | None = ...,
    chips: int | None = ...,
    batch: int | None = ...,
    steps: int | None = ...,
    pipelining: str | None = ...,
) -> dict[str, Any]: ...
def sweep_plan(
    workload: PathLike | None = ...,
    preset: str | None = ...,
    chip: Sequence[str] | str | None = ...,
    chips: Sequence[int] | int | None = ...,
    batch: Sequence[int] | int | str | None = ...,
    limits: PathLike | None = ...,
    steps: int = ...,
    overrides: Mapping[str, Any] | Sequence[str] | None = ...,
    target: float | None = ...,
    prices: Mapping[str, float] | None = ...,
) -> str: ...
def sweep_len(plan: str) -> int: ...
def sweep_configs(plan: str, indices: Sequence[int], jobs: int | None = ...) -> list[dict[str, Any]]: ...
def sweep_write(plan: str, points: Sequence[Mapping[str, Any]], output: PathLike) -> str: ...
def sweep_answers(plan: str, points: Sequence[Mapping[str, Any]]) -> dict[str, Any]: ...
