"""`Consumer.poll_batches()` against a real cluster (ZooKeeper, a controller, two broker
processes, RF 2): every record the producer wrote comes out exactly once, in offset order
per partition, with the same offsets, timestamps, keys, values, headers and leader epochs
as `poll()` gives; with a group, what poll_batches handed out is committed and a second
member of the group starts exactly after it."""

from __future__ import annotations

import trio

from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol.types import TopicPartition
from tests.integration.helpers import create_topic

TOPIC = "columns"
PARTITIONS = 3
RECORDS = 6_000


async def _produce(bootstrap: str) -> None:
    """Keyed records of varied sizes, some with headers or null values, in many batches."""
    async with open_producer(bootstrap, acks="all", linger_ms=2, batch_size=4096) as producer:
        for i in range(RECORDS):
            value = None if i % 97 == 0 else (b"%d:" % i) * (1 + i % 13)
            headers = [("n", b"%d" % i), ("empty", b"")] if i % 5 == 0 else []
            await producer.send(TOPIC, value, key=b"k%d" % (i % 50), headers=headers)
        await producer.flush()


async def _read_all(bootstrap: str, batches: bool, count: int = RECORDS, **config) -> list:
    """`count` records of the topic (then checks that no more come) as tuples of
    ConsumerRecord fields, in the order handed out, with poll() or poll_batches()."""
    out: list[tuple] = []
    async with open_consumer(
        bootstrap, auto_offset_reset="earliest", max_poll_records=1_000, **config
    ) as consumer:
        if "group_id" in config:
            consumer.subscribe([TOPIC])
        else:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        with trio.fail_after(60):
            while len(out) < count:
                if batches:
                    for batch in await consumer.poll_batches(1000):
                        assert len(batch) <= 1_000
                        out += map(tuple, batch.records())
                else:
                    out += map(tuple, await consumer.poll(1000))
        assert await consumer.poll_batches(300) == []  # nothing more, nothing twice
    return out


def _by_partition(records: list[tuple]) -> dict[int, list[tuple]]:
    parts: dict[int, list[tuple]] = {p: [] for p in range(PARTITIONS)}
    for record in records:
        parts[record[1]].append(record)
    return parts


async def _group_halves(bootstrap: str) -> tuple[int, int]:
    """(records the first member took, records the second got): the first takes 2,000
    with poll_batches and leaves (committing them); the second reads the rest."""
    config = dict(group_id="g", auto_offset_reset="earliest", max_poll_records=500)
    first = 0
    async with open_consumer(bootstrap, **config) as consumer:
        consumer.subscribe([TOPIC])
        with trio.fail_after(60):
            while first < 2_000:
                first += sum(map(len, await consumer.poll_batches(1000)))
    rest = await _read_all(bootstrap, True, RECORDS - first, group_id="g")
    return first, len(rest)


def test_poll_batches_reads_every_record_once_like_poll(start_cluster):
    cluster = start_cluster(brokers=2)
    create_topic(cluster, TOPIC, PARTITIONS, 2)
    bootstrap = cluster.state.bootstrap_servers
    trio.run(_produce, bootstrap)

    by_poll = _by_partition(trio.run(_read_all, bootstrap, False))
    by_batches = _by_partition(trio.run(_read_all, bootstrap, True))
    assert sum(map(len, by_batches.values())) == RECORDS
    for p in range(PARTITIONS):
        assert [r[2] for r in by_batches[p]] == list(range(len(by_batches[p])))  # in order
        assert by_batches[p] == by_poll[p]  # offsets, timestamps, keys, values, headers
    values = {r[5] for p in by_batches.values() for r in p}
    assert None in values
    assert any(r[6] == (("n", b"5"), ("empty", b"")) for p in by_batches.values() for r in p)

    first, rest = trio.run(_group_halves, bootstrap)
    assert first >= 2_000 and first + rest == RECORDS
