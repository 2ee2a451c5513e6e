"""Transactions end to end with real Kafka clients (issue 28's "must show") on one
3-broker cluster, through the Kafka listener, the clients being the judges.

- confluent-kafka (librdkafka): a transactional producer commits 1,000 records, then
  writes 1,000 more (flushed, so they are in the log) and aborts them; a read_committed
  consumer reads exactly the committed 1,000, a read_uncommitted one all 2,000, and
  `tributary consume --isolation-level read_committed --from-beginning` prints exactly
  the committed 1,000.
- kafkajs (tests/node/kafkajs_transactions.mjs) and aiokafka: each commits one
  transaction and aborts one; a read_committed confluent-kafka consumer reads exactly
  the committed one.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.chaos.txn_workload import read_all
from tests.integration.conftest import running_cluster
from tests.integration.helpers import create_topic
from tests.integration.test_kafka_clients import kafka_bootstrap, tributary
from tests.integration.test_node_clients import NODE, NODE_DIR, run_node

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

SETTINGS = {
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
}
PARTITIONS = 3
COUNT = 1_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("txn-clients"), brokers=3, **SETTINGS) as c:
        for topic in ("ck-txn", "kjs-txn", "aio-txn"):
            create_topic(c, topic, partitions=PARTITIONS, rf=3)
        yield c


def values(cluster, topic: str, isolation: str) -> Counter:
    """Every value of `topic`, read from the beginning with `isolation` by confluent-kafka
    (until each partition's position reaches its end: the abort markers are last)."""
    reads = read_all(kafka_bootstrap(cluster), [topic], PARTITIONS, isolation, timeout_s=90)
    return Counter(read.value for read in reads)


def expected(prefix: str, count: int) -> Counter:
    return Counter(f"{prefix}-{i}" for i in range(count))


def test_confluent_kafka_commits_1000_and_aborts_1000(cluster):
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "transactional.id": "ck-txn-producer",
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(COUNT):
        producer.produce("ck-txn", f"c-{i}".encode(), partition=i % PARTITIONS)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(COUNT):
        producer.produce("ck-txn", f"a-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0  # in the log (else the abort just drops them unsent)
    producer.abort_transaction(60)

    assert values(cluster, "ck-txn", "read_committed") == expected("c", COUNT)
    assert values(cluster, "ck-txn", "read_uncommitted") == expected("c", COUNT) + expected(
        "a", COUNT
    )
    consumed = tributary(
        "consume",
        "ck-txn",
        "--isolation-level",
        "read_committed",
        "--from-beginning",
        "--timeout-ms",
        "5000",
        "--bootstrap-server",
        cluster.state.bootstrap_servers,
        timeout=120,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert Counter(consumed.stdout.splitlines()) == expected("c", COUNT)


@pytest.mark.skipif(
    NODE is None or not (NODE_DIR / "node_modules" / "kafkajs").is_dir(),
    reason="node or kafkajs is not installed (make setup installs them)",
)
def test_kafkajs_commits_one_transaction_and_aborts_one(cluster):
    result = run_node(
        "kafkajs_transactions.mjs", kafka_bootstrap(cluster), "kjs-txn", "kjs-producer", "50"
    )
    assert "failed" not in result, result
    assert result["committed"] is True and result["aborted"] is True
    assert values(cluster, "kjs-txn", "read_committed") == expected("kjs-c", 50)
    assert values(cluster, "kjs-txn", "read_uncommitted") == expected("kjs-c", 50) + expected(
        "kjs-a", 50
    )


def test_aiokafka_commits_one_transaction_and_aborts_one(cluster):
    aiokafka = pytest.importorskip("aiokafka")

    async def go() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=kafka_bootstrap(cluster),
            transactional_id="aio-producer",
            enable_idempotence=True,
            request_timeout_ms=30_000,
        )
        await producer.start()
        try:
            async with producer.transaction():
                sent = [
                    await producer.send("aio-txn", f"aio-c-{i}".encode(), partition=i % PARTITIONS)
                    for i in range(50)
                ]
                await asyncio.gather(*sent)
            await producer.begin_transaction()
            sent = [
                await producer.send("aio-txn", f"aio-a-{i}".encode(), partition=i % PARTITIONS)
                for i in range(50)
            ]
            await asyncio.gather(*sent)  # in the log before the abort
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(go(), 120))
    assert values(cluster, "aio-txn", "read_committed") == expected("aio-c", 50)
    assert values(cluster, "aio-txn", "read_uncommitted") == expected("aio-c", 50) + expected(
        "aio-a", 50
    )
