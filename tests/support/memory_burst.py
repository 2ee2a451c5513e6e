"""A burst of large requests against one broker, on both its listeners, and the RSS
figures around it (tests/integration/test_memory_returns.py,
tests/bench/bench_scale.py): 100 MiB garbage frames (sent whole: the broker reads
them, finds no request in them and closes the connection), native produce requests of
several MiB (one 1 MiB batch per partition) and fetches of everything they wrote, and
the same through a Kafka client (confluent-kafka) on the Kafka listener."""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import confluent_kafka
import trio

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch
from tests.support.hostile import ANSWER_BOUND_S, MiB, rss_mib

GARBAGE_FRAME = 100 * MiB
BATCH_BYTES = 1000 * 1024  # one record per batch, under max.message.bytes (1 MiB)
KAFKA_RECORD_BYTES = 900_000  # under librdkafka's batch.size bound


@dataclass
class BurstResult:
    garbage_closed: int = 0  # garbage frames the broker answered by closing
    produced_bytes: int = 0
    fetched_bytes: int = 0
    kafka_produced: int = 0
    kafka_consumed: int = 0
    peak_rss_mib: float = 0.0
    samples: list[float] = field(default_factory=list)


def send_garbage_frame(port: int, size: int = GARBAGE_FRAME) -> bool:
    """Announce a `size` frame, send all of it (zeros), and return True if the broker
    then closed the connection (an error answer first, or none, both count)."""
    chunk = bytes(MiB)
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_BOUND_S) as sock:
        try:
            sock.sendall(struct.pack(">I", size))
            left = size
            while left:
                sent = sock.send(chunk[: min(left, len(chunk))])
                left -= sent
        except (BrokenPipeError, ConnectionResetError):
            return True  # closed before the end: also refused
        try:
            while sock.recv(65536):
                pass  # an error answer, then the close
        except ConnectionResetError:
            pass
        except TimeoutError:
            return False
    return True


async def _native_produce_and_fetch(
    port: int, topic: str, partitions: int, rounds: int
) -> tuple[int, int]:
    """`rounds` produce requests of `partitions` 1 MiB batches (acks=1), each followed by
    a fetch of everything it wrote in one response."""
    produced = fetched = 0
    value = b"v" * BATCH_BYTES
    async with open_connection("127.0.0.1", port) as conn:
        for _ in range(rounds):
            batch = build_batch([Record(None, value, int(time.time() * 1000))])
            answer = await conn.request(
                m.ProduceRequest(
                    acks=1,
                    timeout_ms=30_000,
                    topics=[
                        m.ProduceTopic(
                            name=topic,
                            partitions=[
                                m.ProducePartition(partition=p, records=batch)
                                for p in range(partitions)
                            ],
                        )
                    ],
                ),
                timeout_s=ANSWER_BOUND_S,
            )
            offsets = {}
            for part in answer.topics[0].partitions:
                assert part.error_code == ErrorCode.NONE, ErrorCode.from_code(part.error_code)
                offsets[part.partition] = part.base_offset
            produced += len(batch) * partitions
            response = await conn.request(
                m.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=64 * MiB,
                    topics=[
                        m.FetchTopic(
                            topic=topic,
                            partitions=[
                                m.FetchPartition(
                                    partition=p,
                                    fetch_offset=offset,
                                    partition_max_bytes=8 * MiB,
                                )
                                for p, offset in offsets.items()
                            ],
                        )
                    ],
                ),
                timeout_s=ANSWER_BOUND_S,
            )
            for part in response.topics[0].partitions:
                assert part.error_code == ErrorCode.NONE
                fetched += len(part.records)
    return produced, fetched


def _kafka_produce_and_consume(bootstrap: str, topic: str, count: int) -> tuple[int, int]:
    """`count` ~1 MiB records through librdkafka's producer, then read back from the
    start in large fetches; (records acknowledged, records consumed)."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 20,
            "batch.size": 1_000_000,  # one record a batch, under max.message.bytes
            "message.max.bytes": 16 * MiB,  # requests of several batches
        }
    )
    acked = []
    for i in range(count):
        producer.produce(
            topic,
            b"k" * KAFKA_RECORD_BYTES,
            partition=i % 4,
            on_delivery=lambda e, _m: acked.append(e),
        )
    producer.flush(ANSWER_BOUND_S)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"burst-{time.time()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 32 * MiB,
            "max.partition.fetch.bytes": 8 * MiB,
        }
    )
    consumed = 0
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(4)])
        deadline = time.monotonic() + ANSWER_BOUND_S
        while consumed < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                consumed += 1
    finally:
        consumer.close()
    return sum(1 for e in acked if e is None), consumed


def burst(
    pid: int,
    native_port: int,
    kafka_port: int,
    topic: str,
    *,
    garbage_frames: int = 3,
    rounds: int = 3,
    partitions: int = 4,
) -> BurstResult:
    """The burst (garbage frames on both listeners at once, then the produce/fetch
    traffic), while `pid`'s RSS is sampled."""
    result = BurstResult()
    stop = threading.Event()
    lock = threading.Lock()

    def sample() -> None:
        while not stop.is_set():
            result.samples.append(rss_mib(pid))
            stop.wait(0.1)

    def garbage(port: int) -> None:
        for _ in range(garbage_frames):
            if send_garbage_frame(port):
                result.garbage_closed += 1

    def native() -> None:
        produced, fetched = trio.run(
            _native_produce_and_fetch, native_port, topic, partitions, rounds
        )
        with lock:
            result.produced_bytes += produced
            result.fetched_bytes += fetched

    def kafka() -> None:
        acked, consumed = _kafka_produce_and_consume(
            f"127.0.0.1:{kafka_port}", topic, rounds * partitions
        )
        result.kafka_produced, result.kafka_consumed = acked, consumed

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # The garbage frames first (their free is what raised glibc's dynamic mmap threshold
    # in the report), then the produce/fetch traffic of several MiB a request,
    # two native connections and the Kafka client at once.
    phases = [
        [threading.Thread(target=garbage, args=(port,)) for port in (native_port, kafka_port)],
        [threading.Thread(target=native), threading.Thread(target=native)]
        + [threading.Thread(target=kafka)],
    ]
    for workers in phases:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(ANSWER_BOUND_S * 4)
    stop.set()
    sampler.join()
    result.peak_rss_mib = max(result.samples)
    return result


def settle_rss(pid: int, seconds: float = 3.0) -> float:
    """The median of `pid`'s RSS (MiB) sampled over `seconds`."""
    samples = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        samples.append(rss_mib(pid))
        time.sleep(0.2)
    samples.sort()
    return samples[len(samples) // 2]


def wait_for_rss(pid: int, at_most_mib: float, timeout_s: float) -> tuple[float, float]:
    """Poll `pid`'s RSS until it is at most `at_most_mib` or `timeout_s` passed:
    (the last figure, seconds waited)."""
    started = time.monotonic()
    while True:
        now = rss_mib(pid)
        waited = time.monotonic() - started
        if now <= at_most_mib or waited >= timeout_s:
            return now, waited
        time.sleep(0.5)
