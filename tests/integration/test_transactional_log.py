"""Transactional data in the log on a real 3-broker cluster, without a transaction
coordinator: two producers (ids from InitProducerId) write transactional batches
straight to the partition leader, and the markers are sent with WriteTxnMarkers
directly, as a coordinator would.

- read_committed consumers (Tributary's, confluent-kafka's with isolation.level,
  kafka-python's, and `tributary consume --isolation-level read_committed`) see exactly
  the committed records (and the plain ones); read_uncommitted ones see every data
  record and never a marker.
- An open transaction holds the last stable offset: read_committed waits (ListOffsets
  latest is the LSO) while the high watermark moves on, and a fetch parked for it
  completes when the COMMIT marker lands.
- Markers are checked: a stale coordinator epoch is TRANSACTION_COORDINATOR_FENCED, a
  partition the broker does not lead NOT_LEADER_OR_FOLLOWER; a client's control batch is
  INVALID_RECORD.
- Every broker killed (-9) and restarted: the aborted-transaction index and the open
  transaction come back from disk (recovery), and reads are the same.
"""

from __future__ import annotations

import time

import pytest
import trio

from client.connection import open_connection
from client.consumer import open_consumer
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch, build_control_batch
from client.protocol.types import TopicPartition
from tests.integration.conftest import running_cluster
from tests.integration.helpers import broker_port, create_topic, partition_state, wait_until
from tests.integration.test_kafka_clients import kafka_bootstrap, tributary

pytestmark = pytest.mark.integration

TOPIC = "txn"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # No coordinator here: KIP-890's check would ask one about these producers and refuse.
    settings = {"transaction.partition.verification.enable": "false"}
    with running_cluster(tmp_path_factory.mktemp("txn-log"), **settings) as cluster:
        yield cluster


def leader_port(cluster, topic: str) -> int:
    leader = wait_until(lambda: partition_state(cluster, topic, 0), 30).leader
    return broker_port(cluster, leader)


def new_topic(cluster, name: str, rf: int = 3, **config) -> None:
    create_topic(
        cluster, name, partitions=1, rf=rf, **{"min.insync.replicas": min(rf, 2), **config}
    )
    wait_until(lambda: partition_state(cluster, name, 0), 30)


async def _request(port: int, request):
    async with open_connection("127.0.0.1", port) as conn:
        return await conn.request(request, timeout_s=40)


def producer_id(cluster) -> int:
    port = cluster.state.brokers()[0].port
    response = trio.run(_request, port, m.InitProducerIdRequest())
    assert response.error_code == ErrorCode.NONE
    return response.producer_id


class TxnWriter:
    """One producer's transactional batches, sequence numbers kept."""

    def __init__(self, cluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.pid = producer_id(cluster)
        self.seq = 0

    def write(self, *values: bytes, transactional_id: str | None = "tx") -> tuple[int, int]:
        batch = build_batch(
            [Record(None, v, int(time.time() * 1000)) for v in values],
            producer_id=self.pid,
            producer_epoch=0,
            base_sequence=self.seq,
            transactional=True,
        )
        code, offset = produce(self.cluster, self.topic, batch, transactional_id)
        if code == ErrorCode.NONE:
            self.seq += len(values)
        return code, offset

    def end(self, commit: bool, coordinator_epoch: int = 0, port: int | None = None) -> int:
        return write_marker(self.cluster, self.topic, self.pid, commit, coordinator_epoch, port)


def produce(cluster, topic: str, batch: bytes, transactional_id: str | None = None):
    request = m.ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=20_000,
        topics=[
            m.ProduceTopic(name=topic, partitions=[m.ProducePartition(partition=0, records=batch)])
        ],
    )
    response = trio.run(_request, leader_port(cluster, topic), request)
    part = response.topics[0].partitions[0]
    return part.error_code, part.base_offset


def write_marker(cluster, topic, pid, commit, coordinator_epoch=0, port=None) -> int:
    request = m.WriteTxnMarkersRequest(
        markers=[
            m.WritableTxnMarker(
                producer_id=pid,
                producer_epoch=0,
                transaction_result=commit,
                topics=[m.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])],
                coordinator_epoch=coordinator_epoch,
            )
        ]
    )
    response = trio.run(_request, port or leader_port(cluster, topic), request)
    [marker] = response.markers
    assert marker.producer_id == pid
    [result] = marker.topics[0].partitions
    return result.error_code


def plain(cluster, topic: str, *values: bytes) -> None:
    batch = build_batch([Record(None, v, int(time.time() * 1000)) for v in values])
    assert produce(cluster, topic, batch)[0] == ErrorCode.NONE


def read_tributary(cluster, topic: str, isolation: str, expected: int, settle_s: float = 1.0):
    """Every record from the beginning: until `expected` arrived (bounded), then
    `settle_s` more to see that nothing else comes."""

    async def go():
        async with open_consumer(
            cluster.state.bootstrap_servers, isolation_level=isolation, fetch_max_wait_ms=200
        ) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek_to_beginning()
            out = []
            with trio.move_on_after(30):
                while len(out) < expected:
                    out.extend(await consumer.poll(timeout_ms=200))
            with trio.move_on_after(settle_s):
                while True:
                    out.extend(await consumer.poll(timeout_ms=200))
            return [r.value for r in out]

    return trio.run(go)


def list_latest(cluster, topic: str, isolation_level: int) -> int:
    request = m.ListOffsetsRequest(
        isolation_level=isolation_level,
        topics=[
            m.ListOffsetsTopic(
                name=topic, partitions=[m.ListOffsetsPartition(partition=0, timestamp=-1)]
            )
        ],
    )
    response = trio.run(_request, leader_port(cluster, topic), request)
    part = response.topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    return part.offset


def read_confluent(cluster, topic: str, isolation: str, expected: int) -> list[bytes]:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    out: list[bytes] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        settle = None
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            for message in consumer.consume(num_messages=100, timeout=0.3):
                assert message.error() is None, message.error()
                out.append(message.value())
            if len(out) >= expected and settle is None:
                settle = time.monotonic() + 1.5
    finally:
        consumer.close()
    return out


def read_kafka_python(cluster, topic: str, isolation: str, expected: int) -> list[bytes]:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster),
        enable_auto_commit=False,
        group_id=None,
        isolation_level=isolation,
    )
    out: list[bytes] = []
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                out.extend(r.value for r in records)
        for records in consumer.poll(timeout_ms=1000).values():
            out.extend(r.value for r in records)
    finally:
        consumer.close()
    return out


def _two_producers(cluster, topic: str) -> tuple[list[bytes], list[bytes]]:
    """Interleaved transactions of two producers, half committed, half aborted, with
    plain records between: (what read_committed sees, every data record), in order."""
    a, b = TxnWriter(cluster, topic), TxnWriter(cluster, topic)
    committed: list[bytes] = []
    everything: list[bytes] = []

    def write(writer: TxnWriter, *values: bytes, keep: bool) -> None:
        assert writer.write(*values)[0] == ErrorCode.NONE
        everything.extend(values)
        if keep:
            committed.extend(values)

    for round_ in range(3):
        a_commits = round_ % 2 == 0
        write(a, *(f"a{round_}-{i}".encode() for i in range(3)), keep=a_commits)
        write(b, *(f"b{round_}-{i}".encode() for i in range(2)), keep=not a_commits)
        plain(cluster, topic, f"plain{round_}".encode())
        everything.append(f"plain{round_}".encode())
        committed.append(f"plain{round_}".encode())
        write(a, f"a{round_}-late".encode(), keep=a_commits)
        assert a.end(commit=a_commits) == ErrorCode.NONE
        assert b.end(commit=not a_commits) == ErrorCode.NONE
    return committed, everything


def _order_free(values: list[bytes]) -> list[bytes]:
    return sorted(values)


def test_read_committed_sees_exactly_the_committed_records(cluster):
    new_topic(cluster, TOPIC)
    committed, everything = _two_producers(cluster, TOPIC)
    assert len(committed) == 3 + 4 + 2 + 4  # plain; a's rounds 0 and 2; b's round 1
    # Within one partition the order is the log's: compare as lists.
    assert read_tributary(cluster, TOPIC, "read_committed", len(committed)) == committed
    uncommitted = read_tributary(cluster, TOPIC, "read_uncommitted", len(everything))
    assert uncommitted == everything  # every data record, no marker
    assert read_confluent(cluster, TOPIC, "read_committed", len(committed)) == committed
    assert read_confluent(cluster, TOPIC, "read_uncommitted", len(everything)) == everything
    assert read_kafka_python(cluster, TOPIC, "read_committed", len(committed)) == committed
    cli = tributary(
        "consume",
        TOPIC,
        "--bootstrap-server",
        cluster.state.bootstrap_servers,
        "--from-beginning",
        "--isolation-level",
        "read_committed",
        "--timeout-ms",
        "3000",
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines() == [v.decode() for v in committed]


def test_an_open_transaction_holds_the_lso_until_its_commit(cluster):
    topic = "txn-open"
    new_topic(cluster, topic)
    plain(cluster, topic, b"before")
    writer = TxnWriter(cluster, topic)
    code, first = writer.write(b"t1", b"t2")
    assert (code, first) == (ErrorCode.NONE, 1)
    plain(cluster, topic, b"after")
    # The HW moves on (acks=all answered), the LSO stays at the transaction's start.
    assert list_latest(cluster, topic, 0) == 4
    assert list_latest(cluster, topic, 1) == 1
    described = trio.run(
        _request,
        leader_port(cluster, topic),
        m.DescribeProducersRequest(
            topics=[m.DescribeProducersTopic(name=topic, partition_indexes=[0])]
        ),
    )
    [state] = described.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.current_txn_start_offset) == (writer.pid, 1)
    assert read_tributary(cluster, topic, "read_committed", 1) == [b"before"]
    assert read_tributary(cluster, topic, "read_uncommitted", 4) == [
        b"before",
        b"t1",
        b"t2",
        b"after",
    ]

    async def wait_for_commit():
        """A read_committed consumer parked at the LSO gets the records once the COMMIT
        marker lands."""
        async with open_consumer(
            cluster.state.bootstrap_servers, isolation_level="read_committed"
        ) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek(TopicPartition(topic, 0), 1)
            assert await consumer.poll(timeout_ms=1500) == []
            await trio.to_thread.run_sync(writer.end, True)
            out = []
            with trio.move_on_after(30):
                while len(out) < 3:
                    out.extend(await consumer.poll(timeout_ms=500))
            return [r.value for r in out]

    assert trio.run(wait_for_commit) == [b"t1", b"t2", b"after"]
    assert list_latest(cluster, topic, 1) == 5  # past the marker


def test_markers_and_control_batches_are_checked(cluster):
    topic = "txn-checks"
    new_topic(cluster, topic)
    writer = TxnWriter(cluster, topic)
    assert writer.write(b"x")[0] == ErrorCode.NONE
    assert writer.end(commit=True, coordinator_epoch=3) == ErrorCode.NONE
    assert writer.write(b"y")[0] == ErrorCode.NONE
    assert writer.end(commit=True, coordinator_epoch=2) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    state = partition_state(cluster, topic, 0)
    follower = next(r for r in state.replicas if r != state.leader)
    code = writer.end(commit=True, coordinator_epoch=3, port=broker_port(cluster, follower))
    assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    port = leader_port(cluster, topic)
    assert write_marker(cluster, "no-such-topic", writer.pid, True, port=port) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    forged = build_control_batch(writer.pid, 0, True, 3, int(time.time() * 1000))
    assert produce(cluster, topic, forged, "tx")[0] == ErrorCode.INVALID_RECORD
    # Transactional records need a transactional id (Kafka's answer).
    assert writer.write(b"z", transactional_id=None)[0] == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    assert writer.end(commit=True, coordinator_epoch=3) == ErrorCode.NONE
    assert read_tributary(cluster, topic, "read_committed", 2) == [b"x", b"y"]


def test_a_restart_of_every_broker_keeps_the_index_and_the_open_transaction(cluster):
    topic = "txn-restart"
    new_topic(cluster, topic, **{"segment.bytes": 1024})
    committed, everything = _two_producers(cluster, topic)
    writer = TxnWriter(cluster, topic)
    _, open_at = writer.write(b"open-1", b"open-2")
    plain(cluster, topic, b"last")
    assert list_latest(cluster, topic, 1) == open_at
    names = [f"broker-{b.id}" for b in cluster.state.brokers()]
    for name in names:
        cluster.kill(name)
    for name in names:
        cluster.start(name)
    wait_until(lambda: partition_state(cluster, topic, 0).leader >= 0, 60)
    wait_until(lambda: len(partition_state(cluster, topic, 0).isr) >= 2, 60)
    assert wait_until(lambda: _safe_latest(cluster, topic) == open_at, 60)
    assert read_tributary(cluster, topic, "read_committed", len(committed)) == committed
    assert writer.end(commit=False) == ErrorCode.NONE
    assert read_tributary(cluster, topic, "read_committed", len(committed) + 1) == [
        *committed,
        b"last",
    ]
    assert read_tributary(cluster, topic, "read_uncommitted", len(everything) + 3) == [
        *everything,
        b"open-1",
        b"open-2",
        b"last",
    ]


def _safe_latest(cluster, topic: str) -> int:
    try:
        return list_latest(cluster, topic, 1)
    except (AssertionError, OSError, Exception):
        return -1
