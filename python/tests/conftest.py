"""Shared fixtures: the repository's example data and the release CLI to compare against."""

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "testdata" / "preprocess" / "example"
SPEC = EXAMPLE / "spec.json"
IDS = EXAMPLE / "ids.npz"
IDS_HOT = EXAMPLE / "ids_hot.npz"
LIMITS = ROOT / "testdata" / "limits" / "example"


def cli_path() -> Path:
    return Path(os.environ.get("TPUSIM_CLI", ROOT / "target" / "release" / "tpusim"))


@pytest.fixture(scope="session")
def cli():
    """Runs the tpusim CLI: (exit code, stdout, stderr). Build it first: cargo build --release."""
    path = cli_path()
    if not path.exists():
        pytest.fail(f"{path} not found: run `cargo build --release` first (or set TPUSIM_CLI)")

    def run(*args):
        p = subprocess.run([str(path), *map(str, args)], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    return run


@pytest.fixture(scope="session")
def cli_json(cli):
    """Runs the CLI and parses its stdout as JSON (one document)."""

    def run(*args, code=0):
        c, out, err = cli(*args)
        assert c == code, err
        return json.loads(out)

    return run


def cli_error(stderr: str) -> str:
    """The message after `error: ` on the CLI's stderr."""
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), stderr
    return line[len("error: "):]


def same_json(a, b):
    """Equal as JSON values; NaN (Python) equals null (CLI JSON) and floats compare exactly."""
    if isinstance(a, float) and math.isnan(a):
        return b is None
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b) or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
                                               and not isinstance(a, bool) and not isinstance(b, bool))
