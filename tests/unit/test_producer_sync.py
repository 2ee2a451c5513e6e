"""The synchronous facades (client/sync.py) against an in-process cluster of real brokers
serving TCP from another thread (tests/support/cluster.py's ClusterThread)."""

from __future__ import annotations

import pytest

from client.metadata import NoBrokersAvailableError, UnknownTopicError
from client.producer import RecordMetadata
from client.protocol.types import TopicPartition
from client.sync import SyncAdmin, SyncConsumer, SyncProducer
from tests.support.cluster import ClusterThread


@pytest.fixture
def runner():
    runner = ClusterThread(2)
    with runner:
        yield runner


def test_admin_producer_consumer_round_trip(runner):
    cluster = runner.cluster
    with SyncAdmin(cluster.bootstrap) as admin:
        admin.create_topic("t", 2, 2)
        assert admin.list_topics() == ["t"]
        assert admin.describe_cluster().controller_id == cluster.controller_id

    with SyncProducer(cluster.bootstrap, linger_ms=2, acks="all") as producer:
        handles = [producer.send("t", f"v{i}", key=f"k{i % 3}") for i in range(30)]
        producer.flush()
        assert all(h.done() for h in handles)
        first = handles[0].get(timeout=5)
        assert isinstance(first, RecordMetadata) and first.topic == "t"
        with pytest.raises(UnknownTopicError):
            producer.send("missing", b"v")

    with SyncConsumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        partitions = [TopicPartition("t", p) for p in consumer.partitions_for("t")]
        consumer.assign(partitions)
        assert consumer.assignment() == set(partitions)
        seen = []
        for record in consumer:
            seen.append(record.value)
            if len(seen) == 30:
                break
        assert sorted(seen) == sorted(f"v{i}".encode() for i in range(30))
        ends = consumer.end_offsets(partitions)
        assert sum(ends.values()) == 30
        consumer.seek_to_beginning()
        assert [consumer.position(tp) for tp in partitions] == [0, 0]
        busiest = max(partitions, key=lambda tp: ends[tp])
        consumer.assign([busiest])
        consumer.seek(busiest, 1)
        assert consumer.poll(2_000)[0].offset == 1


def test_the_batch_paths_send_many_and_poll_batches(runner):
    runner.call(runner.cluster.create_topic, "b", 2)
    values = [f"v{i}".encode() for i in range(500)]
    with SyncProducer(runner.cluster.bootstrap, linger_ms=5, acks="all") as producer:
        handles = producer.send_many("b", values, keys=[f"k{i % 7}" for i in range(500)])
        assert len(handles) == 500
        metadata = handles.get(timeout=10)
        assert handles.done() and len(metadata) == 500
        assert metadata == handles.get()  # done: answered without the loop
        with pytest.raises(ValueError):
            producer.send_many("b", [b"x", b"y"], keys=[b"only-one"])
    by_partition = {p: [m.offset for m in metadata if m.partition == p] for p in (0, 1)}
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())

    with SyncConsumer(runner.cluster.bootstrap) as consumer:
        consumer.assign([("b", 0), ("b", 1)])
        consumer.seek_to_beginning()
        got: dict[bytes, tuple[int, int]] = {}
        for _ in range(20):  # bounded: 20 polls of up to 2 s
            if len(got) == 500:
                break
            for batch in consumer.poll_batches(2_000):
                assert batch.offsets == sorted(batch.offsets)
                for offset, value in zip(batch.offsets, batch.values, strict=True):
                    got[value] = (batch.partition, offset)
    assert got == {v: (m.partition, m.offset) for v, m in zip(values, metadata, strict=True)}


def test_closing_flushes_and_later_calls_fail(runner):
    runner.call(runner.cluster.create_topic, "t", 1)
    producer = SyncProducer(runner.cluster.bootstrap, linger_ms=60_000)
    handle = producer.send("t", b"v")
    lingering = producer.send_many("t", [b"w", b"x"])
    with pytest.raises(TimeoutError, match="not every acknowledgement within 0.2 s"):
        lingering.get(timeout=0.2)
    with pytest.raises(TimeoutError, match="no acknowledgement within 0.2 s"):
        handle.get(timeout=0.2)
    producer.close()  # flushes: no waiting for the 60 s linger
    assert handle.get(timeout=1).offset == 0
    assert [m.offset for m in lingering.get(timeout=1)] == [1, 2]
    with pytest.raises(RuntimeError, match="closed"):
        producer.send("t", b"late")
    assert runner.call(runner.cluster.values, ("t", 0)) == [b"v", b"w", b"x"]


def test_an_unreachable_cluster_raises_from_the_constructor():
    with pytest.raises(NoBrokersAvailableError, match="cannot reach any broker at"):
        SyncProducer("127.0.0.1:1")
    with pytest.raises(NoBrokersAvailableError):
        SyncAdmin("127.0.0.1:1")
