"""`Producer.send_many` against an in-process cluster of real brokers
(tests/support/cluster.py), on Trio's MockClock.

The yardstick is `send()`: the same records handed over at once must land where, in
the batches and in the order one `send()` per record puts them (partitions by key,
sticky moves as batches fill, buffer memory, retries, idempotence), and fail the same
ways; what send_many adds is checking everything before queuing anything, and the
`queued` handles of an error that comes after some records were queued.
"""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.metadata import UnknownTopicError
from client.producer import (
    DeliveryHandles,
    DeliveryTimeoutError,
    InvalidPartitionError,
    ProducerClosedError,
    ProducerTimeoutError,
    RecordMetadata,
    RecordTooLargeError,
    open_producer,
)
from client.producer.partitioner import DefaultPartitioner
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.support import producer_faults
from tests.support.cluster import TestCluster, open_test_cluster

T0 = TopicPartition("t", 0)


def batches_per_partition(cluster: TestCluster, topic: str) -> list[tuple[int, int]]:
    """(partition, record count) of each batch of `topic`, in arrival order."""
    return [(p, h.records_count) for p, h in cluster.produced_batches(topic)]


# --- the same outcome as send() ----------------------------------------------------------


async def test_records_land_in_order_with_their_offsets(autojump_clock):
    values = [f"v{i}".encode().ljust(100, b".") for i in range(50)]
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), batch_size=1000, linger_ms=5
        ) as p:
            handles = await p.send_many("t", values)
            metadata = await handles
    assert [md.offset for md in metadata] == list(range(50))
    assert cluster.values(T0) == values
    # 116 bytes a record: 8 fit in a 1000-byte batch, as with send().
    assert [count for _, count in batches_per_partition(cluster, "t")] == [8] * 6 + [2]


async def _partitions_and_batches(
    cluster: TestCluster, topic: str, records: list[tuple], many: bool, **options
) -> tuple[list[RecordMetadata], list[tuple[int, int]]]:
    """Send `records` (value, key, headers) with send_many or one send() each, with the
    same seeded sticky partitioner: their metadata (topic and timestamps dropped) and
    the batches."""
    values = [value for value, _, _ in records]
    keys = [key for _, key, _ in records]
    headers = [h for _, _, h in records]
    async with open_producer(
        cluster.bootstrap,
        connector=cluster.connector(),
        partitioner=DefaultPartitioner(random.Random(7)),
        **options,
    ) as p:
        if many:
            handles = list(await p.send_many(topic, values, keys, headers=headers))
        else:
            handles = [
                await p.send(topic, value, key, headers=h, timestamp_ms=None)
                for value, key, h in records
            ]
        await p.flush()
    metadata = [h.result()._replace(topic="", timestamp=0) for h in handles]
    return metadata, batches_per_partition(cluster, topic)


record_lists = st.lists(
    st.tuples(
        st.binary(max_size=300),
        st.one_of(st.none(), st.binary(min_size=1, max_size=3)),
        st.lists(st.tuples(st.sampled_from(["a", "b"]), st.binary(max_size=20)), max_size=2),
    ),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=record_lists, keyless=st.booleans(), batch_size=st.sampled_from([300, 1000]))
def test_the_same_partitions_batches_and_offsets_as_send(records, keyless, batch_size):
    if keyless:
        records = [(value, None, h) for value, _, h in records]
    options = {"batch_size": batch_size, "linger_ms": 50}

    async def main() -> None:
        async with open_test_cluster(topics={"many": 4, "each": 4}) as cluster:
            many = await _partitions_and_batches(cluster, "many", records, True, **options)
            one = await _partitions_and_batches(cluster, "each", records, False, **options)
        assert many == one

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_keyless_records_move_on_to_a_new_sticky_partition_as_batches_fill(autojump_clock):
    async with open_test_cluster(topics={"t": 3}) as cluster:
        async with open_producer(
            cluster.bootstrap,
            connector=cluster.connector(),
            batch_size=1000,
            linger_ms=60_000,
            partitioner=DefaultPartitioner(random.Random(7)),  # Kafka 2.8's: never the same
        ) as p:
            handles = await p.send_many("t", [b"x" * 100] * 24)
            await p.flush()
    partitions = [h.result().partition for h in handles]
    runs = [partitions[i : i + 8] for i in range(0, 24, 8)]
    assert all(len(set(run)) == 1 for run in runs)  # a batch each, on one partition
    assert runs[0][0] != runs[1][0] != runs[2][0]  # moving on after each


async def test_explicit_partition_headers_keys_and_timestamps(autojump_clock):
    async with open_test_cluster(topics={"t": 3}) as cluster:
        async with open_producer(cluster.bootstrap, connector=cluster.connector()) as p:
            handles = await p.send_many(
                "t",
                [b"a", "b"],
                keys=[b"k", None],
                partition=2,
                headers=[[("h", b"1")], []],
                timestamp_ms=[1234, 1240],
            )
            assert await handles == [
                RecordMetadata("t", 2, 0, 1234),
                RecordMetadata("t", 2, 1, 1240),
            ]
            one_time = await p.send_many("t", [b"c", b"d"], partition=1, timestamp_ms=99)
            assert [md.timestamp for md in await one_time] == [99, 99]
    records = cluster.records(("t", 2))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (b"k", b"a", (("h", b"1"),), 1234),
        (None, b"b", (), 1240),
    ]


async def test_the_handles_are_a_sequence_of_delivery_handles(autojump_clock):
    async with open_test_cluster(topics={"t": 2}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), batch_size=1000, linger_ms=60_000
        ) as p:
            handles = await p.send_many("t", [bytes([i]) * 100 for i in range(20)])
            assert isinstance(handles, DeliveryHandles) and len(handles) == 20
            assert not handles.done()
            await p.flush()
            assert handles.done()
            assert len(await p.send_many("t", [])) == 0
    metadata = await handles
    assert [h.result() for h in handles] == metadata
    assert handles[-1].result() == metadata[19] and handles[0].result() == metadata[0]
    assert [h.result() for h in handles[3:9:2]] == metadata[3:9:2]
    with pytest.raises(IndexError):
        handles[20]
    # Grouped by batch (8 records of 116 bytes fill 1000): each run's first handle and
    # length, the run at consecutive offsets of one partition.
    runs = handles.runs()
    assert [count for _, count in runs] == [8, 8, 4]
    position = 0
    for first, count in runs:
        assert first.result() == metadata[position]
        assert {md.partition for md in metadata[position : position + count]} == {
            first.result().partition
        }
        position += count


# --- buffer memory, errors and closing ---------------------------------------------------


async def test_waits_for_buffer_memory_a_run_at_a_time(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        cluster.delay(ApiKey.PRODUCE, 5, times=float("inf"))
        # 116 bytes a record: about 17 fit in 2000 bytes of buffer, 40 are handed over.
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), buffer_memory=2_000
        ) as p:
            start = trio.current_time()
            handles = await p.send_many("t", [b"x" * 100] * 40)
            assert trio.current_time() - start >= 5  # had to wait for acks to free memory
            assert p.accumulator.used_bytes <= 2_000
            await p.flush()
    assert [md.offset for md in await handles] == list(range(40))


async def test_a_buffer_that_stays_full_fails_with_the_queued_records_attached(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        cluster.delay(ApiKey.PRODUCE, 10, times=float("inf"))
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), buffer_memory=500, max_block_ms=1_000
        ) as p:
            with pytest.raises(ProducerTimeoutError, match="buffer memory") as caught:
                await p.send_many("t", [b"x" * 100] * 10)
            queued = caught.value.queued
            assert len(queued) == 4  # as many as fit in 500 bytes
    assert [md.offset for md in await queued] == [0, 1, 2, 3]
    assert len(cluster.values(T0)) == 4


async def test_bad_records_are_refused_before_any_is_queued(autojump_clock):
    async with open_test_cluster(topics={"t": 2}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), max_request_size=1_000
        ) as p:
            with pytest.raises(RecordTooLargeError, match="max_request_size"):
                await p.send_many("t", [b"small", b"x" * 2_000])
            with pytest.raises(TypeError):
                await p.send_many("t", [b"ok", 12345])  # type: ignore[list-item]
            with pytest.raises(ValueError, match="2 keys for 3 values"):
                await p.send_many("t", [b"a", b"b", b"c"], keys=[b"k", b"l"])
            with pytest.raises(ValueError, match="1 headers for 2 values"):
                await p.send_many("t", [b"a", b"b"], headers=[[]])
            with pytest.raises(InvalidPartitionError, match="partition 5"):
                await p.send_many("t", [b"a"], partition=5)
            with pytest.raises(UnknownTopicError):
                await p.send_many("nope", [b"a"])
            assert not p.accumulator.incomplete
    assert cluster.requests_of(m.ProduceRequest) == []


async def test_closing_flushes_them_and_then_refuses_more(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), linger_ms=60_000
        ) as p:
            handles = await p.send_many("t", [b"a", b"b"])
        assert [md.offset for md in await handles] == [0, 1]
        with pytest.raises(ProducerClosedError):
            await p.send_many("t", [b"late"])


async def test_an_error_in_the_block_fails_them(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        with pytest.raises(RuntimeError, match="boom"):
            async with open_producer(
                cluster.bootstrap, connector=cluster.connector(), linger_ms=60_000
            ) as p:
                handles = await p.send_many("t", [b"a", b"b"])
                raise RuntimeError("boom")
        with pytest.raises(ProducerClosedError):
            await handles
        assert all(isinstance(h.exception(), ProducerClosedError) for h in handles)


async def test_records_for_a_leaderless_partition_expire(autojump_clock):
    async with open_test_cluster(2) as cluster:
        await cluster.create_topic("t", 1, replication_factor=1)
        await cluster.stop_broker(cluster.partition(T0).leader)
        async with open_producer(
            cluster.bootstrap,
            connector=cluster.connector(),
            delivery_timeout_ms=3_000,
            request_timeout_ms=1_000,
            acks=1,
        ) as p:
            handles = await p.send_many("t", [b"a", b"b"])
            with pytest.raises(DeliveryTimeoutError):
                await handles


# --- retries and idempotence -------------------------------------------------------------


async def test_retries_keep_the_order_and_idempotence_writes_once(autojump_clock):
    async with open_test_cluster(2) as cluster:
        await cluster.create_topic("t", 2, replication_factor=2)
        cluster.fail(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, tp=T0)
        cluster.drop(ApiKey.PRODUCE, broker=cluster.partition(T0).leader, after_append=True)
        values = [str(i).encode() for i in range(200)]
        async with open_producer(
            cluster.bootstrap,
            connector=cluster.connector(),
            batch_size=600,
            linger_ms=1,
            retry_backoff_ms=10,
        ) as p:
            assert p.idempotent
            first = await p.send_many("t", values[:100], partition=0)
            await cluster.move_leader(T0, 3 - cluster.partition(T0).leader)
            second = await p.send_many("t", values[100:], partition=0)
    assert [md.offset for md in await first + await second] == list(range(200))
    assert cluster.values(T0) == values


RETRIABLE = [
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    faults=producer_faults.fault_lists(RETRIABLE),
    chunk=st.integers(1, 30),
    batch_size=st.sampled_from([200, 800]),
)
def test_under_retriable_faults_every_record_is_written_once_in_order(faults, chunk, batch_size):
    """The faults of test_producer_idempotence.py (errors, connections dropped before or
    after the leader appended, leader moves) with keyless records handed over `chunk` at
    a time: each partition's log is exactly the records acked on it, in the order they
    were given, each at its acknowledged offset."""

    async def scenario() -> None:
        async with open_test_cluster(2) as cluster:
            handles = await send_many_under_faults(cluster, faults, chunk, batch_size=batch_size)
            placed = [(h.result().partition, h.result().offset) for h in handles]
            for partition in range(3):
                mine = [(i, offset) for i, (p, offset) in enumerate(placed) if p == partition]
                assert [offset for _, offset in mine] == list(range(len(mine)))
                assert cluster.values(("t", partition)) == [str(i).encode() for i, _ in mine]

    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))


async def send_many_under_faults(cluster: TestCluster, faults, chunk: int, **options):
    """`producer_faults.send_under_faults` with send_many: the same faults, the records
    "0".."59" keyless, `chunk` to a call; a move happens after the call holding record i."""
    await cluster.create_topic("t", 3, replication_factor=2)
    moves = producer_faults.inject(cluster, faults)
    async with open_producer(
        cluster.bootstrap,
        connector=cluster.connector(),
        retry_backoff_ms=10,
        linger_ms=1,
        **options,
    ) as p:
        handles: list = []
        for start in range(0, producer_faults.RECORDS, chunk):
            stop = min(start + chunk, producer_faults.RECORDS)
            handles.extend(await p.send_many("t", [str(i) for i in range(start, stop)]))
            for i in range(start, stop):
                if i in moves:
                    tp = TopicPartition("t", moves[i])
                    await cluster.move_leader(tp, 3 - cluster.partition(tp).leader)
            await trio.sleep(0.001)
    return handles
