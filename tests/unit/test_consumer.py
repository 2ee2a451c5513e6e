"""The consumer against an in-process cluster of real brokers (tests/support/cluster.py)
on the in-memory network, with Trio's MockClock where time matters.

Assign/seek/poll, long polls that return as soon as data arrives, the reset policies,
leader moves and fenced epochs mid-stream, and records below the position skipped.
"""

from __future__ import annotations

import pytest
import trio

from client.consumer import (
    ConsumerStateError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    open_consumer,
)
from client.metadata import UnknownTopicError
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition
from tests.support.cluster import TestCluster, open_test_cluster

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


async def fill(cluster: TestCluster, tp: TopicPartition, count: int, per_batch: int = 1) -> None:
    """Append `count` records "0", "1", ... in batches of `per_batch`."""
    for start in range(0, count, per_batch):
        values = [str(i).encode() for i in range(start, min(count, start + per_batch))]
        await cluster.append(tp, *values)


async def poll_until(consumer, count: int, timeout_s: float = 30) -> list:
    records: list = []
    with trio.fail_after(timeout_s):
        while len(records) < count:
            records += await consumer.poll(1000)
    return records


async def test_assign_poll_and_seek(autojump_clock):
    async with open_test_cluster(topics={"t": 2}) as cluster:
        await fill(cluster, T0, 10, per_batch=3)
        await fill(cluster, T1, 5)
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0, T1])
            records = await poll_until(consumer, 15)
            by_partition = {
                p: [(r.offset, r.value) for r in records if r.partition == p] for p in (0, 1)
            }
            assert by_partition[0] == [(i, str(i).encode()) for i in range(10)]
            assert by_partition[1] == [(i, str(i).encode()) for i in range(5)]
            assert await consumer.position(T0) == 10
            consumer.seek(T0, 4)
            assert await consumer.position(T0) == 4
            again = await poll_until(consumer, 6)
            assert [r.offset for r in again] == [4, 5, 6, 7, 8, 9]
            assert consumer.highwater(T0) == 10


async def test_records_below_the_position_are_skipped(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 10, per_batch=10)  # one batch holding offsets 0..9
        async with open_consumer(cluster.bootstrap, connector=cluster.connector()) as consumer:
            consumer.assign([T0])
            consumer.seek(T0, 7)
            records = await poll_until(consumer, 3)
    assert [(r.offset, r.value) for r in records] == [(7, b"7"), (8, b"8"), (9, b"9")]
    fetches = [r for r in cluster.requests_of(m.FetchRequest)]
    assert fetches[0].topics[0].partitions[0].fetch_offset == 7


async def test_max_poll_records_caps_each_poll(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 25, per_batch=25)
        async with open_consumer(
            cluster.bootstrap,
            connector=cluster.connector(),
            auto_offset_reset="earliest",
            max_poll_records=10,
        ) as consumer:
            consumer.assign([T0])
            sizes = []
            while sum(sizes) < 25:
                batch = await consumer.poll(1000)
                if batch:
                    sizes.append(len(batch))
    assert sizes == [10, 10, 5]


async def test_a_long_poll_returns_as_soon_as_data_arrives(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_consumer(
            cluster.bootstrap,
            connector=cluster.connector(),
            auto_offset_reset="earliest",
            fetch_max_wait_ms=5_000,
        ) as consumer:
            consumer.assign([T0])
            assert await consumer.poll(100) == []

            async def append_later() -> None:
                await trio.sleep(2)
                await cluster.append(T0, b"late")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(append_later)
                start = trio.current_time()
                records = await consumer.poll(10_000)
                waited = trio.current_time() - start
            assert [r.value for r in records] == [b"late"]
            assert 1.9 < waited < 2.1  # not the 5 s fetch wait, not the 10 s poll timeout


async def test_poll_times_out_empty(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_consumer(cluster.bootstrap, connector=cluster.connector()) as consumer:
            consumer.assign([T0])
            start = trio.current_time()
            assert await consumer.poll(3_000) == []
            assert 3 <= trio.current_time() - start < 3.1


# --- reset policies ------------------------------------------------------------------------


async def test_latest_starts_after_existing_records(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 5)
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="latest"
        ) as consumer:
            consumer.assign([T0])
            assert await consumer.position(T0) == 5
            await cluster.append(T0, b"new")
            records = await poll_until(consumer, 1)
    assert [(r.offset, r.value) for r in records] == [(5, b"new")]


async def test_earliest_resets_an_out_of_range_position(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 10)
        cluster.delete_records(T0, 6)
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0])
            consumer.seek(T0, 2)  # below the log start now
            records = await poll_until(consumer, 4)
    assert [r.offset for r in records] == [6, 7, 8, 9]


async def test_latest_resets_a_position_past_the_end(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 3)
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="latest"
        ) as consumer:
            consumer.assign([T0])
            consumer.seek(T0, 100)
            assert await consumer.poll(500) == []
            assert await consumer.position(T0) == 3


async def test_reset_none_needs_a_seek_and_raises_out_of_range(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 3)
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="none"
        ) as consumer:
            consumer.assign([T0])
            with pytest.raises(NoOffsetForPartitionError, match="t-0"):
                await consumer.poll(100)
            consumer.seek(T0, 50)
            with pytest.raises(OffsetOutOfRangeError, match="t-0 at offset 50") as failure:
                await consumer.poll(5_000)
            assert failure.value.offsets == {T0: 50}
            consumer.seek(T0, 1)
            assert [r.offset for r in await poll_until(consumer, 2)] == [1, 2]


async def test_seek_to_beginning_and_end_and_offset_lookups(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 8)
        cluster.delete_records(T0, 2)
        async with open_consumer(cluster.bootstrap, connector=cluster.connector()) as consumer:
            consumer.assign([T0])
            consumer.seek_to_beginning()
            assert await consumer.position(T0) == 2
            consumer.seek_to_end([T0])
            assert await consumer.position(T0) == 8
            assert await consumer.beginning_offsets([T0]) == {T0: 2}
            assert await consumer.end_offsets([T0]) == {T0: 8}
            assert await consumer.partitions_for("t") == [0]
            with pytest.raises(UnknownTopicError):
                await consumer.partitions_for("nope")


# --- leaders, epochs and connections ---------------------------------------------------------


async def test_leader_move_mid_stream_loses_and_repeats_nothing(autojump_clock):
    async with open_test_cluster(2) as cluster:
        await cluster.create_topic("t", 1, replication_factor=2)  # the moves keep the data
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0])
            seen: list[int] = []

            async def produce() -> None:
                for i in range(60):
                    await cluster.append(T0, str(i).encode())
                    if i == 25:
                        await cluster.move_leader(T0, 2)
                    if i == 45:
                        await cluster.move_leader(T0, 1)
                    await trio.sleep(0.05)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce)
                seen = [r.offset for r in await poll_until(consumer, 60)]
    assert seen == list(range(60))
    assert cluster.requests_of(m.FetchRequest, broker=2), "it should have fetched from broker 2"


async def test_fenced_epoch_refreshes_metadata_and_carries_on(autojump_clock):
    async with open_test_cluster(2, topics={"t": 1}) as cluster:
        await fill(cluster, T0, 3)
        old_epoch = cluster.partition(T0).leader_epoch
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0])
            assert len(await poll_until(consumer, 3)) == 3
            # Same leader, new epoch (a reassignment bumps it): our epoch is now fenced.
            await cluster.reassign(T0, [1, 2])
            new_epoch = cluster.partition(T0).leader_epoch
            assert cluster.partition(T0).leader == 1 and new_epoch > old_epoch
            await cluster.append(T0, b"after")
            records = await poll_until(consumer, 1)
            assert [(r.offset, r.leader_epoch) for r in records] == [(3, new_epoch)]
    epochs = [
        r.topics[0].partitions[0].current_leader_epoch for r in cluster.requests_of(m.FetchRequest)
    ]
    assert old_epoch in epochs and epochs[-1] == new_epoch


async def test_a_dropped_fetch_connection_is_retried(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 4)
        cluster.drop(ApiKey.FETCH, times=2)
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0])
            assert [r.value for r in await poll_until(consumer, 4)] == [b"0", b"1", b"2", b"3"]


async def test_an_unexpected_partition_error_is_raised_from_poll(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 2)
        cluster.fail(ApiKey.FETCH, ErrorCode.TOPIC_AUTHORIZATION_FAILED, tp=T0)
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0])
            with pytest.raises(TributaryError) as failure:
                await poll_until(consumer, 1)
            assert failure.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert len(await poll_until(consumer, 2)) == 2  # raised once, then carries on


async def test_poll_needs_an_assignment(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_consumer(cluster.bootstrap, connector=cluster.connector()) as consumer:
            with pytest.raises(ConsumerStateError, match="assign"):
                await consumer.poll(10)
            with pytest.raises(ConsumerStateError, match="not assigned"):
                consumer.seek(T0, 0)
            consumer.assign([T0])
            assert consumer.assignment() == {T0}
            consumer.assign([])
            assert consumer.assignment() == set()


def test_bad_settings_are_refused():
    from client.consumer import Consumer

    with pytest.raises(ValueError, match="auto_offset_reset"):
        Consumer(None, "h:1", auto_offset_reset="smallest")  # type: ignore[arg-type]


async def test_fetching_ahead_hands_out_every_record_once_in_order_across_seeks(autojump_clock):
    """The consumer fetches the next chunk while poll() hands out the buffered one: with
    small fetches and small polls, every record still comes out once, in order, and a
    seek drops whatever was fetched ahead of it."""
    async with open_test_cluster(topics={"t": 1}) as cluster:
        await fill(cluster, T0, 300, per_batch=7)
        async with open_consumer(
            cluster.bootstrap,
            connector=cluster.connector(),
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=200,  # about one batch per fetch
            max_poll_records=5,
        ) as consumer:
            consumer.assign([T0])
            first = await poll_until(consumer, 100)
            consumer.seek(T0, 50)  # while a fetch ahead is buffered or in flight
            rest = []
            with trio.fail_after(30):
                while not rest or rest[-1].offset < 299:
                    rest += await consumer.poll(1000)
        assert [r.offset for r in first] == list(range(len(first)))
        assert [r.offset for r in rest] == list(range(50, 300))
        assert [r.value for r in rest] == [str(i).encode() for i in range(50, 300)]
