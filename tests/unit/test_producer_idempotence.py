"""The idempotent producer against an in-process cluster of real brokers
(tests/support/cluster.py): retries of batches the broker already wrote are not written
again, sequences are stamped per partition, and Kafka 3.x's configuration rules."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.producer import Producer, idempotence_enabled, open_producer
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.support import producer_faults
from tests.support.cluster import open_test_cluster

T0 = TopicPartition("t", 0)


def sent_headers(cluster, tp=T0):
    return [h for p, h in cluster.produced_batches(tp.topic) if p == tp.partition]


async def test_a_retry_after_a_lost_answer_is_not_written_twice(autojump_clock):
    async with open_test_cluster(3, topics={"t": 1}) as cluster:
        # The leader appends, then the connection drops: the producer must retry.
        cluster.drop(ApiKey.PRODUCE, after_append=True, times=3)
        async with open_producer(cluster.bootstrap, connector=cluster.connector()) as p:
            handles = [await p.send("t", f"v{i}".encode(), partition=0) for i in range(4)]
            await p.flush()
            offsets = [(await h).offset for h in handles]
        assert cluster.values(T0) == [f"v{i}".encode() for i in range(4)]
        assert offsets == [0, 1, 2, 3]
        headers = sent_headers(cluster)
        assert len(headers) > 1  # retried
        assert all(h.producer_id >= 0 and h.producer_epoch == 0 for h in headers)
        assert len(cluster.requests_of(m.InitProducerIdRequest)) == 1


async def test_sequences_count_records_per_partition(autojump_clock):
    async with open_test_cluster(1, topics={"t": 2}) as cluster:
        async with open_producer(
            cluster.bootstrap, connector=cluster.connector(), linger_ms=5
        ) as p:
            for partition, count in ((0, 3), (1, 2), (0, 2)):
                for _ in range(count):
                    await p.send("t", b"x", partition=partition)
                await p.flush()
        assert [h.base_sequence for h in sent_headers(cluster, T0)] == [0, 3]
        assert [h.base_sequence for h in sent_headers(cluster, TopicPartition("t", 1))] == [0]


async def test_out_of_order_fails_the_batch_and_bumps_the_epoch(autojump_clock):
    async with open_test_cluster(1, topics={"t": 1}) as cluster:
        cluster.fail(ApiKey.PRODUCE, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, tp=T0)
        async with open_producer(cluster.bootstrap, connector=cluster.connector()) as p:
            doomed = await p.send("t", b"first")
            await p.flush()
            fine = await p.send("t", b"second")
            assert (await fine).offset == 0
            with pytest.raises(Exception) as failure:
                await doomed
            assert failure.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert [h.producer_epoch for h in sent_headers(cluster)][-1] == 1


async def test_acks_one_turns_idempotence_off_unless_asked_for(autojump_clock):
    async with open_test_cluster(1, topics={"t": 1}) as cluster:
        async with open_producer(cluster.bootstrap, connector=cluster.connector(), acks=1) as p:
            await (await p.send("t", b"v"))
        assert sent_headers(cluster)[0].producer_id == -1
        assert not cluster.requests_of(m.InitProducerIdRequest)


def test_kafka_3_configuration_rules():
    assert idempotence_enabled(None, -1, 5, 5)
    assert not idempotence_enabled(None, 1, 5, 5)
    assert not idempotence_enabled(None, -1, 0, 5)
    assert not idempotence_enabled(None, -1, 5, 6)
    assert not idempotence_enabled(False, -1, 5, 5)
    for acks, retries, in_flight in ((1, 5, 5), (0, 5, 5), (-1, 0, 5), (-1, 5, 6)):
        with pytest.raises(ValueError, match="enable_idempotence requires"):
            idempotence_enabled(True, acks, retries, in_flight)
    with pytest.raises(ValueError):
        Producer(None, "localhost:1", acks=1, enable_idempotence=True)


RETRIABLE = [
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
]
fault_lists = producer_faults.fault_lists(RETRIABLE)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(faults=fault_lists, linger=st.sampled_from([0, 2]), batch_size=st.sampled_from([200, 800]))
def test_retries_and_leader_moves_write_every_record_exactly_once(faults, linger, batch_size):
    """Errors, connections dropped before or after the leader appended, and leader moves
    (the new leader holds what the old one appended): with idempotence each partition's
    log is exactly the records sent to it, in order, each at its acknowledged offset."""

    async def scenario() -> None:
        async with open_test_cluster(2) as cluster:
            handles = await producer_faults.send_under_faults(
                cluster, faults, linger_ms=linger, batch_size=batch_size
            )
            for partition in range(3):
                expected = [str(i).encode() for i in range(partition, 60, 3)]
                assert cluster.values(("t", partition)) == expected
            for i, handle in enumerate(handles):
                assert handle.result().offset == i // 3

    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
