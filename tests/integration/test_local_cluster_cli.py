"""The local-cluster story through the CLI (issue: Local cluster): `cluster up`, produce,
consume, `cluster kill` the leader, `status` shows the under-replicated partition and
the new leader, `cluster start`, the ISR is full again, `cluster down` leaves no process
behind (checked by pid). The broker `cluster start` brings back runs with the overrides
`cluster up` was given (its properties file is written again from the saved state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from server_common.properties import read_properties
from tests.integration.helpers import wait_until
from tools.cluster.state import ClusterState, process_alive

pytestmark = pytest.mark.integration


def test_kill_a_leader_watch_status_and_bring_it_back(tmp_path):
    env = {
        **os.environ,
        "TRIBUTARY_CLUSTER_DIR": str(tmp_path / "cluster"),
    }

    def cli(*args, stdin=None):
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from tools.cli import main; sys.exit(main())",
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def status():
        return json.loads(cli("cluster", "status", "--json"))

    try:
        cli(
            "cluster",
            "up",
            "--brokers",
            "3",
            "--controllers",
            "2",
            "--base-port",
            "0",
            "--override",
            "zookeeper.session.timeout.ms=4000",
            "--override",
            "replica.lag.time.max.ms=3000",
        )
        pids = [p.pid for p in ClusterState.load(tmp_path / "cluster").processes]

        def properties(broker_id: int) -> dict[str, str]:
            broker = ClusterState.load(tmp_path / "cluster").find("broker", broker_id)
            return read_properties(broker.config_path)

        made = {b: properties(b) for b in (1, 2, 3)}
        assert made[1]["zookeeper.session.timeout.ms"] == "4000"
        cli(
            "topics",
            "create",
            "story",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
        )
        cli("produce", "story", "--acks", "all", stdin="".join(f"r{i}\n" for i in range(30)))
        consumed = cli(
            "consume", "story", "--from-beginning", "--max-messages", "30", "--timeout-ms", "10000"
        )
        assert sorted(consumed.split()) == sorted(f"r{i}" for i in range(30))

        before = {(p["topic"], p["partition"]): p for p in status()["partition_states"]}
        leader = before[("story", 0)]["leader"]
        cli("cluster", "kill", str(leader))

        def moved():
            s = status()
            states = {(p["topic"], p["partition"]): p for p in s["partition_states"]}
            if states[("story", 0)]["leader"] in (leader, -1):
                return None
            return s

        after = wait_until(moved, 30, 0.5)
        assert "story-0" in after["under_replicated_partitions"]
        text = cli("cluster", "status")
        assert "under-replicated: story-0" in text
        new_leader = {(p["topic"], p["partition"]): p for p in after["partition_states"]}[
            ("story", 0)
        ]["leader"]
        assert f"broker {new_leader} leads" in text
        # Produce and consume still work with one broker down (ISR 2 >= min ISR 2).
        cli("produce", "story", "--acks", "all", stdin="after-kill\n")

        cli("cluster", "start", str(leader))
        assert properties(leader) == made[leader]  # the overrides too
        wait_until(lambda: not status()["under_replicated_partitions"], 30, 0.5)
        consumed = cli(
            "consume", "story", "--from-beginning", "--max-messages", "31", "--timeout-ms", "10000"
        )
        assert "after-kill" in consumed.split()
        pids += [p.pid for p in ClusterState.load(tmp_path / "cluster").processes]
    finally:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from tools.cli import main; sys.exit(main())",
                "cluster",
                "down",
            ],
            env=env,
            capture_output=True,
            timeout=120,
        )
    assert not [pid for pid in pids if process_alive(pid)]  # nothing left behind
