"""Rack-aware placement on a local cluster (issue 29): `cluster up --racks a,b,c` gives
six brokers two to a rack; an RF 3 topic's partitions each span the three racks (as
ZooKeeper holds the assignment), so losing a whole rack (both its brokers, SIGKILL)
leaves every partition a leader and acks=all produce/consume works; the killed brokers
come back with their rack. Racks show in `cluster status` and `topics describe`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import wait_until
from tools.cluster.state import ClusterState, process_alive

pytestmark = pytest.mark.integration

RACKS = ["a", "b", "c"]
TOPIC = "racked"


def rack_of(broker_id: int) -> str:
    return RACKS[(broker_id - 1) % len(RACKS)]


CLI = Callable[..., str]


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CLI]:
    directory: Path = tmp_path_factory.mktemp("racks") / "cluster"
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(directory)}

    def run(*args: str, stdin: str | None = None, check: bool = True) -> str:
        result = subprocess.run(
            [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())"]
            + list(args),
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        if check:
            assert result.returncode == 0, (args, result.stdout, result.stderr)
            return result.stdout
        return f"exit {result.returncode}: {result.stdout}{result.stderr}"

    pids: list[int] = []
    try:
        run(
            "cluster",
            "up",
            "--brokers",
            "6",
            "--controllers",
            "1",
            "--base-port",
            "0",
            "--racks",
            ",".join(RACKS),
            "--override",
            "zookeeper.session.timeout.ms=4000",
            "--override",
            "replica.lag.time.max.ms=3000",
        )
        pids += [p.pid for p in ClusterState.load(directory).processes if p.pid]
        yield run
        pids += [p.pid for p in ClusterState.load(directory).processes if p.pid]
    finally:
        run("cluster", "down", check=False)
    assert not [pid for pid in pids if process_alive(pid)]  # nothing left behind


def status(cli: CLI) -> dict:
    return json.loads(cli("cluster", "status", "--json"))


def partitions(cli: CLI, topic: str) -> dict[int, dict]:
    return {p["partition"]: p for p in status(cli)["partition_states"] if p["topic"] == topic}


def test_brokers_register_with_their_racks(cli: CLI) -> None:
    brokers = [p for p in status(cli)["processes"] if p["role"] == "broker"]
    assert {p["id"]: p["rack"] for p in brokers} == {b: rack_of(b) for b in range(1, 7)}
    assert all(p["registered"] for p in brokers)
    assert "rack a" in cli("cluster", "status")
    # Racks belong to the cluster as it was made: other racks are refused, not ignored.
    refused = cli("cluster", "up", "--racks", "x,y", check=False)
    assert refused.startswith("exit 1") and "has racks" in refused, refused


def test_rf3_partitions_span_all_racks_and_survive_a_rack_failure(cli: CLI) -> None:
    cli(
        "topics",
        "create",
        TOPIC,
        "--partitions",
        "12",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
    )
    layout = partitions(cli, TOPIC)
    assert sorted(layout) == list(range(12))
    for p in layout.values():
        assert {rack_of(b) for b in p["replicas"]} == set(RACKS), p
    described = cli("topics", "describe", TOPIC)
    assert described.count("\tRacks: ") == 12
    as_json = json.loads(cli("topics", "describe", TOPIC, "--json"))[0]
    for p in as_json["partitions"]:
        assert p["replica_racks"] == [rack_of(b) for b in p["replicas"]]

    # Rack "a" goes away at once: brokers 1 and 4.
    for broker in (1, 4):
        cli("cluster", "kill", str(broker))

    def led_elsewhere() -> bool:
        states = partitions(cli, TOPIC)
        return all(p["leader"] not in (-1, 1, 4) for p in states.values())

    wait_until(led_elsewhere, 60, 0.5)
    records = "".join(f"r{i}\n" for i in range(30))
    cli("produce", TOPIC, "--acks", "all", stdin=records)
    consumed = cli(
        "consume", TOPIC, "--from-beginning", "--max-messages", "30", "--timeout-ms", "20000"
    )
    assert sorted(consumed.split()) == sorted(f"r{i}" for i in range(30))

    for broker in (1, 4):
        cli("cluster", "start", str(broker))
    brokers = {p["id"]: p for p in status(cli)["processes"] if p["role"] == "broker"}
    assert brokers[1]["registered"] and brokers[1]["rack"] == "a"
    assert brokers[4]["registered"] and brokers[4]["rack"] == "a"


def test_disable_rack_aware_still_creates(cli: CLI) -> None:
    cli(
        "topics",
        "create",
        "unracked",
        "--partitions",
        "6",
        "--replication-factor",
        "2",
        "--disable-rack-aware",
    )
    layout = partitions(cli, "unracked")
    assert sorted(layout) == list(range(6))
    assert all(len(set(p["replicas"])) == 2 for p in layout.values())


def test_added_partitions_span_all_racks_too(cli: CLI) -> None:
    cli("topics", "alter", TOPIC, "--partitions", "18")
    layout = partitions(cli, TOPIC)
    assert sorted(layout) == list(range(18))
    for p in layout.values():
        assert {rack_of(b) for b in p["replicas"]} == set(RACKS), p
