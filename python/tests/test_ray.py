"""A Ray sweep on a real multi-process local cluster (head started here, stopped after) equals the
local sweep row for row."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tpusim

ray = pytest.importorskip("ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`ray start --head --num-cpus=2 --block` on 127.0.0.1 in its own process group; SIGTERM stops it
    and the processes it started (and only those)."""
    port = free_port()
    ray_cli = Path(sys.executable).parent / "ray"
    log = open(tmp_path_factory.mktemp("ray") / "head.log", "w")
    # A loopback-only test cluster: no token authentication to set up (Ray 2.5x enables it by default).
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    head = subprocess.Popen(
        [str(ray_cli), "start", "--head", "--block", "--num-cpus=2", f"--port={port}",
         "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if head.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"ray head did not start: see {log.name}")
                time.sleep(0.5)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        log.close()
        # A killed head leaves its address as the machine's "current cluster"; forget ours.
        recorded = Path(os.environ.get("RAY_TMPDIR", "/tmp/ray")) / "ray_current_cluster"
        try:
            if recorded.read_text().strip().endswith(f":{port}"):
                recorded.unlink()
        except OSError:
            pass


GRID = dict(preset="dlrm-small", chip=["v5p", "v6e"], chips=[4, 8], batch=[2048, 4096, 8192], steps=2)


def test_ray_sweep_equals_local_sweep(cluster, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", cluster)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    local = tpusim.sweep(**GRID)
    remote = tpusim.sweep(**GRID, executor="ray", chunk_size=2)
    assert remote == local
    assert len(remote) == 12
    # The tasks ran on the cluster's worker processes, not in this one.
    assert ray.is_initialized()
    assert ray.cluster_resources().get("CPU") == 2.0
    df = tpusim.sweep_frame(**GRID, executor="ray")
    assert df.to_dict("records") == local
