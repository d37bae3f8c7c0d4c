"""The Ray executor of :func:`tpusim.sweep`: each chunk of configurations is one Ray task calling
:func:`tpusim.sweep_configs` on the plan; results come back in configuration order."""

from __future__ import annotations

import math
import os
import socket


def _run_chunk(plan: str, indices: list) -> list:
    # Runs on a Ray worker: one thread per task, Ray schedules one task per CPU.
    from tpusim import sweep_configs

    return sweep_configs(plan, indices, jobs=1)


def _recorded_cluster_reachable() -> bool:
    """Whether the cluster `ray start` recorded on this machine answers. A head that was killed leaves
    its address behind, and `ray.init(address="auto")` would wait for it instead of failing."""
    path = os.path.join(os.environ.get("RAY_TMPDIR", "/tmp/ray"), "ray_current_cluster")
    try:
        with open(path) as f:
            host, _, port = f.read().strip().rpartition(":")
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except (OSError, ValueError):
        return False


def connect() -> None:
    """Connects to the running cluster (``RAY_ADDRESS``, or ``address="auto"``), else starts a local one."""
    import ray

    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    if not address and _recorded_cluster_reachable():
        address = "auto"
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
            return
    except ConnectionError:
        if os.environ.get("RAY_ADDRESS"):
            raise
    # A single-machine cluster on the loopback address: the detected node address may not be
    # reachable from this host (containers, VPNs).
    ray.init(log_to_driver=False, _node_ip_address="127.0.0.1")


def run_plan(plan: str, n: int, chunk_size: int | None = None) -> list:
    """All ``n`` configurations of ``plan`` as Ray tasks; rows in configuration order."""
    import ray

    connect()
    if chunk_size is None:
        # About four tasks per CPU: balances uneven configurations without per-task overhead dominating.
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        chunk_size = max(1, math.ceil(n / (4 * cpus)))
    if chunk_size < 1:
        raise ValueError(f"chunk_size: {chunk_size}, must be at least 1")
    task = ray.remote(num_cpus=1)(_run_chunk)
    plan_ref = ray.put(plan)
    chunks = [list(range(i, min(i + chunk_size, n))) for i in range(0, n, chunk_size)]
    results = ray.get([task.remote(plan_ref, c) for c in chunks])
    return [row for chunk in results for row in chunk]
