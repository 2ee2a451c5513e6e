"""`make run` (scripts/demo.sh) does what the README's Quickstart says, twice in a row.

A real local cluster (ZooKeeper, 2 controllers, 3 brokers) is started in a temporary
directory through `$TRIBUTARY_CLUSTER_DIR`, and stopped at the end by the pids recorded
in it (`tributary cluster down`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.cluster.state import ClusterState

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scripts" / "demo.sh"


def demo(env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(DEMO)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def tributary(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# Starts a real cluster and runs the demo twice: about 30 s on a 2-core machine
# (most of it is the ~12 CLI processes' start-up); the only end-to-end check of `make run`.
@pytest.mark.timeout(600)
def test_make_run_starts_a_cluster_round_trips_records_and_is_idempotent(tmp_path):
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(tmp_path / "cluster")}
    try:
        first = demo(env)
        assert first.returncode == 0, first.stdout + first.stderr
        out = first.stdout
        assert "cluster up: 3 broker(s), 2 controller(s)" in out
        assert re.search(
            r"Topic: demo\s+TopicId: [A-Za-z0-9_-]{22}\s+PartitionCount: 6\s+ReplicationFactor: 3",
            out,
        )
        consumed = re.findall(r"partition (\d) +offset +\d+ +(user-\d)", out)
        assert len(consumed) == 8  # every record produced came back
        partitions_of = {}
        for partition, key in consumed:
            partitions_of.setdefault(key, set()).add(partition)
        assert all(len(p) == 1 for p in partitions_of.values())  # keyed: one partition each
        assert "tributary cluster kill" in out and "tributary cluster down" in out

        second = demo(env)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "cluster already running" in second.stdout
        assert "topic demo exists: reusing it" in second.stdout
        assert len(re.findall(r"partition \d +offset", second.stdout)) == 8  # this run's 8
    finally:
        tributary(env, "cluster", "down")
    state = ClusterState.load(tmp_path / "cluster")
    assert state is not None and all(p.pid is None for p in state.processes)


def test_a_failing_step_is_one_line_naming_it(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("in the way\n")
    result = demo({**os.environ, "TRIBUTARY_CLUSTER_DIR": str(not_a_dir / "cluster")}, 120)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("make run: starting the cluster (tributary cluster up) failed:")
