"""`Producer.send_many` against real processes (ZooKeeper, a controller, three brokers,
real sockets): records handed over many at a time, keyless (sticky partitions moving on
as batches fill), keyed and to an explicit partition, are all written exactly once, each
partition's log in the order they were handed over, each at the offset its handle
reports, with acks=all, RF 3 and idempotence (the producer's defaults)."""

from __future__ import annotations

import pytest
import trio

from client.consumer import open_consumer
from client.producer import open_producer
from client.producer.partitioner import partition_for_key
from client.protocol.types import TopicPartition
from tests.integration.helpers import create_topic

pytestmark = pytest.mark.integration

PARTITIONS = 3
CHUNK = 5_000


def bootstrap_of(cluster) -> str:
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.state.brokers())


async def produce(bootstrap: str) -> list[tuple[bytes, int, int]]:
    """Hand over 4 chunks keyless, 1 keyed, 1 to partition 2 (small batches, so the
    sticky partition moves often); (value, partition, offset) of each, in hand-over order."""
    chunks = [[f"{c}-{i}".encode().ljust(100, b".") for i in range(CHUNK)] for c in range(6)]
    async with open_producer(bootstrap, batch_size=16_384, linger_ms=2) as producer:
        assert producer.idempotent
        groups = [await producer.send_many("many", chunk) for chunk in chunks[:4]]
        keys = [str(i % 50).encode() for i in range(CHUNK)]
        groups.append(await producer.send_many("many", chunks[4], keys))
        groups.append(await producer.send_many("many", chunks[5], partition=2))
        placed = []
        for chunk, handles in zip(chunks, groups, strict=True):
            for value, metadata in zip(chunk, await handles, strict=True):
                placed.append((value, metadata.partition, metadata.offset))
    for value, partition, _ in placed[4 * CHUNK : 5 * CHUNK]:
        key = str(int(value.split(b"-")[1].rstrip(b".")) % 50).encode()
        assert partition == partition_for_key(key, PARTITIONS)
    assert {partition for _, partition, _ in placed[5 * CHUNK :]} == {2}
    return placed


async def read_all(bootstrap: str, expected: int) -> dict[int, list]:
    """Each partition's records (bounded: stops once `expected` arrived or after 60 s,
    then reads 2 s more to see any duplicate)."""
    out: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    async with open_consumer(bootstrap, max_poll_records=50_000) as consumer:
        tps = [TopicPartition("many", p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        seen = 0
        with trio.move_on_after(60):
            while seen < expected:
                for record in await consumer.poll(500):
                    out[record.partition].append(record)
                    seen += 1
        with trio.move_on_after(2):
            while True:
                for record in await consumer.poll(500):
                    out[record.partition].append(record)
    return out


def test_send_many_writes_every_record_once_in_order_at_its_offset(start_cluster):
    cluster = start_cluster(brokers=3)
    create_topic(cluster, "many", PARTITIONS, 3, **{"min.insync.replicas": 2})
    bootstrap = bootstrap_of(cluster)
    placed = trio.run(produce, bootstrap)
    logs = trio.run(read_all, bootstrap, len(placed))
    assert sum(len(log) for log in logs.values()) == len(placed) == 6 * CHUNK
    for partition, log in logs.items():
        mine = [(value, offset) for value, p, offset in placed if p == partition]
        assert [(r.value, r.offset) for r in log] == mine
    used = {partition for _, partition, _ in placed[: 4 * CHUNK]}
    assert used == set(range(PARTITIONS))  # the sticky partition moved on as batches filled
