"""Issue 28, item 5: Tributary's transactional producer against real processes (ZooKeeper,
a controller, three brokers): 100 records committed and 100 aborted, seen exactly as
committed by a read_committed consumer; `tributary produce --transactional-id` commits
and `--abort`s; a zombie with the same transactional id is fenced."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import trio

from client.consumer import open_consumer
from client.producer import TransactionError, open_producer
from client.protocol.types import TopicPartition
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import create_topic
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration

PARTITIONS = 3
# Fewer `__transaction_state` partitions than Kafka's 50, for a quick start (Kafka's
# replication factor 3 and min ISR 2 stay).
TXN_STATE_SETTINGS = {"transaction.state.log.num.partitions": 5}


def bootstrap_of(cluster: LocalCluster) -> str:
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.state.brokers())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("txn-producer"),
        brokers=3,
        controllers=1,
        base_port=None,
        broker_overrides={**TEST_BROKER_SETTINGS, **TXN_STATE_SETTINGS},
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=60)
        yield cluster
    finally:
        cluster.down(timeout_s=20)  # by pid, also when up() failed half way


async def read_values(bootstrap: str, topic: str, isolation_level: str, expected: int) -> list:
    """The values of `topic` as a consumer with `isolation_level` sees them (bounded:
    until `expected` arrived or 60 s, then 2 s more for anything beyond)."""
    out: list[bytes] = []
    async with open_consumer(bootstrap, isolation_level=isolation_level) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        with trio.move_on_after(60):
            while len(out) < expected:
                out.extend(r.value for r in await consumer.poll(500))
        with trio.move_on_after(2):
            while True:
                out.extend(r.value for r in await consumer.poll(500))
    return out


def test_committed_records_are_read_and_aborted_ones_are_not(cluster):
    create_topic(cluster, "txn-out", PARTITIONS, 3, **{"min.insync.replicas": 2})
    bootstrap = bootstrap_of(cluster)

    async def produce() -> None:
        async with open_producer(bootstrap, transactional_id="txn-app") as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            for i in range(100):
                await producer.send("txn-out", b"committed-%d" % i)
            await producer.commit_transaction()
            producer.begin_transaction()
            for i in range(100):
                await producer.send("txn-out", b"aborted-%d" % i)
            await producer.flush()  # written to the log, then aborted
            await producer.abort_transaction()

    trio.run(produce)
    committed = trio.run(read_values, bootstrap, "txn-out", "read_committed", 100)
    assert sorted(committed) == sorted(b"committed-%d" % i for i in range(100))
    everything = trio.run(read_values, bootstrap, "txn-out", "read_uncommitted", 200)
    assert len(everything) == 200 and set(committed) < set(everything)


def test_the_console_producer_commits_and_aborts(cluster):
    create_topic(cluster, "txn-cli", PARTITIONS, 3)
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}

    def produce(lines: list[str], *extra: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "tools", "produce", "txn-cli"]
        command += ["--transactional-id", "txn-cli", *extra]
        return subprocess.run(
            command,
            input="\n".join(lines).encode() + b"\n",
            capture_output=True,
            env=env,
            timeout=120,
        )

    kept = produce([f"kept-{i}" for i in range(30)], "--transaction-size", "10")
    assert kept.returncode == 0, kept.stderr
    assert "committed 30 record(s)" in kept.stderr.decode()
    assert "in 3 transaction(s)" in kept.stderr.decode()
    dropped = produce([f"dropped-{i}" for i in range(20)], "--abort")
    assert dropped.returncode == 0, dropped.stderr
    assert "aborted 20" in dropped.stderr.decode()
    values = trio.run(read_values, bootstrap_of(cluster), "txn-cli", "read_committed", 30)
    assert sorted(values) == sorted(b"kept-%d" % i for i in range(30))


def test_a_zombie_with_the_same_transactional_id_is_fenced(cluster):
    create_topic(cluster, "txn-zombie", PARTITIONS, 3)
    bootstrap = bootstrap_of(cluster)

    async def scenario() -> None:
        async with open_producer(bootstrap, transactional_id="txn-z") as zombie:
            await zombie.init_transactions()
            zombie.begin_transaction()
            await (await zombie.send("txn-zombie", b"zombie-early", partition=0))
            async with open_producer(bootstrap, transactional_id="txn-z") as successor:
                await successor.init_transactions()  # fences the zombie, aborts its txn
                successor.begin_transaction()
                await successor.send("txn-zombie", b"successor", partition=1)
                await successor.commit_transaction()
            with pytest.raises(TransactionError) as info:
                await zombie.send("txn-zombie", b"zombie-late", partition=2)
                await zombie.commit_transaction()
            assert info.value.fatal

    trio.run(scenario)
    values = trio.run(read_values, bootstrap, "txn-zombie", "read_committed", 1)
    assert values == [b"successor"]
