"""Fetch sessions (KIP-227) on a real 3-broker cluster (real processes, real ZooKeeper,
real Kafka clients through the brokers' Kafka listeners).

- kafka-python's consumer uses incremental fetch sessions by default: reading a topic of
  many partitions from the beginning while more records trickle in, it gets every
  record, and the brokers' metrics show the incremental fetches they served and the
  sessions they keep. (librdkafka, hence confluent-kafka and kcat, sends sessionless
  fetches, epoch -1, whatever the broker supports: it reads the same topic in full too.)
- A raw Kafka Fetch v12 sequence to one leader: a full fetch creates a session (an id
  other than 0); an incremental fetch with nothing new answers no partition; after a
  produce, only that partition.
- The followers' own fetches are in sessions too (every broker keeps the privileged
  sessions of the others), and replication stays exact: every replica of every
  partition holds the same records.
"""

from __future__ import annotations

import datetime
import time
import urllib.request

import pytest
import trio
from kio.schema.fetch.v12 import request as fetch_v12

from client.sync import SyncProducer
from tests.integration.conftest import running_cluster
from tests.integration.helpers import create_topic, partition_state, wait_until
from tests.unit.test_kafka_listener import KafkaWire, kafka_batch, produce_request
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration

PARTITIONS = 48
RECORDS = 3_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("fetch-sessions")) as cluster:
        yield cluster


def metric(cluster: LocalCluster, name: str, labels: str = "") -> dict[int, float]:
    """`name{labels}` of every broker, by broker id (0 where absent)."""
    values = {}
    for broker in cluster.state.brokers():
        url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
        values[broker.id] = 0.0
        with urllib.request.urlopen(url, timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("#") or " " not in line:
                    continue
                key, value = line.rsplit(" ", 1)
                if key.split("{")[0].endswith(name) and labels in key:
                    values[broker.id] += float(value)
    return values


def produce(cluster: LocalCluster, topic: str, values: list[tuple[int, bytes]]) -> None:
    with SyncProducer(cluster.state.bootstrap_servers, acks=-1) as producer:
        handles = [producer.send(topic, value, partition=p) for p, value in values]
        producer.flush()
        for handle in handles:
            handle.get(timeout=30)


def test_kafka_python_reads_many_partitions_through_incremental_sessions(cluster):
    kafka = pytest.importorskip("kafka")
    create_topic(cluster, "sessions", partitions=PARTITIONS, rf=3)
    first = [(i % PARTITIONS, b"first-%d" % i) for i in range(RECORDS)]
    produce(cluster, "sessions", first)
    incremental_before = sum(
        metric(cluster, "fetch_requests_by_session_total", '"incremental"').values()
    )

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.state.kafka_bootstrap_servers,
        enable_auto_commit=False,
        group_id=None,
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=4096,  # several fetches per partition
    )
    assert consumer.config["enable_incremental_fetch_sessions"]
    got: dict[tuple[int, int], bytes] = {}
    try:
        consumer.assign([kafka.TopicPartition("sessions", p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 90
        trickled = False
        while len(got) < RECORDS + 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                for r in records:
                    got[(r.partition, r.offset)] = r.value
            if len(got) >= RECORDS and not trickled:
                # The consumer is idle in its sessions now: three more records, three
                # partitions.
                produce(cluster, "sessions", [(5, b"late-5"), (17, b"late-17"), (40, b"late-40")])
                trickled = True
    finally:
        consumer.close()
    assert sorted(v for v in got.values() if v.startswith(b"first-")) == sorted(v for _, v in first)
    assert {v for v in got.values() if v.startswith(b"late-")} == {
        b"late-5",
        b"late-17",
        b"late-40",
    }
    assert len(got) == RECORDS + 3

    served = metric(cluster, "fetch_requests_by_session_total", '"incremental"')
    assert sum(served.values()) > incremental_before
    assert all(count > 0 for count in metric(cluster, "incremental_fetch_sessions").values())

    # librdkafka does not do fetch sessions (it sends epoch -1): it reads it all the same.
    confluent_kafka = pytest.importorskip("confluent_kafka")
    confluent = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.state.kafka_bootstrap_servers,
            "group.id": "sessions-librdkafka",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    seen = 0
    try:
        confluent.subscribe(["sessions"])
        deadline = time.monotonic() + 90
        while seen < RECORDS + 3 and time.monotonic() < deadline:
            message = confluent.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
    finally:
        confluent.close()
    assert seen == RECORDS + 3


def _fetch(offsets: dict[int, int], session_id: int, epoch: int):
    return fetch_v12.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=(
            fetch_v12.FetchTopic(
                topic="raw",
                partitions=tuple(
                    fetch_v12.FetchPartition(
                        partition=p, fetch_offset=o, partition_max_bytes=1 << 20
                    )
                    for p, o in offsets.items()
                ),
            ),
        )
        if offsets
        else (),
        forgotten_topics_data=(),
    )


def _partitions(response) -> dict[int, object]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def test_a_raw_fetch_v12_sequence_creates_and_uses_a_session(cluster):
    create_topic(cluster, "raw", partitions=6, rf=3)
    leaders = {p: partition_state(cluster, "raw", p).leader for p in range(6)}
    leader = leaders[0]
    led = [p for p, b in leaders.items() if b == leader]
    port = cluster.process(f"broker-{leader}").kafka_port

    async def sequence():
        wire = KafkaWire(await trio.open_tcp_stream("127.0.0.1", port))
        try:
            full = await wire.call(_fetch(dict.fromkeys(led, 0), 0, 0))
            assert full.error_code == 0 and full.session_id != 0
            assert sorted(_partitions(full)) == led
            quiet = await wire.call(_fetch({}, full.session_id, 1))
            assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, full.session_id, ())
            produced = await wire.call(produce_request("raw", led[-1], kafka_batch(b"x")))
            assert produced.responses[0].partition_responses[0].error_code == 0
            news = _partitions(await wire.call(_fetch({}, full.session_id, 2)))
            assert list(news) == [led[-1]] and news[led[-1]].high_watermark == 1
            assert news[led[-1]].records
        finally:
            await wire.aclose()

    trio.run(sequence)


def test_followers_fetch_in_sessions_and_every_replica_matches(cluster):
    create_topic(cluster, "replicated", partitions=30, rf=3)
    produce(cluster, "replicated", [(i % 30, b"r-%d" % i) for i in range(900)])

    def in_sync() -> bool:
        return all(len(partition_state(cluster, "replicated", p).isr) == 3 for p in range(30))

    wait_until(in_sync, 60)
    # Followers' sessions: each broker's leader side keeps the other two's.
    wait_until(
        lambda: all(n >= 2 for n in metric(cluster, "incremental_fetch_sessions").values()), 30
    )
    served = metric(cluster, "fetch_requests_by_session_total", '"incremental"')
    assert all(count > 0 for count in served.values())
    # Every replica holds the same records: the logs' end offsets and high watermarks
    # agree (a scrape of each broker's per-partition gauges).
    ends = {
        broker: values
        for broker, values in _per_partition(cluster, "log_end_offset", "replicated").items()
    }
    for p in range(30):
        assert {ends[b].get(p) for b in ends} == {30}, f"partition {p}: {ends}"


def _per_partition(cluster: LocalCluster, name: str, topic: str) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = {}
    for broker in cluster.state.brokers():
        url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
        values: dict[int, float] = {}
        with urllib.request.urlopen(url, timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("#") or f'topic="{topic}"' not in line:
                    continue
                key, value = line.rsplit(" ", 1)
                if key.split("{")[0].endswith(name):
                    partition = int(key.split('partition="')[1].split('"')[0])
                    values[partition] = float(value)
        out[broker.id] = values
    return out
