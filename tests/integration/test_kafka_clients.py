"""Real Kafka clients against a real 3-broker Tributary cluster, through each broker's
Kafka-protocol listener: kcat, confluent-kafka (librdkafka), kafka-python and aiokafka.

None of these clients was written with Tributary in mind, so they judge what a user of
Kafka relies on: metadata that matches `tributary topics describe`; records produced by a
Kafka client (every codec they use) read back intact by Tributary's consumer, and records
produced by Tributary's producer read back intact by the Kafka client; no acknowledged
record lost when the partition leader is SIGKILLed under an acks=all producer, which
recovers by itself; and a librdkafka consumer group that shares partitions, survives a
member's death and resumes from the committed offsets.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from client.protocol.types import TopicPartition
from client.sync import SyncConsumer, SyncProducer
from tests.integration.conftest import running_cluster
from tests.integration.helpers import create_topic, partition_state, wait_until
from tools.cluster.launcher import LocalCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

ROOT = Path(__file__).resolve().parents[2]
KCAT = shutil.which("kcat")
needs_kcat = pytest.mark.skipif(
    KCAT is None, reason="kcat is not installed (make setup installs it)"
)
# Recent timestamps: records older than retention.ms (7 days) would be deleted mid-test.
BASE_TS = int(time.time() * 1000) - 60_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("kafka-clients")) as cluster:
        yield cluster


def kafka_bootstrap(cluster: LocalCluster) -> str:
    servers = cluster.state.kafka_bootstrap_servers
    assert servers, "the local cluster gives every broker a Kafka listener"
    return servers


def tributary(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def read_with_tributary(cluster: LocalCluster, topic: str, count: int, timeout_s: float = 60):
    """Every record of `topic` from the beginning, read by Tributary's own consumer."""
    records = []
    with SyncConsumer(cluster.state.bootstrap_servers) as consumer:
        partitions = consumer.partitions_for(topic)
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            records.extend(consumer.poll(500))
    return records


def produce_with_tributary(cluster: LocalCluster, topic: str, count: int, partition=None):
    with SyncProducer(cluster.state.bootstrap_servers, acks=-1) as producer:
        handles = [
            producer.send(
                topic,
                f"t-value-{i}".encode(),
                key=f"t-key-{i}".encode(),
                partition=partition,
                headers=[("origin", b"tributary"), ("i", str(i).encode())],
                timestamp_ms=BASE_TS + i,
            )
            for i in range(count)
        ]
        producer.flush()
        return [h.get(timeout=30) for h in handles]


def confluent_produce(bootstrap: str, topic: str, count: int, **config):
    """Send `count` keyed records with headers; returns the delivery reports that succeeded
    as (partition, offset, value) and the number of failed ones."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config}
    )
    delivered: list[tuple[int, int, bytes]] = []
    failed: list[str] = []

    def report(err, message) -> None:
        if err is None:
            delivered.append((message.partition(), message.offset(), message.value()))
        else:
            failed.append(str(err))

    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"k-{i}".encode(),
                    value=f"value-{i}".encode(),
                    headers=[("origin", b"confluent"), ("i", str(i).encode())],
                    timestamp=BASE_TS + i,
                    on_delivery=report,
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "every record delivered or failed within a minute"
    assert not failed, f"{len(failed)} deliveries failed, first: {failed[0]}"
    return delivered


def check_confluent_records(records, count: int) -> None:
    assert len(records) == count
    by_index = {int(r.headers[1][1]): r for r in records}
    assert sorted(by_index) == list(range(count))
    for i, r in by_index.items():
        assert r.key == f"k-{i}".encode()
        assert r.value == f"value-{i}".encode()
        assert r.headers == (("origin", b"confluent"), ("i", str(i).encode()))
        assert r.timestamp == BASE_TS + i


# --- metadata ------------------------------------------------------------------------


@needs_kcat
def test_kcat_lists_brokers_topics_leaders_and_isrs_as_topics_describe_does(cluster):
    create_topic(cluster, "kcat-meta", partitions=3, rf=3)
    wait_until(lambda: partition_state(cluster, "kcat-meta", 2), 20)
    listing = subprocess.run(
        [KCAT, "-b", kafka_bootstrap(cluster), "-L", "-J", "-t", "kcat-meta"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    seen = json.loads(listing.stdout)
    brokers = {b["id"]: b["name"] for b in seen["brokers"]}
    assert brokers == {b.id: f"127.0.0.1:{b.kafka_port}" for b in cluster.state.brokers()}
    described = tributary(
        "--bootstrap-server",
        cluster.state.bootstrap_servers,
        "topics",
        "describe",
        "kcat-meta",
        "--json",
    )
    assert described.returncode == 0, described.stderr
    expected = {
        p["partition"]: (p["leader"], sorted(p["replicas"]), sorted(p["isr"]))
        for p in json.loads(described.stdout)[0]["partitions"]
    }
    (topic,) = seen["topics"]
    assert topic["topic"] == "kcat-meta"
    got = {
        p["partition"]: (
            p["leader"],
            sorted(r["id"] for r in p["replicas"]),
            sorted(r["id"] for r in p["isrs"]),
        )
        for p in topic["partitions"]
    }
    assert got == expected


@needs_kcat
def test_kcat_round_trips_keyed_records_with_headers(cluster):
    create_topic(cluster, "kcat-rt", partitions=1, rf=3)
    lines = "".join(f"key-{i}:value {i}\n" for i in range(20))
    subprocess.run(
        [
            KCAT,
            "-b",
            kafka_bootstrap(cluster),
            "-P",
            "-t",
            "kcat-rt",
            "-K:",
            "-H",
            "trace=abc",
            "-H",
            "n=1",
        ],
        input=lines,
        text=True,
        timeout=30,
        check=True,
    )
    out = subprocess.run(
        [
            KCAT,
            "-b",
            kafka_bootstrap(cluster),
            "-C",
            "-t",
            "kcat-rt",
            "-o",
            "beginning",
            "-e",
            "-J",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    records = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert [(r["key"], r["payload"]) for r in records] == [
        (f"key-{i}", f"value {i}") for i in range(20)
    ]
    assert [r["offset"] for r in records] == list(range(20))
    assert all(r["headers"] == ["trace", "abc", "n", "1"] for r in records)
    # Tributary's consumer reads kcat's batches too.
    ours = read_with_tributary(cluster, "kcat-rt", 20)
    assert [(r.key, r.value, r.headers) for r in ours] == [
        (f"key-{i}".encode(), f"value {i}".encode(), (("trace", b"abc"), ("n", b"1")))
        for i in range(20)
    ]


def test_list_offsets_max_timestamp_names_the_exact_record_to_librdkafka_and_the_cli(cluster):
    """ListOffsets v7 (KIP-734): the record with the largest timestamp, inside a batch of
    out-of-order timestamps, for librdkafka's AdminClient and `get-offsets`."""
    create_topic(cluster, "max-ts", partitions=1, rf=3)
    stamps = [BASE_TS + d for d in (5, 90, 40, 90, 10, 70)]  # the first 90 is offset 1
    with SyncProducer(cluster.state.bootstrap_servers, acks=-1, linger_ms=50) as producer:
        handles = [producer.send("max-ts", b"v", partition=0, timestamp_ms=ts) for ts in stamps]
        producer.flush()
        assert [h.get(timeout=30).offset for h in handles] == list(range(6))
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})
    spec = OffsetSpec.max_timestamp()
    futures = admin.list_offsets({confluent_kafka.TopicPartition("max-ts", 0): spec})
    (info,) = [f.result(timeout=30) for f in futures.values()]
    assert (info.offset, info.timestamp) == (1, BASE_TS + 90)
    listed = tributary(
        "--bootstrap-server", cluster.state.bootstrap_servers,
        "get-offsets", "--topic", "max-ts", "--time", "max-timestamp",
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["max-ts:0:1"]


# --- records both ways -----------------------------------------------------------------


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_confluent_producer_100k_records_read_intact_by_tributary(cluster, codec):
    topic = f"confluent-{codec}"
    create_topic(cluster, topic, partitions=3, rf=3, **{"min.insync.replicas": 2})
    delivered = confluent_produce(
        kafka_bootstrap(cluster), topic, 100_000, **{"compression.type": codec}
    )
    assert len(delivered) == 100_000
    records = read_with_tributary(cluster, topic, 100_000)
    check_confluent_records(records, 100_000)
    # Each record sits at the offset its delivery report named.
    at = {(r.partition, r.offset): r.value for r in records}
    assert all(at[(p, o)] == v for p, o, v in delivered)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_confluent_producer_other_codecs(cluster, codec):
    topic = f"confluent-small-{codec}"
    create_topic(cluster, topic, partitions=1, rf=3)
    confluent_produce(kafka_bootstrap(cluster), topic, 2_000, **{"compression.type": codec})
    check_confluent_records(read_with_tributary(cluster, topic, 2_000), 2_000)


def test_confluent_consumer_reads_records_written_by_tributary(cluster):
    create_topic(cluster, "from-tributary", partitions=2, rf=3)
    acked = produce_with_tributary(cluster, "from-tributary", 5_000)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "unused",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition("from-tributary", p, 0) for p in range(2)])
        seen = {}
        deadline = time.monotonic() + 60
        while len(seen) < 5_000 and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                seen[(message.partition(), message.offset())] = message
    finally:
        consumer.close()
    assert len(seen) == 5_000
    for i, meta in enumerate(acked):
        message = seen[(meta.partition, meta.offset)]
        assert message.key() == f"t-key-{i}".encode()
        assert message.value() == f"t-value-{i}".encode()
        assert message.headers() == [("origin", b"tributary"), ("i", str(i).encode())]
        assert message.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, BASE_TS + i)


def test_kafka_python_both_ways(cluster):
    kafka = pytest.importorskip("kafka")
    create_topic(cluster, "kafka-python", partitions=2, rf=3)
    # kafka-python 3 turns idempotence on by default; Tributary has no InitProducerId yet.
    producer = kafka.KafkaProducer(
        bootstrap_servers=kafka_bootstrap(cluster),
        acks="all",
        compression_type="zstd",
        enable_idempotence=False,
    )
    try:
        futures = [
            producer.send(
                "kafka-python",
                key=f"k-{i}".encode(),
                value=f"value-{i}".encode(),
                headers=[("origin", b"confluent"), ("i", str(i).encode())],
                timestamp_ms=BASE_TS + i,
            )
            for i in range(5_000)
        ]
        producer.flush(60)
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
    finally:
        producer.close(10)
    check_confluent_records(read_with_tributary(cluster, "kafka-python", 5_000), 5_000)

    create_topic(cluster, "to-kafka-python", partitions=1, rf=3)
    acked = produce_with_tributary(cluster, "to-kafka-python", 2_000)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster), enable_auto_commit=False, group_id=None
    )
    try:
        consumer.assign([kafka.TopicPartition("to-kafka-python", 0)])
        consumer.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 2_000 and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value) for r in got] == [
        (m.offset, f"t-key-{i}".encode(), f"t-value-{i}".encode()) for i, m in enumerate(acked)
    ]
    assert got[7].headers == [("origin", b"tributary"), ("i", b"7")]


def test_aiokafka_both_ways(cluster):
    aiokafka = pytest.importorskip("aiokafka")
    create_topic(cluster, "aiokafka", partitions=2, rf=3)
    create_topic(cluster, "to-aiokafka", partitions=1, rf=3)
    acked = produce_with_tributary(cluster, "to-aiokafka", 2_000)

    async def run():
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=kafka_bootstrap(cluster), acks="all", compression_type="gzip"
        )
        await producer.start()
        try:
            for i in range(5_000):
                await producer.send(
                    "aiokafka",
                    key=f"k-{i}".encode(),
                    value=f"value-{i}".encode(),
                    headers=[("origin", b"confluent"), ("i", str(i).encode())],
                    timestamp_ms=BASE_TS + i,
                )
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=kafka_bootstrap(cluster), enable_auto_commit=False
        )
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition("to-aiokafka", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            while len(got) < 2_000:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 30)
                for batch in batches.values():
                    got.extend(batch)
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(asyncio.wait_for(run(), 120))
    check_confluent_records(read_with_tributary(cluster, "aiokafka", 5_000), 5_000)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (m.offset, f"t-key-{i}".encode(), f"t-value-{i}".encode()) for i, m in enumerate(acked)
    ]


# --- failures ----------------------------------------------------------------------------


def test_no_acknowledged_write_lost_when_the_leader_is_killed_under_a_confluent_producer(
    start_cluster,
):
    cluster = start_cluster(brokers=3, controllers=1)
    create_topic(cluster, "killed", partitions=1, rf=3, **{"min.insync.replicas": 2})
    leader = wait_until(lambda: partition_state(cluster, "killed", 0), 20).leader
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "acks": "all",
            "linger.ms": 5,
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

    killed_at: list[int] = []
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < 12:
        producer.produce("killed", value=f"v-{sent}".encode(), on_delivery=report)
        sent += 1
        producer.poll(0.001)
        if not killed_at and time.monotonic() - started > 3:
            killed_at.append(len(delivered))
            os.kill(cluster.process(f"broker-{leader}").pid, signal.SIGKILL)
    assert producer.flush(90) == 0
    assert killed_at and len(delivered) > killed_at[0] + 100, "the producer recovered by itself"
    new_leader = partition_state(cluster, "killed", 0).leader
    assert new_leader not in (-1, leader)
    # Without idempotence a batch retried after the kill may be written twice, so the
    # log can hold more records than were acknowledged: read through the last acked offset.
    records = read_with_tributary(cluster, "killed", max(o for o, _ in delivered) + 1)
    at = {r.offset: r.value for r in records}
    lost = [(o, v) for o, v in delivered if at.get(o) != v]
    assert lost == [], f"{len(lost)} acknowledged records lost; failed reports: {failed[:3]}"


class GroupMember:
    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.lines: list[dict] = []
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.kafka_group_member",
                bootstrap,
                group,
                topic,
                name,
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                pass

    def events(self, kind: str) -> list[dict]:
        return [e for e in list(self.lines) if e["event"] == kind]

    def assignment(self) -> list[int]:
        assigned = self.events("assigned")
        return assigned[-1]["partitions"] if assigned else []

    def stop(self, sig=None) -> None:
        if self.process.poll() is None:
            if sig is None:
                self.process.stdin.close()
            else:
                os.kill(self.process.pid, sig)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def test_confluent_consumer_group_shares_partitions_and_survives_a_member(cluster):
    topic, group = "group-orders", "confluent-group"
    create_topic(cluster, topic, partitions=6, rf=3)
    bootstrap = kafka_bootstrap(cluster)
    confluent_produce(bootstrap, topic, 3_000)
    members = [GroupMember(bootstrap, group, topic, f"m{i}") for i in range(3)]
    try:
        # All three share the six partitions, two each.
        wait_until(lambda: sorted(len(m.assignment()) for m in members) == [2, 2, 2], 40)
        assert sorted(p for m in members for p in m.assignment()) == list(range(6))
        wait_until(lambda: sum(len(m.events("consumed")) for m in members) >= 3_000, 40)
        described = tributary(
            "--bootstrap-server",
            cluster.state.bootstrap_servers,
            "groups",
            "describe",
            group,
            "--json",
        )
        assert described.returncode == 0, described.stderr
        assert group in described.stdout and "m0" in described.stdout

        victim, survivors = members[0], members[1:]
        orphaned = set(victim.assignment())
        committed = {}
        for event in victim.events("committed"):
            committed.update({int(p): o for p, o in event["offsets"].items()})
        victim.stop(signal.SIGKILL)
        confluent_produce(bootstrap, topic, 3_000)
        wait_until(
            lambda: sorted(p for m in survivors for p in m.assignment()) == list(range(6)), 40
        )
        consumed = lambda: {  # noqa: E731
            (e["partition"], e["offset"]) for m in members for e in m.events("consumed")
        }
        wait_until(lambda: len(consumed()) >= 6_000, 60)
        # The survivors picked the orphaned partitions up where the victim's commits left
        # them: not from the beginning, and with nothing skipped.
        for partition in orphaned:
            firsts = [
                e["offset"]
                for m in survivors
                for e in m.events("consumed")
                if e["partition"] == partition
            ]
            assert firsts and min(firsts) >= committed.get(partition, 0)
        values = {e["value"] for m in members for e in m.events("consumed")}
        assert values >= {f"value-{i}" for i in range(3_000)}
    finally:
        for member in members:
            member.stop()
