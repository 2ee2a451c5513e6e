"""The producer against an in-process cluster of real brokers (tests/support/cluster.py)
on the in-memory network, with Trio's MockClock where time matters.

Batching (size and linger), partitioning (keys, sticky keyless), retries that keep the
order after a leader moves or errors are injected, delivery timeouts, acks=0,
compression, backpressure, and the errors a caller sees.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.metadata import NoBrokersAvailableError, UnknownTopicError
from client.producer import (
    DeliveryTimeoutError,
    InvalidPartitionError,
    ProducerClosedError,
    ProducerTimeoutError,
    RecordMetadata,
    RecordTooLargeError,
    open_producer,
)
from client.producer.partitioner import DefaultPartitioner, partition_for_key
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import Codec, iter_batches
from client.protocol.types import TopicPartition
from tests.support import producer_faults
from tests.support.cluster import TestCluster, open_test_cluster

T0 = TopicPartition("t", 0)


def batch_sizes(cluster: TestCluster, tp: TopicPartition = T0) -> list[int]:
    """Record counts of each batch of `tp` in each Produce request, in arrival order."""
    return [h.records_count for p, h in cluster.produced_batches(tp.topic) if p == tp.partition]


# --- batching --------------------------------------------------------------------------


async def test_full_batches_go_out_at_once_and_the_rest_lingers(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        # 100-byte values cost 116 bytes each: 8 fit in a 1000-byte batch.
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), batch_size=1000, linger_ms=60_000
        ) as p:
            start = trio.current_time()
            handles = [await p.send("t", b"x" * 100) for _ in range(30)]
            await handles[23]
            assert trio.current_time() - start < 1  # three full batches did not linger
            assert not handles[24].done()
            await handles[29]
            assert trio.current_time() - start >= 60  # the last one waited for linger_ms
    assert batch_sizes(cluster) == [8, 8, 8, 6]
    assert [h.result().offset for h in handles] == list(range(30))


async def test_records_sent_within_linger_share_one_request(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), linger_ms=100
        ) as p:
            start = trio.current_time()
            first = await p.send("t", b"a")
            await trio.sleep(0.05)
            await p.send("t", b"b")
            last = await p.send("t", b"c")
            assert (await first).offset == 0
            assert (await last).offset == 2
            assert trio.current_time() - start >= 0.1
    assert batch_sizes(cluster) == [3]
    assert cluster.values(T0) == [b"a", b"b", b"c"]


async def test_flush_sends_lingering_records_now(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), linger_ms=10_000
        ) as p:
            start = trio.current_time()
            handle = await p.send("t", b"v")
            await p.flush()
            assert handle.done() and trio.current_time() - start < 1
            assert handle.result() == RecordMetadata("t", 0, 0, handle.result().timestamp)


# --- partitioning ----------------------------------------------------------------------


async def test_a_key_always_goes_to_its_hash_partition(autojump_clock):
    async with open_test_cluster(topics={"t": 4}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), linger_ms=5
        ) as p:
            sent = [
                (key, await p.send("t", f"{key}-{i}", key=key))
                for i in range(5)
                for key in (f"k{j}" for j in range(10))
            ]
            await p.flush()
    for key, handle in sent:
        assert handle.result().partition == partition_for_key(key.encode(), 4)
    for partition in range(4):
        keys = {r.key for r in cluster.records(("t", partition))}
        assert all(partition_for_key(k, 4) == partition for k in keys)


async def test_kafka_28s_partitioner_sticks_until_the_batch_is_sent(autojump_clock):
    async with open_test_cluster(topics={"t": 4}) as cluster:
        async with open_producer(
            cluster.bootstrap,
            connector=cluster.connector(),
            linger_ms=10_000,
            partitioner=DefaultPartitioner(),
        ) as p:
            first = [await p.send("t", b"a") for _ in range(20)]
            await p.flush()
            second = [await p.send("t", b"b") for _ in range(20)]
            await p.flush()
    first_partitions = {h.result().partition for h in first}
    second_partitions = {h.result().partition for h in second}
    assert len(first_partitions) == 1 and len(second_partitions) == 1
    assert first_partitions != second_partitions


async def test_keyless_records_stick_to_a_partition_until_batch_size_bytes(autojump_clock):
    """KIP-794: a sent batch does not move the sticky partition; batch_size bytes do."""
    async with open_test_cluster(topics={"t": 4}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), batch_size=2_000
        ) as p:
            small = [await p.send("t", b"a") for _ in range(5)]
            await p.flush()
            small += [await p.send("t", b"b") for _ in range(5)]
            await p.flush()
            big = [await p.send("t", b"x" * 100) for _ in range(200)]
            await p.flush()
    assert len({h.result().partition for h in small}) == 1
    runs = [h.result().partition for h in big]
    switches = sum(1 for a, b in zip(runs, runs[1:], strict=False) if a != b)
    assert len(set(runs)) > 1
    assert switches <= 200 * 100 // 1_500  # about one per batch_size bytes, no more


async def test_explicit_partition_and_headers_and_timestamp_are_kept(autojump_clock):
    async with open_test_cluster(topics={"t": 3}) as cluster:
        async with open_producer(cluster.bootstrap, connector=cluster.connector()) as p:
            handle = await p.send(
                "t", b"v", key=b"k", partition=2, headers=[("h", b"1")], timestamp_ms=1234
            )
            assert await handle == RecordMetadata("t", 2, 0, 1234)
    (record,) = cluster.records(("t", 2))
    assert (record.key, record.value, record.headers, record.timestamp) == (
        b"k",
        b"v",
        (("h", b"1"),),
        1234,
    )


# --- retries and ordering --------------------------------------------------------------


async def test_leader_move_loses_nothing_and_keeps_the_order(autojump_clock):
    async with open_test_cluster(2) as cluster:
        await cluster.create_topic("t", 2, replication_factor=2)  # the move keeps the data
        assert cluster.partition(T0).leader == 1
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), linger_ms=1, batch_size=400
        ) as p:
            handles = []
            for i in range(200):
                handles.append(await p.send("t", str(i), partition=i % 2))
                if i == 60:
                    await cluster.move_leader(T0, 2)  # broker 1: NOT_LEADER_OR_FOLLOWER
                if i % 10 == 0:
                    await trio.sleep(0.002)
    for partition in range(2):
        expected = [str(i).encode() for i in range(partition, 200, 2)]
        assert cluster.values(("t", partition)) == expected
    assert all(h.result().offset == i // 2 for i, h in enumerate(handles))
    to_new_leader = [
        part
        for request in cluster.requests_of(m.ProduceRequest, broker=2)
        for topic in request.topics
        for part in topic.partitions
        if part.partition == 0
    ]
    assert to_new_leader, "partition 0's records should have followed its leader to broker 2"


RETRIABLE = [
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
]

fault_lists = producer_faults.fault_lists(RETRIABLE)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(faults=fault_lists, linger=st.sampled_from([0, 2]), batch_size=st.sampled_from([200, 800]))
def test_retried_batches_are_never_overtaken(faults, linger, batch_size):
    """Whatever retriable trouble happens, every record is acked at an offset holding its
    value, and each partition's log (duplicates from unclear outcomes aside) is in the
    order the records were sent."""

    async def scenario() -> None:
        async with open_test_cluster(2) as cluster:
            # Without idempotence (acks=all now enables it by default): this is the
            # ordering guarantee alone; test_producer_idempotence.py runs the same faults
            # with it on and also asserts no duplicates.
            handles = await producer_faults.send_under_faults(
                cluster, faults, linger_ms=linger, batch_size=batch_size, enable_idempotence=False
            )
            for i, handle in enumerate(handles):
                md = handle.result()
                assert cluster.records(("t", md.partition))[md.offset].value == str(i).encode()
            for partition in range(3):
                log = cluster.values(("t", partition))
                first_seen = list(dict.fromkeys(log))
                assert first_seen == [str(i).encode() for i in range(partition, 60, 3)]

    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_non_retriable_error_fails_only_that_batch(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        cluster.fail(ApiKey.PRODUCE, ErrorCode.RECORD_LIST_TOO_LARGE, tp=T0)
        async with open_producer(cluster.bootstrap, connector=cluster.connector()) as p:
            doomed = await p.send("t", b"first")
            await p.flush()
            fine = await p.send("t", b"second")
            with pytest.raises(TributaryError) as failure:
                await doomed
            assert failure.value.code is ErrorCode.RECORD_LIST_TOO_LARGE
            assert (await fine).offset == 0
    assert cluster.values(T0) == [b"second"]


async def test_a_dropped_connection_is_retried(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        cluster.drop(ApiKey.PRODUCE)  # before appending: the retry is the only copy
        async with open_producer(cluster.bootstrap, connector=cluster.connector()) as p:
            assert (await (await p.send("t", b"v"))).offset == 0
    assert cluster.values(T0) == [b"v"]


async def test_records_expire_after_the_delivery_timeout(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        cluster.fail(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, tp=T0, times=float("inf"))
        async with open_producer(
            cluster.bootstrap,
            connector=cluster.connector(),
            delivery_timeout_ms=5_000,
            request_timeout_ms=1_000,
        ) as p:
            start = trio.current_time()
            handle = await p.send("t", b"v")
            with pytest.raises(DeliveryTimeoutError, match="NOT_ENOUGH_REPLICAS") as failure:
                await handle
            assert 5 <= trio.current_time() - start < 6
            assert "Expiring 1 record(s) for t-0" in str(failure.value)
    assert cluster.values(T0) == []


async def test_records_for_a_leaderless_partition_expire(autojump_clock):
    async with open_test_cluster(2, topics={"t": 1}) as cluster:
        async with open_producer(
            cluster.bootstrap,
            connector=cluster.connector(),
            delivery_timeout_ms=3_000,
            request_timeout_ms=1_000,
        ) as p:
            await p.send("t", b"warm-up")
            await p.flush()
            await cluster.stop_broker(1)  # the partition's only replica: now no leader
            start = trio.current_time()
            with pytest.raises(DeliveryTimeoutError):
                await (await p.send("t", b"v"))
            assert 3 <= trio.current_time() - start < 4


# --- acks, compression, backpressure ----------------------------------------------------


async def test_acks_zero_gives_offset_minus_one(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_producer(cluster.bootstrap, connector=cluster.connector(), acks=0) as p:
            handles = [await p.send("t", str(i)) for i in range(5)]
            await p.flush()
            assert [h.result().offset for h in handles] == [-1] * 5
            await trio.sleep(0.1)
    assert cluster.values(T0) == [str(i).encode() for i in range(5)]
    assert all(r.acks == 0 for r in cluster.requests_of(m.ProduceRequest))


async def test_acks_all_is_sent_as_minus_one(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_producer(cluster.bootstrap, connector=cluster.connector(), acks="all") as p:
            assert (await (await p.send("t", b"v"))).offset == 0
    assert [r.acks for r in cluster.requests_of(m.ProduceRequest)] == [-1]


@pytest.mark.parametrize(
    "name, codec",
    [("gzip", Codec.GZIP), ("lz4", Codec.LZ4), ("zstd", Codec.ZSTD), ("none", Codec.NONE)],
)
async def test_compressed_batches_round_trip(autojump_clock, name, codec):
    values = [f"value {i} ".encode() * 20 for i in range(50)]
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), compression_type=name, linger_ms=5
        ) as p:
            for value in values:
                await p.send("t", value, key=b"k")
    assert cluster.values(T0) == values
    batches = cluster.batches(T0)
    assert batches and all(header.codec is codec for b in batches for _, header in iter_batches(b))


async def test_send_waits_while_the_buffer_is_full(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        cluster.delay(ApiKey.PRODUCE, 5, times=float("inf"))
        # Each record costs 116 bytes of buffer: about 17 fit in 2000 bytes.
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), buffer_memory=2_000
        ) as p:
            start = trio.current_time()
            handles = [await p.send("t", b"x" * 100) for _ in range(40)]
            assert trio.current_time() - start >= 5  # had to wait for acks to free memory
            await p.flush()
    assert [h.result().offset for h in handles] == list(range(40))


async def test_send_gives_up_when_the_buffer_stays_full(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        cluster.delay(ApiKey.PRODUCE, 10, times=float("inf"))
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), buffer_memory=500, max_block_ms=1_000
        ) as p:
            for _ in range(4):
                await p.send("t", b"x" * 100)
            with pytest.raises(ProducerTimeoutError, match="buffer memory"):
                await p.send("t", b"x" * 100)


async def test_in_flight_requests_per_broker_are_capped(autojump_clock):
    async with open_test_cluster(topics={"t": 8}) as cluster:
        cluster.delay(ApiKey.PRODUCE, 1, times=float("inf"))
        async with open_producer(
            cluster.bootstrap,
            connector=cluster.connector(),
            max_in_flight_requests_per_connection=2,
        ) as p:
            for partition in range(8):
                await p.send("t", b"v", partition=partition)
                await trio.sleep(0.01)
            await trio.sleep(0.5)
            assert len(cluster.requests_of(m.ProduceRequest)) == 2
            await p.flush()
    assert sum(len(cluster.values(("t", p))) for p in range(8)) == 8


# --- errors a caller sees ---------------------------------------------------------------


async def test_unknown_topic_and_bad_partition_and_big_record_raise(autojump_clock):
    async with open_test_cluster(topics={"t": 2}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), max_request_size=1_000
        ) as p:
            with pytest.raises(UnknownTopicError, match="topic 'nope' does not exist"):
                await p.send("nope", b"v")
            with pytest.raises(InvalidPartitionError, match="partition 5"):
                await p.send("t", b"v", partition=5)
            with pytest.raises(RecordTooLargeError, match="max_request_size"):
                await p.send("t", b"x" * 2_000)
            with pytest.raises(TypeError):
                await p.send("t", 12345)  # type: ignore[arg-type]


async def test_a_producer_that_allows_it_has_a_new_topic_created(autojump_clock):
    async with open_test_cluster(2, broker_settings={"num.partitions": "3"}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), allow_auto_create_topics=True
        ) as p:
            metadata = await (await p.send("fresh", b"v", partition=2))
            assert (metadata.topic, metadata.partition, metadata.offset) == ("fresh", 2, 0)
        assert cluster.values(("fresh", 2)) == [b"v"]
        assert len(cluster.controller.context.partitions_of("fresh")) == 3


async def test_no_reachable_broker_fails_at_once(autojump_clock):
    async with open_test_cluster() as cluster:
        await cluster.stop_broker(1)
        with pytest.raises(NoBrokersAvailableError, match="cannot reach any broker at"):
            async with open_producer(cluster.bootstrap, connector=cluster.connector()):
                pass  # pragma: no cover


async def test_closing_flushes_and_then_refuses_records(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), linger_ms=60_000
        ) as p:
            handle = await p.send("t", b"v")
        assert (await handle).offset == 0
        with pytest.raises(ProducerClosedError):
            await p.send("t", b"late")


async def test_an_error_in_the_block_fails_unsent_records(autojump_clock):
    async with open_test_cluster(topics={"t": 1}) as cluster:
        with pytest.raises(RuntimeError, match="boom"):
            async with open_producer(
                cluster.bootstrap, connector=cluster.connector(), linger_ms=60_000
            ) as p:
                handle = await p.send("t", b"v")
                raise RuntimeError("boom")
        with pytest.raises(ProducerClosedError):
            await handle


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="acks"):
        from client.producer import parse_acks

        parse_acks("some")
    from client.producer import parse_compression

    with pytest.raises(ValueError, match="compression_type"):
        parse_compression("snappy")
