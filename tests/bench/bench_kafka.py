"""Kafka clients against Tributary next to Tributary's own client, same records, same run.

One real cluster (3 broker processes, 1 controller, ZooKeeper). For acks=1 to an RF 1
topic and acks=all to an RF 3 topic (min.insync.replicas=2), 100-byte values:
- confluent-kafka (librdkafka, C) producing through the brokers' Kafka-protocol listener,
  next to Tributary's Python producer through the native listener;
- then each consumer reads its own topic from the beginning: confluent-kafka's through
  the Kafka listener (Kafka-format batches served verbatim), Tributary's through the
  native one (msgpack batches); plus confluent-kafka reading the Tributary-written topic
  (every batch converted to Kafka's format on the broker: the conversion's cost).
Prints figures and ratios, and reports the consume rows to the table
(tests/bench/table.py): a librdkafka consumer through the Kafka listener next to
Tributary's consumer, same records, same run. The cluster is stopped by pid at the end.
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
            seen += sum(
                1 for m in consumer.consume(num_messages=10_000, timeout=0.5) if not m.error()
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
        finally:
            cluster.down(timeout_s=20)


if __name__ == "__main__":
    main()
