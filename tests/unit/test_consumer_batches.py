"""The consumer's batch path: `decode_columns` gives exactly the records `decode_records`
does (and refuses the same malformed ones), and `poll_batches()` hands out exactly what
`poll()` would: the same records in the same order, at most `max_poll_records` per call,
the same positions and the same auto-commits (against an in-process cluster of real
brokers, on Trio's MockClock)."""

from __future__ import annotations

import msgpack
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from client.consumer import ConsumerBatch, ConsumerRecord, open_consumer
from client.consumer.batch import decode_fetched
from client.protocol import messages as m
from client.protocol.records import (
    ATTR_MSGPACK_PAYLOAD,
    InvalidRecordError,
    Record,
    assign_offsets,
    build_batch,
    build_kafka_batch,
    decode_columns,
    decode_records,
    filter_batch,
    pack_batch,
    read_header,
)
from client.protocol.types import TopicPartition
from tests.support.cluster import TestCluster, open_test_cluster
from tests.unit.test_consumer_decode import records
from tests.unit.test_group_consumer import cluster_for_groups, group_consumer

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


# --- decode_columns --------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(records, st.booleans(), st.booleans(), st.integers(0, 2**40))
def test_columns_are_the_records_decode_records_gives(batch, kafka_format, append_time, base):
    build = build_kafka_batch if kafka_format else build_batch
    data, _, _ = assign_offsets(
        build(batch), base, 3, log_append_time_ms=1_700_000_000_000 if append_time else None
    )
    view = memoryview(bytes(data))
    columns = decode_columns(view, read_header(view))
    assert [tuple(r) for r in decode_records(view)] == list(zip(*columns, strict=True))


def _tributary_batch(entries: list) -> memoryview:
    """A Tributary-format batch around hand-made msgpack entries."""
    return memoryview(
        pack_batch(
            msgpack.packb(entries, use_bin_type=True),
            base_offset=0,
            leader_epoch=0,
            attributes=ATTR_MSGPACK_PAYLOAD,
            last_offset_delta=len(entries) - 1,
            base_timestamp=0,
            max_timestamp=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            records_count=len(entries),
        )
    )


@pytest.mark.parametrize(
    "entry",
    [
        [0, 0, None, b"v"],  # a field short
        [0, 0, None, b"v", [], "extra"],  # a field too many
        [0, "late", None, b"v", []],  # a timestamp delta that is no number
        [0, 0, None, b"v", [["name"]]],  # a header that is no (name, value) pair
        [0, 0, None, b"v", 7],  # headers that are no list
        7,  # a record that is no list
        {"0": 0},  # a map where a record belongs
    ],
)
def test_malformed_records_are_refused_like_decode_records_refuses_them(entry):
    view = _tributary_batch([[0, 0, None, b"ok", []], entry])
    with pytest.raises(InvalidRecordError):
        decode_records(view)
    with pytest.raises(InvalidRecordError, match="malformed record"):
        decode_columns(view, read_header(view))


@pytest.mark.parametrize("build", [build_batch, build_kafka_batch])
def test_a_batch_the_cleaner_emptied_decodes_to_no_records(build):
    """Compaction can leave a batch holding no record: the consumer moves past it."""
    batch = build([Record(None, b"gone", 0), Record(None, b"gone too", 0)])
    empty = filter_batch(batch, lambda offset, key, value: False, keep_empty=True)
    view = memoryview(bytes(empty))
    assert not any(decode_columns(view, read_header(view)))
    kept = build_batch([Record(None, b"kept", 0)])
    data, _, _ = assign_offsets(bytearray(bytes(empty) + kept), 0, 0)
    got, next_offset, error = decode_fetched(T0, bytes(data), 0)
    assert (got.offsets, got.values, next_offset, error) == ([2], [b"kept"], 3, None)


def test_a_consumer_batch_slices_extends_and_builds_records():
    batch = ConsumerBatch("t", 2)
    view = memoryview(build_batch([Record(b"k", b"a", 10), Record(None, b"b", 11)]))
    batch.add_columns(decode_columns(view, read_header(view)), leader_epoch=4)
    more = ConsumerBatch("t", 2)
    more.add_columns(decode_columns(view, read_header(view)), leader_epoch=5)
    batch.extend(more)
    assert len(batch) == 4 and batch.leader_epochs == [4, 4, 5, 5]
    assert batch.records()[0] == ConsumerRecord("t", 2, 0, 10, b"k", b"a", (), 4)
    middle = batch.slice(1, 3)
    assert [r.value for r in middle.records()] == [b"b", b"a"]
    assert len(batch) == 4  # slicing leaves the batch alone
    assert "t-2" in repr(middle) and middle.topic_partition == ("t", 2)


# --- poll_batches against real brokers --------------------------------------------------


async def fill(cluster: TestCluster, tp: TopicPartition, count: int, per_batch: int) -> None:
    for start in range(0, count, per_batch):
        values = [
            f"{tp.partition}:{i}".encode() for i in range(start, min(count, start + per_batch))
        ]
        await cluster.append(tp, *values)


async def _consume(cluster: TestCluster, batches: bool, seek_at: int) -> list[list]:
    """Every call's records, as (partition, offset, value, leader epoch), until both
    partitions are read; seeks partition 0 back to 10 once `seek_at` records are in."""
    calls: list[list] = []
    async with open_consumer(
        cluster.bootstrap,
        connector=cluster.connector(),
        auto_offset_reset="earliest",
        max_poll_records=7,
        max_partition_fetch_bytes=300,  # a few batches per fetch: fetching ahead matters
    ) as consumer:
        consumer.assign([T0, T1])
        sought = False
        last = {0: -1, 1: -1}
        with trio.fail_after(60):
            while not (sought and last == {0: 99, 1: 139}):
                if batches:
                    got = [r for b in await consumer.poll_batches(1000) for r in b.records()]
                else:
                    got = await consumer.poll(1000)
                if got:
                    calls.append([(r.partition, r.offset, r.value, r.leader_epoch) for r in got])
                    last.update((r.partition, r.offset) for r in got)
                if not sought and sum(map(len, calls)) >= seek_at:
                    consumer.seek(T0, 10)
                    sought = True
        assert await consumer.position(T0) == 100 and await consumer.position(T1) == 140
    return calls


async def test_poll_batches_hands_out_what_poll_does(autojump_clock):
    async with open_test_cluster(topics={"t": 2}) as cluster:
        await fill(cluster, T0, 100, per_batch=9)
        await fill(cluster, T1, 140, per_batch=13)
        by_poll = await _consume(cluster, batches=False, seek_at=40)
        by_batches = await _consume(cluster, batches=True, seek_at=40)
    assert by_batches == by_poll
    assert max(map(len, by_batches)) == 7  # max_poll_records counts records
    offsets = {p: [o for call in by_batches for (q, o, _, _) in call if q == p] for p in (0, 1)}
    assert offsets[1] == list(range(140))
    before_seek = len(offsets[0]) - 90
    assert offsets[0] == list(range(before_seek)) + list(range(10, 100))


async def test_poll_batches_is_one_column_batch_per_partition(autojump_clock):
    async with open_test_cluster(topics={"t": 2}) as cluster:
        await fill(cluster, T0, 20, per_batch=20)
        await fill(cluster, T1, 20, per_batch=20)
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0, T1])
            seen: dict[TopicPartition, list[int]] = {T0: [], T1: []}
            with trio.fail_after(30):
                while sum(map(len, seen.values())) < 40:
                    batches = await consumer.poll_batches(1000)
                    assert len({b.topic_partition for b in batches}) == len(batches)
                    for b in batches:
                        assert b.values == [f"{b.partition}:{o}".encode() for o in b.offsets]
                        seen[b.topic_partition] += b.offsets
            assert seen == {T0: list(range(20)), T1: list(range(20))}
            assert await consumer.position(T0) == 20


async def test_auto_commit_after_poll_batches_commits_only_what_it_handed_out(autojump_clock):
    tp = TopicPartition("t", 0)
    async with cluster_for_groups(topics={"t": 1}) as cluster:
        await cluster.append(tp, *(str(i).encode() for i in range(20)))  # one batch
        async with group_consumer(
            cluster, max_poll_records=5, auto_commit_interval_ms=1000
        ) as consumer:
            consumer.subscribe(["t"])
            with trio.fail_after(60):
                while not await consumer.poll_batches(200):
                    pass
            await trio.sleep(3)
            # What the first call handed out counts as consumed once it is called again.
            assert await consumer.committed([tp]) == {tp: None}
            [batch] = await consumer.poll_batches(1000)
            assert batch.offsets == [5, 6, 7, 8, 9]
            await trio.sleep(3)
            assert await consumer.committed([tp]) == {tp: 5}
            await consumer.poll_batches(1000)
            await trio.sleep(3)
            assert await consumer.committed([tp]) == {tp: 10}
        commits = [
            r.topics[0].partitions[0].committed_offset
            for r in cluster.requests_of(m.OffsetCommitRequest)
        ]
        assert max(commits) == 15  # closing commits what the last call handed out
