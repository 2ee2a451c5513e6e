"""Kafka clients against Tributary next to Tributary's own client, same records, same run.

One real cluster (3 broker processes, 1 controller, ZooKeeper). For acks=1 to an RF 1
topic and acks=all to an RF 3 topic (min.insync.replicas=2), 100-byte values:
- confluent-kafka (librdkafka, C) producing through the brokers' Kafka-protocol listener,
  next to Tributary's Python producer through the native listener;
- then each consumer reads its own topic from the beginning: confluent-kafka's through
  the Kafka listener (Kafka-format batches served verbatim), Tributary's through the
  native one (msgpack batches); plus confluent-kafka reading the Tributary-written topic
  (every batch converted to Kafka's format on the broker: the conversion's cost).
Last, a librdkafka producer's latency (one record at a time) on a topic deleted and
created again with fewer partitions, next to a fresh topic's (KIP-516's topic ids are
what lets librdkafka see the new topic). Prints figures and ratios, and reports the
consume and latency rows to the table (tests/bench/table.py). The cluster is stopped by
pid at the end.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time

import trio

from client.admin import NewTopic, open_admin
from client.consumer import open_consumer
from client.protocol.types import TopicPartition
from tests.bench.bench_cluster import throughput
from tests.bench.table import Row, report
from tools.cluster.launcher import LocalCluster

VALUE = b"x" * 100
RECORDS = int(os.environ.get("BENCH_CLUSTER_RECORDS", "100000"))
PARTITIONS = 3


async def create_topics(bootstrap: str, topics: list[NewTopic]) -> None:
    async with open_admin(bootstrap) as admin:
        await admin.create_topics(topics)


def confluent_produce(bootstrap: str, topic: str, acks: str) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 256 * 1024}
    )
    producer.produce(topic, VALUE)
    producer.flush(30)  # warm up: metadata and connections
    started = time.perf_counter()
    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return RECORDS / (time.perf_counter() - started)


def confluent_consume(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False}
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        started = time.perf_counter()
        seen = 0
        deadline = time.monotonic() + 120
        while seen < count and time.monotonic() < deadline:
            # consume() returns when it has num_messages or at the timeout: never ask for
            # more than are left, or the last call waits out its timeout for records that
            # will never come (that wait once made this figure 3-8x too low).
            wanted = min(10_000, count - seen)
            seen += sum(
                1 for m in consumer.consume(num_messages=wanted, timeout=0.5) if not m.error()
            )
        return seen / (time.perf_counter() - started)
    finally:
        consumer.close()


async def tributary_consume(bootstrap: str, topic: str, count: int) -> float:
    async with open_consumer(bootstrap) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        started = time.perf_counter()
        seen = 0
        with trio.move_on_after(120):
            while seen < count:
                seen += len(await consumer.poll(500))
        return seen / (time.perf_counter() - started)


def _latency_p50(producer, topic: str, count: int = 300) -> float:
    """Median ms from produce() to its delivery report, one record at a time."""
    latencies = []
    for i in range(count):
        done: list[object] = []
        started = time.perf_counter()
        producer.produce(topic, b"%d" % i, on_delivery=lambda error, _m, d=done: d.append(error))
        deadline = started + 30
        while not done and time.perf_counter() < deadline:
            producer.poll(0.0005)
        latencies.append((time.perf_counter() - started) * 1000)
    return sorted(latencies)[len(latencies) // 2]


def recreated_topic_latency(bootstrap: str) -> tuple[float, float]:
    """(fresh, re-created) p50 produce latency of a librdkafka producer that wrote to a
    10-partition topic before it was deleted and created again with 3 partitions."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, partitions in (("lat-fresh", 3), ("lat-again", 10)):
        admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "topic.metadata.refresh.interval.ms": 1000}
    )
    _latency_p50(producer, "lat-again", 100)
    admin.delete_topics(["lat-again"])["lat-again"].result(30)
    deadline = time.monotonic() + 60
    while True:  # the deletion completes in the background
        try:
            admin.create_topics([NewTopic("lat-again", 3, 3)])["lat-again"].result(30)
            break
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    recreated = _latency_p50(producer, "lat-again")
    fresh = _latency_p50(producer, "lat-fresh")
    producer.flush(30)
    return fresh, recreated


def row(label: str, theirs: float, ours: float) -> None:
    print(f"{label:36}{theirs:>18,.0f}{ours:>14,.0f}{ours / theirs:>8.2f}")


def main() -> None:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        cluster = LocalCluster(tmp, brokers=3, controllers=1, base_port=None, metrics=False)
        try:
            cluster.up(timeout_s=90)
            native = cluster.state.bootstrap_servers
            kafka = cluster.state.kafka_bootstrap_servers
            rf3 = {"min.insync.replicas": "2"}
            trio.run(
                create_topics,
                native,
                [
                    NewTopic("ck-rf1", PARTITIONS, 1),
                    NewTopic("ck-rf3", PARTITIONS, 3, configs=rf3),
                    NewTopic("tr-rf1", PARTITIONS, 1),
                    NewTopic("tr-rf3", PARTITIONS, 3, configs=rf3),
                ],
            )
            print(f"records: {RECORDS:,} x {len(VALUE)} bytes, linger 5 ms, batch 256 KiB")
            print(f"{'':36}{'confluent-kafka':>18}{'tributary':>14}{'ratio':>8}")
            for acks, rf, label in (
                ("1", 1, "produce acks=1   RF 1"),
                ("all", 3, "produce acks=all RF 3"),
            ):
                theirs = confluent_produce(kafka, f"ck-rf{rf}", acks)
                ours = trio.run(throughput, native, f"tr-rf{rf}", 1 if acks == "1" else "all")[0]
                row(f"{label} (records/s)", theirs, ours)
            total = RECORDS + 1
            theirs = confluent_consume(kafka, "ck-rf1", total)
            ours = trio.run(tributary_consume, native, "tr-rf1", total)
            row("consume own topic (records/s)", theirs, ours)
            report(
                Row("consume from the beginning, librdkafka (Kafka listener)", theirs, "records/s")
            )
            report(
                Row(
                    "consume from the beginning, Tributary consumer (poll)",
                    ours,
                    "records/s",
                    "librdkafka consumer",
                    theirs,
                )
            )
            converted = confluent_consume(kafka, "tr-rf1", total)
            print(
                f"confluent-kafka reading Tributary-written batches (converted on the broker): "
                f"{converted:,.0f} records/s ({converted / theirs:.2f} of verbatim)"
            )
            kafka_read = trio.run(tributary_consume, native, "ck-rf1", total)
            print(
                f"tributary consumer reading Kafka-format batches: {kafka_read:,.0f} records/s "
                f"({kafka_read / ours:.2f} of msgpack batches)"
            )
            fresh, recreated = recreated_topic_latency(kafka)
            print(
                f"librdkafka produce latency p50, one record at a time: fresh topic "
                f"{fresh:.2f} ms, topic deleted and created again {recreated:.2f} ms"
            )
            report(
                Row(
                    "librdkafka produce latency p50, re-created topic",
                    recreated,
                    "ms",
                    "fresh topic",
                    fresh,
                    "<= 1.5",
                )
            )
        finally:
            cluster.down(timeout_s=20)


if __name__ == "__main__":
    main()
