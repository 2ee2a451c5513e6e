"""Issue 13, items 2 and 3, against real processes (ZooKeeper, a controller, brokers):
the idempotent producer writes every acknowledged record exactly once when the leader is
paused (SIGSTOP) mid-stream and its requests in flight are retried against the new
leader; and a broker restarted (kill -9, or a clean stop) rebuilds its producer state
from `<offset>.snapshot` plus the log, so a retry sent after the restart is answered
with the original offsets instead of being written again."""

from __future__ import annotations

import signal
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import trio

from client.connection import open_connection
from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition
from tests.integration.helpers import create_topic, partition_state, wait_until

pytestmark = pytest.mark.integration

RECORDS = 4000
PARTITIONS = 3


def bootstrap_of(cluster) -> str:
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.state.brokers())


async def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    """Every record of the topic (bounded: stops when `expected` arrived or after 60 s)."""
    out = []
    async with open_consumer(bootstrap) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        with trio.move_on_after(60):
            while len(out) < expected:
                out.extend(await consumer.poll(500))
        with trio.move_on_after(2):  # anything beyond the expected count: duplicates
            while True:
                out.extend(await consumer.poll(500))
    return out


def stream_through_a_paused_leader(cluster, *, hold_back_a_follower: bool) -> tuple[int, int]:
    """Produce RECORDS idempotently (acks=all) while partition 0's leader is paused past
    the session timeout and resumed; read everything back and check that each acked
    record is there exactly once, where it was acked. With `hold_back_a_follower`, one
    follower is paused a second before the leader, so the leader's batches in flight
    reach the other follower but cannot be acknowledged (the high watermark waits for the
    held-back one): the new leader holds them when the producer retries them. Returns
    (the paused leader, the retries the brokers answered as duplicates)."""
    create_topic(cluster, "idem", PARTITIONS, 3, **{"min.insync.replicas": 2})
    state = partition_state(cluster, "idem", 0)
    leader = state.leader
    held_back = [b for b in state.isr if b != leader][:1] if hold_back_a_follower else []
    paused = [*held_back, leader]
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[BaseException] = []

    async def produce() -> None:
        async with open_producer(
            bootstrap_of(cluster),
            acks="all",
            enable_idempotence=True,
            linger_ms=2,
            request_timeout_ms=30_000,
        ) as producer:

            async def report(value: bytes, handle) -> None:
                try:
                    meta = await handle
                    acked[value] = (meta.partition, meta.offset)
                except Exception as exc:  # noqa: BLE001 - counted and reported below
                    failed.append(exc)

            async with trio.open_nursery() as nursery:
                for i in range(RECORDS):
                    value = f"record-{i:05d}".encode()
                    handle = await producer.send("idem", value, partition=i % PARTITIONS)
                    nursery.start_soon(report, value, handle)
                    if i == RECORDS // 4:
                        for broker in held_back:
                            cluster.pause(str(broker))
                            await trio.sleep(1)
                        cluster.pause(str(leader))
                    if i == RECORDS // 2:
                        # Past the session timeout: the controller has moved the leader.
                        await trio.to_thread.run_sync(
                            lambda: wait_until(
                                lambda: partition_state(cluster, "idem", 0).leader != leader,
                                30,
                                0.2,
                            )
                        )
                        for broker in paused:
                            cluster.resume(str(broker))
                    if i % 20 == 0:
                        await trio.sleep(0.001)  # a dense stream: batches always in flight

    try:
        trio.run(produce)
    finally:
        for broker in paused:
            cluster.resume(str(broker))  # SIGCONT to a running process is harmless
    assert not failed, failed[:3]
    assert len(acked) == RECORDS
    records = trio.run(read_all, bootstrap_of(cluster), "idem", PARTITIONS, RECORDS)
    counts = Counter(r.value for r in records)
    duplicates = {v: c for v, c in counts.items() if c > 1}
    deduplicated = duplicate_batches(cluster)
    print(
        f"read {len(records)} record(s), {len(duplicates)} duplicated; paused {paused}; "
        f"retries answered as duplicates by the brokers: {deduplicated}"
    )
    assert not duplicates, list(duplicates.items())[:5]
    assert set(counts) == set(acked)
    for r in records:  # every record where its acknowledgement said
        assert acked[r.value] == (r.partition, r.offset)
    return leader, deduplicated


def test_a_paused_leader_mid_stream_leaves_no_duplicates(start_cluster):
    stream_through_a_paused_leader(start_cluster(brokers=3), hold_back_a_follower=False)


def test_retries_of_batches_the_new_leader_holds_are_answered_not_rewritten(start_cluster):
    _, deduplicated = stream_through_a_paused_leader(
        start_cluster(brokers=3), hold_back_a_follower=True
    )
    # The batches in flight at the pause were on the new leader already: their retries
    # were answered with the offsets of that first write.
    assert deduplicated > 0


def duplicate_batches(cluster) -> int:
    """The brokers' duplicate_batches_total metrics, summed (informational: whether a
    retry met a batch already written depends on timing)."""
    total = 0
    for broker in cluster.state.brokers():
        if not broker.metrics_port:
            continue
        url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            for line in response.read().decode().splitlines():
                if "duplicate_batches_total" in line and not line.startswith("#"):
                    total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def _init_producer_id(port: int) -> int:
    async with open_connection("127.0.0.1", port) as conn:
        response = await conn.request(m.InitProducerIdRequest(), timeout_s=20)
        assert response.error_code == ErrorCode.NONE
        # A transactional id goes to the transaction coordinator, which refuses a
        # transaction timeout it cannot take (-1 here), as Kafka does.
        refused = await conn.request(m.InitProducerIdRequest(transactional_id="tx"), timeout_s=20)
        assert refused.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    return response.producer_id


async def _produce_raw(port: int, topic: str, batch: bytes) -> tuple[int, int]:
    async with open_connection("127.0.0.1", port) as conn:
        response = await conn.request(
            m.ProduceRequest(
                acks=-1,
                timeout_ms=10_000,
                topics=[
                    m.ProduceTopic(
                        name=topic, partitions=[m.ProducePartition(partition=0, records=batch)]
                    )
                ],
            ),
            timeout_s=20,
        )
    part = response.topics[0].partitions[0]
    return part.error_code, part.base_offset


@pytest.mark.parametrize("how", ["kill -9", "clean stop"])
def test_producer_state_survives_a_restart(start_cluster, how):
    cluster = start_cluster(brokers=1)
    broker = cluster.state.brokers()[0]
    create_topic(cluster, "snap", 1, 1, **{"segment.bytes": 2048})
    pid = trio.run(_init_producer_id, broker.port)
    batches = []
    offsets = []
    for seq in range(0, 60, 3):  # 20 batches of 3 records: several segments roll
        records = [Record(None, f"v{seq + i}".encode() * 20, int(time.time() * 1000), ())
                   for i in range(3)]  # fmt: skip
        batches.append(build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seq))
        code, offset = trio.run(_produce_raw, broker.port, "snap", batches[-1])
        assert code == ErrorCode.NONE
        offsets.append(offset)
    partition_dir = Path(broker.data_dir) / "snap-0"
    assert list(partition_dir.glob("*.snapshot")), "a roll writes a producer state snapshot"

    if how == "kill -9":
        cluster.kill("broker-1", signal.SIGKILL)
    else:
        cluster.stop("broker-1")
    cluster.start("broker-1")
    wait_until(lambda: partition_state(cluster, "snap", 0).leader == 1, 30, 0.2)

    # The last five batches are retried: each answered with its first offsets.
    for batch, offset in zip(batches[-5:], offsets[-5:], strict=True):
        code, again = wait_until(lambda b=batch: _retry(broker.port, b), 30, 0.3)
        assert (code, again) == (ErrorCode.NONE, offset)
    assert duplicate_batches(cluster) == 5  # counted since the restart
    # An older one is known to be written, but no longer where.
    code, _ = trio.run(_produce_raw, broker.port, "snap", batches[0])
    assert code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    # The next sequence continues the stream; a gap does not.
    nxt = build_batch([Record(None, b"next", 0, ())], producer_id=pid, producer_epoch=0,
                      base_sequence=60)  # fmt: skip
    gap = build_batch([Record(None, b"gap", 0, ())], producer_id=pid, producer_epoch=0,
                      base_sequence=70)  # fmt: skip
    assert trio.run(_produce_raw, broker.port, "snap", gap)[0] == (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert trio.run(_produce_raw, broker.port, "snap", nxt) == (ErrorCode.NONE, 60)


def _retry(port: int, batch: bytes):
    try:
        code, offset = trio.run(_produce_raw, port, "snap", batch)
    except Exception:  # noqa: BLE001 - the broker is still starting
        return None
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return None
    return code, offset
