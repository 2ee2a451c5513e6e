"""librdkafka (confluent-kafka) with enable.idempotence=true against a real 3-broker
Tributary cluster, through the Kafka listener: InitProducerId gives it a producer id,
its batches carry id/epoch/sequence into the same producer-state checks as Tributary's
own producer, and with the partition leader paused (SIGSTOP) mid-stream every
acknowledged record is read back exactly once. kafka-python 3, idempotent by default,
works too (transactions: tests/integration/test_txn_coordinator.py)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.integration.helpers import create_topic, partition_state, wait_until
from tests.integration.test_kafka_clients import kafka_bootstrap, read_with_tributary

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration


def test_idempotent_librdkafka_through_a_paused_leader_writes_each_record_once(start_cluster):
    cluster = start_cluster(brokers=3, controllers=1)
    create_topic(cluster, "kidem", partitions=1, rf=3, **{"min.insync.replicas": 2})
    leader = wait_until(lambda: partition_state(cluster, "kidem", 0), 20).leader
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "enable.idempotence": True,
            "linger.ms": 5,
            "request.timeout.ms": 5000,
            "message.timeout.ms": 60_000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    delivered: list[tuple[int, bytes]] = []
    failed: list[str] = []

    def report(err, message) -> None:
        if err is None:
            delivered.append((message.offset(), message.value()))
        else:
            failed.append(str(err))

    sent = 0
    paused = resumed = False
    started = time.monotonic()
    try:
        while time.monotonic() - started < 14:
            producer.produce("kidem", value=f"v-{sent}".encode(), on_delivery=report)
            sent += 1
            producer.poll(0.001)
            elapsed = time.monotonic() - started
            if not paused and elapsed > 2:
                cluster.pause(str(leader))
                paused = True
            if paused and not resumed and elapsed > 9:
                cluster.resume(str(leader))
                resumed = True
    finally:
        cluster.resume(str(leader))
    assert producer.flush(90) == 0
    assert not failed, failed[:3]
    assert len(delivered) == sent
    # One more than sent: whatever a duplicate added is read too (bounded by the timeout).
    records = read_with_tributary(cluster, "kidem", sent + 1, timeout_s=20)
    counts = Counter(r.value for r in records)
    duplicates = [v for v, c in counts.items() if c > 1]
    print(f"librdkafka idempotent: {sent} sent, {len(records)} read, {len(duplicates)} dup")
    assert duplicates == [] and len(records) == sent
    at = {r.offset: r.value for r in records}
    assert [(o, v) for o, v in delivered if at.get(o) != v] == []


def test_kafka_python_with_its_default_idempotence(start_cluster):
    kafka = pytest.importorskip("kafka")
    cluster = start_cluster(brokers=1, controllers=1)
    create_topic(cluster, "kp-idem", partitions=2, rf=1)
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all")
    assert producer.config["enable_idempotence"]  # kafka-python 3's default
    try:
        futures = [producer.send("kp-idem", f"value-{i}".encode()) for i in range(2_000)]
        producer.flush(60)
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
    finally:
        producer.close(10)
    records = read_with_tributary(cluster, "kp-idem", 2_000)
    assert sorted(r.value for r in records) == sorted(f"value-{i}".encode() for i in range(2_000))
