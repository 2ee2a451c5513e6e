"""A cluster on a three-server ZooKeeper ensemble, under a chroot, through ZooKeeper faults.

One real cluster for the module (`tributary cluster up --zookeepers 3 --zk-chroot
/tributary`, as the launcher runs it: three ZooKeeper JVMs, one controller, three
brokers, 4 s ZooKeeper sessions). What a user relies on, as in Kafka:
- with a chroot, every znode the brokers and the controller write is under it, and the
  chroot was created by them (nobody made it beforehand);
- one ZooKeeper server of three down (`tributary cluster kill zookeeper-N`, the
  ensemble's leader) changes nothing: produce and fetch work, a broker's death still
  fails its partitions over, and the server rejoins (`cluster restart zookeeper-N`);
- two of three paused (SIGSTOP) past the session timeout: the ensemble has no quorum,
  yet acks=1 produce and fetch keep working on the current leaders; a follower that dies
  meanwhile cannot leave the ISR, so acks=all waits out its timeout while acks=1 goes
  on; once resumed the cluster converges (the ISR shrinks to the live replicas, brokers
  registered, a controller active), acks=all works again, an election works again, and
  nothing acknowledged was lost.

The last test leaves two brokers down: the module's cluster ends with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import trio
from kazoo.client import KazooClient

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records.batches import decode_batches
from tests.integration.conftest import running_cluster
from tests.integration.helpers import broker_port, create_topic, produce, wait_until
from tools.cluster.inspect import read_cluster
from tools.cluster.launcher import LocalCluster
from tools.cluster.state import ClusterState
from tools.cluster.zookeeper import serving_mode

pytestmark = pytest.mark.integration

CHROOT = "/tributary"
SESSION_TIMEOUT_S = 4.0  # TEST_BROKER_SETTINGS / TEST_CONTROLLER_SETTINGS
SETTLE_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(
        tmp_path_factory.mktemp("zk-ensemble"), brokers=3, zookeepers=3, zk_chroot=CHROOT
    ) as c:
        yield c


def _zk_servers(cluster: LocalCluster) -> str:
    return cluster.state.zookeeper_connect.split("/", 1)[0]


def _view(cluster: LocalCluster):
    return read_cluster(cluster.state.zookeeper_connect)


def _leader(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    return _view(cluster).partition(topic, partition).leader


def _fetch_values(cluster: LocalCluster, broker_id: int, topic: str, partition: int = 0):
    """The committed values of the partition, read from `broker_id` (its leader)."""

    async def go():
        async with open_connection("127.0.0.1", broker_port(cluster, broker_id)) as conn:
            response = await conn.request(
                m.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=4 * 1024 * 1024,
                    topics=[
                        m.FetchTopic(
                            topic=topic,
                            partitions=[
                                m.FetchPartition(
                                    partition=partition,
                                    fetch_offset=0,
                                    partition_max_bytes=4 * 1024 * 1024,
                                )
                            ],
                        )
                    ],
                ),
                timeout_s=10,
            )
        part = response.topics[0].partitions[0]
        assert part.error_code == ErrorCode.NONE, ErrorCode.from_code(part.error_code)
        return [r.value for r in decode_batches(part.records)]

    return trio.run(go)


def _converged(cluster: LocalCluster, topic: str, live=(1, 2, 3)) -> bool:
    """Brokers `live` registered, a controller active, the topic's ISRs all of `live`."""
    try:
        view = _view(cluster)
    except Exception:  # the ensemble still electing
        return False
    parts = [p for p in view.partitions if p.topic == topic]
    return (
        set(view.brokers) == set(live)
        and view.controller_id is not None
        and bool(parts)
        and all(p.leader in live and set(p.isr) == set(live) for p in parts)
    )


def _produce_ok(cluster: LocalCluster, broker_id: int, topic: str, values, acks: int) -> None:
    error, _ = produce(cluster, broker_id, topic, 0, values, acks=acks)
    assert error == ErrorCode.NONE, error


def test_the_ensemble_serves_and_every_znode_is_under_the_chroot(cluster):
    zookeepers = cluster.state.zookeepers()
    assert [z.name for z in zookeepers] == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    modes = sorted(serving_mode("127.0.0.1", z.port) for z in zookeepers)
    assert modes == ["follower", "follower", "leader"]
    connect = cluster.state.zookeeper_connect
    assert connect.endswith(CHROOT) and connect.count(",") == 2
    for config in (cluster.process("broker-1").config_path, cluster.process("1001").config_path):
        assert f"zookeeper.connect={connect}" in open(config).read()
    create_topic(cluster, "chrooted", 1, 3)
    assert wait_until(lambda: _converged(cluster, "chrooted"), SETTLE_S)

    root = KazooClient(hosts=_zk_servers(cluster))
    root.start(timeout=10)
    try:
        # Nothing but the chroot (and ZooKeeper's own node) at the root...
        assert sorted(root.get_children("/")) == ["tributary", "zookeeper"]
        # ...and the cluster's layout inside it.
        inside = set(root.get_children(CHROOT))
        assert {"brokers", "controller", "controller_epoch", "cluster", "config"} <= inside
        assert sorted(root.get_children(f"{CHROOT}/brokers/ids")) == ["1", "2", "3"]
        assert "chrooted" in root.get_children(f"{CHROOT}/brokers/topics")
    finally:
        root.stop()
        root.close()


def _cli(cluster: LocalCluster, *args: str) -> str:
    """`tributary cluster --dir <the cluster> ARGS...`, as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "tools", "cluster", "--dir", str(cluster.directory), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _modes(cluster: LocalCluster) -> dict[str, str | None]:
    """Each ZooKeeper server's mode (leader, follower; None: not serving), asked directly."""
    return {z.name: serving_mode("127.0.0.1", z.port) for z in cluster.state.zookeepers()}


def test_one_zookeeper_down_changes_nothing(cluster):
    create_topic(cluster, "one-down", 1, 3)
    assert wait_until(lambda: _converged(cluster, "one-down"), SETTLE_S)
    # Kill the ensemble's leader: the other two elect a new one, sessions move over.
    zk_leader = next(name for name, mode in _modes(cluster).items() if mode == "leader")
    assert f"sent SIGKILL to {zk_leader}" in _cli(cluster, "kill", zk_leader)
    cluster.state = ClusterState.load(cluster.directory)  # what the CLI did
    try:
        assert wait_until(lambda: "leader" in _modes(cluster).values(), SETTLE_S)
        assert _modes(cluster)[zk_leader] is None
        leader = _leader(cluster, "one-down")
        _produce_ok(cluster, leader, "one-down", [b"a", b"b"], acks=-1)
        assert _fetch_values(cluster, leader, "one-down") == [b"a", b"b"]
        # A broker's death still fails over: its session expires, the controller elects.
        cluster.kill(f"broker-{leader}")
        new_leader = wait_until(
            lambda: (lead := _leader(cluster, "one-down")) not in (-1, leader) and lead, SETTLE_S
        )
        wait_until(lambda: _produce_ok_or_none(cluster, new_leader, "one-down", b"c"), SETTLE_S)
        assert _fetch_values(cluster, new_leader, "one-down") == [b"a", b"b", b"c"]
        cluster.start(f"broker-{leader}")
    finally:
        assert f"restarted {zk_leader}" in _cli(cluster, "restart", zk_leader)
        cluster.state = ClusterState.load(cluster.directory)
    status = json.loads(_cli(cluster, "status", "--json"))
    modes = {
        p["name"]: p["zookeeper_mode"] for p in status["processes"] if p["role"] == "zookeeper"
    }
    assert modes[zk_leader] in ("follower", "leader")  # it serves again
    assert sorted(modes.values()) == ["follower", "follower", "leader"]
    assert wait_until(lambda: _converged(cluster, "one-down"), SETTLE_S)


def _produce_ok_or_none(cluster, broker_id, topic, value) -> bool:
    error, _ = produce(cluster, broker_id, topic, 0, [value], acks=-1, timeout_ms=5000)
    return error == ErrorCode.NONE


def test_two_zookeepers_paused_past_the_session_timeout(cluster):
    create_topic(cluster, "no-quorum", 1, 3)
    assert wait_until(lambda: _converged(cluster, "no-quorum"), SETTLE_S)
    leader = _leader(cluster, "no-quorum")
    follower, other = (b for b in (1, 2, 3) if b != leader)
    acknowledged = [b"before-0", b"before-1"]
    _produce_ok(cluster, leader, "no-quorum", acknowledged, acks=-1)

    paused = [z.name for z in cluster.state.zookeepers()[:2]]
    for name in paused:
        cluster.pause(name)
    try:
        third = cluster.state.zookeepers()[2]
        wait_until(lambda: serving_mode("127.0.0.1", third.port) is None, SETTLE_S)
        # No quorum for longer than every session's timeout: the leader keeps serving.
        until = time.monotonic() + SESSION_TIMEOUT_S + 2.0
        i = 0
        while time.monotonic() < until:
            value = b"during-%d" % i
            _produce_ok(cluster, leader, "no-quorum", [value], acks=1)
            acknowledged.append(value)
            i += 1
            time.sleep(0.25)
        assert wait_until(
            lambda: _fetch_values(cluster, leader, "no-quorum") == acknowledged, SETTLE_S
        )
        # A follower dies meanwhile: the ISR cannot shrink without ZooKeeper, so acks=all
        # waits out its timeout (as in Kafka), while acks=1 goes on.
        cluster.kill(f"broker-{follower}")
        _produce_ok(cluster, leader, "no-quorum", [b"acks-1"], acks=1)
        acknowledged.append(b"acks-1")
        error, _ = produce(cluster, leader, "no-quorum", 0, [b"unacked"], acks=-1, timeout_ms=2000)
        assert error == ErrorCode.REQUEST_TIMED_OUT
    finally:
        for name in paused:
            cluster.resume(name)

    # The quorum is back: the ISR shrinks to the live replicas, the surviving brokers
    # are registered, the controller active, and acks=all works again.
    assert wait_until(lambda: _converged(cluster, "no-quorum", (leader, other)), SETTLE_S)
    # On a loaded machine the leader's session may have expired meanwhile and the
    # leadership moved to the other live replica: ask ZooKeeper, and let the brokers learn
    # it (LeaderAndIsr) before expecting an acks=all produce through it.
    leader = _leader(cluster, "no-quorum")
    other = next(b for b in (1, 2, 3) if b not in (leader, follower))
    assert wait_until(
        lambda: produce(cluster, leader, "no-quorum", 0, [b"after"], acks=-1)[0] == ErrorCode.NONE,
        SETTLE_S,
    )
    acknowledged.append(b"after")
    # An election works again: kill the leader, the last in-sync replica takes over with
    # every acknowledged record, in order.
    cluster.kill(f"broker-{leader}")
    assert wait_until(lambda: _leader(cluster, "no-quorum") == other, SETTLE_S)
    values = _fetch_values(cluster, other, "no-quorum")
    assert [v for v in values if v in set(acknowledged)] == acknowledged
