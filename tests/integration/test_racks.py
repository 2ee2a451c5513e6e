"""Rack-aware placement on a local cluster (issue 29): `cluster up --racks a,b,c` gives
six brokers two to a rack; an RF 3 topic's partitions each span the three racks (as
ZooKeeper holds the assignment), so losing a whole rack (both its brokers, SIGKILL)
leaves every partition a leader and acks=all produce/consume works; the killed brokers
come back with their rack. Racks show in `cluster status` and `topics describe`.

KIP-392 on the same cluster (its brokers run the rack-aware `replica.selector.class`):
a Tributary consumer (`consume --consumer-props client.rack=b`) and a confluent-kafka
consumer (`client.rack=b`) read an RF 3 topic from its rack-b replicas (the brokers'
/metrics count the consumer bytes they served as followers; the leaders off rack b
serve none, they answer preferred_read_replica); without a rack, the leaders serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import wait_until
from tools.cluster.state import ClusterState, process_alive

pytestmark = pytest.mark.integration

RACKS = ["a", "b", "c"]
TOPIC = "racked"
NEARBY = "nearby"  # the KIP-392 tests' topic
NEARBY_RECORDS = [f"n{i}" for i in range(600)]
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
# The cluster's broker settings (`cluster up` again restarts stopped brokers with them;
# `cluster start` would restart one with the launcher's defaults only).
OVERRIDES = [
    "--override",
    "zookeeper.session.timeout.ms=4000",
    "--override",
    "replica.lag.time.max.ms=3000",
    "--override",
    f"replica.selector.class={RACK_AWARE}",
]


def rack_of(broker_id: int) -> str:
    return RACKS[(broker_id - 1) % len(RACKS)]


CLI = Callable[..., str]


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("racks") / "cluster"


@pytest.fixture(scope="module")
def cli(directory: Path) -> Iterator[CLI]:
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
            *OVERRIDES,
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

    cli("cluster", "up", *OVERRIDES)  # brings exactly the killed brokers back
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


# --- KIP-392: fetch from the closest replica ------------------------------------------


def consumer_bytes(directory: Path) -> dict[tuple[int, str], float]:
    """consumer_fetch_bytes_total per (broker, role) from every broker's /metrics."""
    state = ClusterState.load(directory)
    assert state is not None
    values: dict[tuple[int, str], float] = {}
    for broker in state.brokers():
        url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            for line in response.read().decode().splitlines():
                if "consumer_fetch_bytes_total{" not in line or line.startswith("#"):
                    continue
                key, value = line.rsplit(" ", 1)
                role = "follower" if 'role="follower"' in key else "leader"
                values[(broker.id, role)] = float(value)
    return values


def served(before: dict, after: dict, brokers: set[int], role: str) -> float:
    return sum(after.get((b, role), 0) - before.get((b, role), 0) for b in brokers)


@pytest.fixture(scope="module")
def nearby(cli: CLI) -> dict[int, dict]:
    """An RF 3 topic whose records are all committed; its layout (partition -> state)."""
    cli("topics", "create", NEARBY, "--partitions", "6", "--replication-factor", "3")
    # Keyed, so that every partition gets records (by the keys' hash).
    keyed = "".join(f"k{i}:{r}\n" for i, r in enumerate(NEARBY_RECORDS))
    cli("produce", NEARBY, "--acks", "all", "--key-separator", ":", stdin=keyed)
    layout = partitions(cli, NEARBY)
    return layout


def rack_b_and_off_rack_leaders(layout: dict[int, dict]) -> tuple[set[int], set[int]]:
    rack_b = {b for p in layout.values() for b in p["replicas"] if rack_of(b) == "b"}
    leaders_off_b = {p["leader"] for p in layout.values() if rack_of(p["leader"]) != "b"}
    assert leaders_off_b, layout  # 6 partitions over 6 brokers: some lead off rack b
    return rack_b, leaders_off_b


def test_a_rack_b_consumer_reads_from_the_rack_b_replicas(
    cli: CLI, directory: Path, nearby: dict[int, dict]
) -> None:
    rack_b, leaders_off_b = rack_b_and_off_rack_leaders(nearby)
    others = {b for p in nearby.values() for b in p["replicas"]} - rack_b
    before = consumer_bytes(directory)
    consumed = cli(
        "consume",
        NEARBY,
        "--from-beginning",
        "--max-messages",
        str(len(NEARBY_RECORDS)),
        "--timeout-ms",
        "30000",
        "--consumer-props",
        "client.rack=b",
    )
    after = consumer_bytes(directory)
    assert sorted(consumed.split()) == sorted(NEARBY_RECORDS)
    # The rack-b brokers served the partitions they follow, as followers...
    assert served(before, after, rack_b, "follower") > 0
    # ...and no broker off rack b served a record, as leader or follower.
    assert served(before, after, others, "leader") == 0, (before, after)
    assert served(before, after, others, "follower") == 0, (before, after)
    # A bad property is a usage error.
    refused = cli("consume", NEARBY, "--consumer-props", "client.rac=b", check=False)
    assert refused.startswith("exit 2") and "client.rack" in refused, refused


def test_without_a_rack_the_leaders_serve(
    cli: CLI, directory: Path, nearby: dict[int, dict]
) -> None:
    rack_b, leaders_off_b = rack_b_and_off_rack_leaders(nearby)
    before = consumer_bytes(directory)
    consumed = cli(
        "consume",
        NEARBY,
        "--from-beginning",
        "--max-messages",
        str(len(NEARBY_RECORDS)),
        "--timeout-ms",
        "30000",
    )
    after = consumer_bytes(directory)
    assert sorted(consumed.split()) == sorted(NEARBY_RECORDS)
    assert served(before, after, leaders_off_b, "leader") > 0
    assert served(before, after, set(range(1, 7)), "follower") == 0, (before, after)


def test_confluent_kafka_with_client_rack_b_reads_from_the_rack_b_replicas(
    directory: Path, nearby: dict[int, dict]
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    rack_b, leaders_off_b = rack_b_and_off_rack_leaders(nearby)
    others = {b for p in nearby.values() for b in p["replicas"]} - rack_b
    state = ClusterState.load(directory)
    assert state is not None
    before = consumer_bytes(directory)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": state.kafka_bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
            "client.rack": "b",
        }
    )
    seen: dict[tuple[int, int], str] = {}
    try:
        consumer.assign([confluent_kafka.TopicPartition(NEARBY, p, 0) for p in sorted(nearby)])
        deadline = time.monotonic() + 60
        while len(seen) < len(NEARBY_RECORDS) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                seen[(message.partition(), message.offset())] = message.value().decode()
    finally:
        consumer.close()
    after = consumer_bytes(directory)
    assert sorted(seen.values()) == sorted(NEARBY_RECORDS)
    assert served(before, after, rack_b, "follower") > 0
    assert served(before, after, others, "leader") == 0, (before, after)
    assert served(before, after, others, "follower") == 0, (before, after)
