"""Topic and broker configs through real Kafka clients against a real 3-broker cluster
(real processes, real ZooKeeper): kafkajs (tests/node) and confluent-kafka's
AdminClient describe, alter and incrementally alter topic and broker configs; a dynamic
broker default (`log.retention.ms`) deletes old segments of a topic without an override,
live; `compression.type=gzip` makes every replica store gzip batches that a librdkafka
consumer reads back; `message.timestamp.difference.max.ms` refuses a record from an hour
ago with INVALID_TIMESTAMP; CreateTopics accepts every Kafka 2.8 topic config; and
`tributary configs --entity-type brokers` describes and alters broker configs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from client.protocol.records import Codec, iter_batches
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import create_topic, partition_state, wait_until
from tools.cluster.launcher import LocalCluster

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_api = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "tests" / "node"
NODE = shutil.which("node")
needs_kafkajs = pytest.mark.skipif(
    NODE is None or not (NODE_DIR / "node_modules" / "kafkajs").is_dir(),
    reason="node or kafkajs is missing (make setup installs kafkajs into tests/node)",
)

# Every Kafka 2.8 topic config, with a value Kafka accepts (and one safe for a test topic).
EVERY_TOPIC_CONFIG = {
    "cleanup.policy": "delete",
    "compression.type": "lz4",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "1000",
    "flush.messages": "100000",
    "flush.ms": "60000",
    "follower.replication.throttled.replicas": "*",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "0:1,0:2",
    "max.compaction.lag.ms": "86400000",
    "max.message.bytes": "2000000",
    "message.downconversion.enable": "true",
    "message.format.version": "2.8-IV1",
    "message.timestamp.difference.max.ms": "86400000",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.4",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "2",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1048576",
    "segment.index.bytes": "1048576",
    "segment.jitter.ms": "1000",
    "segment.ms": "3600000",
    "unclean.leader.election.enable": "false",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("configs-clients"),
        brokers=3,
        controllers=1,
        base_port=None,
        broker_overrides={**TEST_BROKER_SETTINGS, "log.retention.check.interval.ms": 500},
        controller_overrides=dict(TEST_CONTROLLER_SETTINGS),
    )
    try:
        cluster.up(timeout_s=60)
        yield cluster
    finally:
        cluster.down(timeout_s=20)


def kafka_bootstrap(cluster: LocalCluster) -> str:
    return cluster.state.kafka_bootstrap_servers


def admin(cluster: LocalCluster):
    return admin_api.AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})


def result_of(futures: dict) -> dict:
    """Wait for each future of an AdminClient call: resource -> result or exception."""
    out = {}
    for key, future in futures.items():
        assert isinstance(future, Future)
        try:
            out[key] = future.result(timeout=30)
        except Exception as exc:  # the KafkaException the broker's error code became
            out[key] = exc
    return out


def error_code(exc) -> int:
    return exc.args[0].code()


def tributary(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def kafkajs(cluster: LocalCluster, steps: list[dict]) -> list:
    done = subprocess.run(
        [NODE, str(NODE_DIR / "admin_steps.js"), kafka_bootstrap(cluster), json.dumps(steps)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=NODE_DIR,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


TOPIC, BROKER = 2, 4  # kafkajs' ConfigResourceTypes


# --- kafkajs ---------------------------------------------------------------------------


@needs_kafkajs
def test_kafkajs_describes_and_alters_topic_and_broker_configs(cluster):
    create_topic(cluster, "kjs", partitions=1, rf=3, **{"retention.ms": "3600000"})
    wait_until(lambda: partition_state(cluster, "kjs", 0), 20)
    described, altered, broker_altered, refused, again = kafkajs(
        cluster,
        [
            {
                "op": "describeConfigs",
                "args": {
                    "resources": [{"type": TOPIC, "name": "kjs"}, {"type": BROKER, "name": "2"}],
                    "includeSynonyms": True,
                },
            },
            {
                "op": "alterConfigs",
                "args": {
                    "resources": [
                        {
                            "type": TOPIC,
                            "name": "kjs",
                            "configEntries": [
                                {"name": "retention.ms", "value": "7200000"},
                                {"name": "compression.type", "value": "zstd"},
                            ],
                        }
                    ]
                },
            },
            {
                "op": "alterConfigs",
                "args": {
                    "resources": [
                        {
                            "type": BROKER,
                            "name": "2",
                            "configEntries": [{"name": "log.cleaner.backoff.ms", "value": "2500"}],
                        }
                    ]
                },
            },
            {
                "op": "alterConfigs",
                "args": {
                    "resources": [
                        {
                            "type": TOPIC,
                            "name": "kjs",
                            "configEntries": [{"name": "retention.ms", "value": "soon"}],
                        }
                    ]
                },
            },
            {
                "op": "describeConfigs",
                "args": {
                    "resources": [
                        {"type": TOPIC, "name": "kjs", "configNames": ["retention.ms"]},
                        {"type": BROKER, "name": "2", "configNames": ["log.cleaner.backoff.ms"]},
                    ],
                    "includeSynonyms": True,
                },
            },
        ],
    )
    topic, broker = described["resources"]
    assert (topic["errorCode"], broker["errorCode"]) == (0, 0)
    entries = {e["configName"]: e for e in topic["configEntries"]}
    assert set(entries) == set(EVERY_TOPIC_CONFIG)
    retention = entries["retention.ms"]
    assert (retention["configValue"], retention["configSource"]) == ("3600000", 1)
    assert retention["configSynonyms"][0] == {
        "configName": "retention.ms",
        "configValue": "3600000",
        "configSource": 1,
    }
    assert entries["segment.bytes"]["configSynonyms"][-1]["configName"] == "log.segment.bytes"
    broker_entries = {e["configName"]: e for e in broker["configEntries"]}
    assert broker_entries["broker.id"]["configValue"] == "2"
    assert broker_entries["broker.id"]["readOnly"] is True
    assert broker_entries["log.retention.ms"]["readOnly"] is False
    assert broker_entries["zookeeper.session.timeout.ms"]["configSource"] == 4  # static
    assert [r["errorCode"] for r in altered["resources"]] == [0]
    assert [r["errorCode"] for r in broker_altered["resources"]] == [0]
    assert refused["error"]["type"] == "INVALID_REQUEST"
    topic, broker = again["resources"]
    (retention,) = topic["configEntries"]
    assert (retention["configValue"], retention["configSource"]) == ("7200000", 1)
    (backoff,) = broker["configEntries"]
    assert (backoff["configValue"], backoff["configSource"]) == ("2500", 2)
    # Legacy AlterConfigs replaced the whole set: only what the last one named is left.
    overrides = read_zk_json(cluster, "/config/topics/kjs")["config"]
    assert overrides == {"retention.ms": "7200000", "compression.type": "zstd"}


def read_zk_json(cluster: LocalCluster, path: str) -> dict:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.state.zookeeper_connect)
    zk.start(timeout=20)
    try:
        data, _ = zk.get(path)
        return json.loads(data)
    finally:
        zk.stop()
        zk.close()


# --- confluent-kafka -----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # tested on purpose
def test_confluent_describes_and_incrementally_alters_topic_and_broker_configs(cluster):
    client = admin(cluster)
    create_topic(cluster, "ck", partitions=1, rf=3)
    wait_until(lambda: partition_state(cluster, "ck", 0), 20)
    Op = admin_api.AlterConfigOpType
    topic = admin_api.ConfigResource(
        admin_api.ResourceType.TOPIC,
        "ck",
        incremental_configs=[
            admin_api.ConfigEntry("retention.ms", "86400000", incremental_operation=Op.SET),
            admin_api.ConfigEntry("cleanup.policy", "compact", incremental_operation=Op.APPEND),
        ],
    )
    broker = admin_api.ConfigResource(
        admin_api.ResourceType.BROKER,
        "3",
        incremental_configs=[
            admin_api.ConfigEntry("log.retention.bytes", "123456789", incremental_operation=Op.SET)
        ],
    )
    read_only = admin_api.ConfigResource(
        admin_api.ResourceType.BROKER,
        "1",
        incremental_configs=[
            admin_api.ConfigEntry("num.partitions", "3", incremental_operation=Op.SET)
        ],
    )
    # librdkafka sends one broker resource per call (to that broker).
    results = result_of(client.incremental_alter_configs([topic, broker]))
    assert results[topic] is None and results[broker] is None
    refused = result_of(client.incremental_alter_configs([read_only]))[read_only]
    assert error_code(refused) == confluent_kafka.KafkaError.INVALID_REQUEST

    described = result_of(
        client.describe_configs(
            [
                admin_api.ConfigResource(admin_api.ResourceType.TOPIC, "ck"),
                admin_api.ConfigResource(admin_api.ResourceType.BROKER, "3"),
            ]
        )
    )
    topic_configs, broker_configs = described.values()
    assert topic_configs["retention.ms"].value == "86400000"
    assert topic_configs["cleanup.policy"].value == "delete,compact"
    assert topic_configs["retention.ms"].source == admin_api.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    segment = topic_configs["segment.bytes"]  # the launcher's log.segment.bytes
    assert segment.source == admin_api.ConfigSource.STATIC_BROKER_CONFIG.value
    assert list(segment.synonyms) == ["log.segment.bytes"]  # a dict: by name
    assert topic_configs["preallocate"].is_default
    retention_bytes = broker_configs["log.retention.bytes"]
    assert retention_bytes.value == "123456789"
    assert retention_bytes.source == admin_api.ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not retention_bytes.is_read_only
    assert list(retention_bytes.synonyms) == ["log.retention.bytes"]
    assert broker_configs["broker.id"].is_read_only

    # Legacy AlterConfigs: the topic's overrides become exactly these.
    legacy = admin_api.ConfigResource(
        admin_api.ResourceType.TOPIC, "ck", set_config={"max.message.bytes": "500000"}
    )
    assert result_of(client.alter_configs([legacy]))[legacy] is None
    assert read_zk_json(cluster, "/config/topics/ck")["config"] == {"max.message.bytes": "500000"}
    # validate_only writes nothing.
    trial = admin_api.ConfigResource(
        admin_api.ResourceType.TOPIC, "ck", set_config={"retention.ms": "1"}
    )
    assert result_of(client.alter_configs([trial], validate_only=True))[trial] is None
    assert read_zk_json(cluster, "/config/topics/ck")["config"] == {"max.message.bytes": "500000"}


def test_a_dynamic_default_retention_deletes_old_segments_live(cluster):
    create_topic(cluster, "old", partitions=1, rf=3, **{"segment.bytes": "1024"})
    wait_until(lambda: partition_state(cluster, "old", 0), 20)
    hour_ago = int(time.time() * 1000) - 3_600_000
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all"}
    )
    failures = []
    for i in range(60):
        producer.produce(
            "old",
            value=b"x" * 100,
            timestamp=hour_ago + i,
            on_delivery=lambda err, msg: err and failures.append(err),
        )
        producer.flush(30)  # one record per batch: many small segments
    assert not failures
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "group.id": "watermarks"}
    )
    tp = confluent_kafka.TopicPartition("old", 0)
    try:
        low, high = consumer.get_watermark_offsets(tp, timeout=20)
        assert (low, high) == (0, 60)
        # The cluster-wide default (resource name "", which the Kafka clients' admin
        # APIs do not let one name): through the CLI, as kafka-configs.sh does.
        done = tributary(
            "configs", "alter", "--entity-type", "brokers", "--entity-default",
            "--add-config", "log.retention.ms=600000",  # 10 minutes: every record is older
            "--bootstrap-server", cluster.state.bootstrap_servers,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert read_zk_json(cluster, "/config/brokers/<default>")["config"] == {
            "log.retention.ms": "600000"
        }
        # Every broker describes the topic's retention.ms from the new default.
        client = admin(cluster)
        resource = admin_api.ConfigResource(admin_api.ResourceType.TOPIC, "old")
        entry = result_of(client.describe_configs([resource]))[resource]["retention.ms"]
        assert entry.value == "600000"
        assert entry.source == admin_api.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        wait_until(lambda: consumer.get_watermark_offsets(tp, timeout=10)[0] > 50, 60)
    finally:
        consumer.close()
        tributary(
            "configs", "alter", "--entity-type", "brokers", "--entity-default",
            "--delete-config", "log.retention.ms",
            "--bootstrap-server", cluster.state.bootstrap_servers,
        )  # fmt: skip


def stored_codecs(cluster: LocalCluster, topic: str) -> dict[int, set[Codec]]:
    """Every broker's stored batches' codecs for partition 0 of `topic`."""
    out = {}
    for broker in cluster.state.brokers():
        directory = cluster.directory / f"broker-{broker.id}" / "data" / f"{topic}-0"
        codecs: set[Codec] = set()
        for segment in sorted(directory.glob("*.log")):
            data = segment.read_bytes()
            codecs |= {header.codec for _, header in iter_batches(data)}
        out[broker.id] = codecs
    return out


def test_compression_type_gzip_stores_gzip_batches_on_every_replica(cluster):
    create_topic(cluster, "zipped", partitions=1, rf=3, **{"compression.type": "gzip"})
    wait_until(lambda: partition_state(cluster, "zipped", 0), 20)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all", "compression.type": "none"}
    )
    for i in range(20):
        producer.produce("zipped", key=f"k{i}".encode(), value=f"value-{i}".encode())
    assert producer.flush(30) == 0
    wait_until(
        lambda: all(c == {Codec.GZIP} for c in stored_codecs(cluster, "zipped").values()), 30
    )
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "zipped-reader",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["zipped"])
        values = []
        deadline = time.monotonic() + 60
        while len(values) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [f"value-{i}".encode() for i in range(20)]
    finally:
        consumer.close()


def test_timestamps_too_far_from_the_broker_clock_are_refused(cluster):
    create_topic(
        cluster,
        "strict-time",
        partitions=1,
        rf=3,
        **{"message.timestamp.difference.max.ms": "60000"},
    )
    wait_until(lambda: partition_state(cluster, "strict-time", 0), 20)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all", "retries": 0}
    )
    reports = []
    now = int(time.time() * 1000)
    for value, timestamp in ((b"now", now), (b"old", now - 3_600_000)):  # one batch each
        producer.produce(
            "strict-time",
            value=value,
            timestamp=timestamp,
            on_delivery=lambda e, m: reports.append(e),
        )
        assert producer.flush(30) == 0
    assert reports[0] is None
    assert (
        reports[1] is not None and reports[1].code() == confluent_kafka.KafkaError.INVALID_TIMESTAMP
    )


def test_create_topics_accepts_every_kafka_28_topic_config(cluster):
    client = admin(cluster)
    assert len(EVERY_TOPIC_CONFIG) == 26
    new = admin_api.NewTopic("every-config", 1, 3, config=EVERY_TOPIC_CONFIG)
    assert result_of(client.create_topics([new], operation_timeout=30))["every-config"] is None
    resource = admin_api.ConfigResource(admin_api.ResourceType.TOPIC, "every-config")
    configs = result_of(client.describe_configs([resource]))[resource]
    assert {name: entry.value for name, entry in configs.items()} == EVERY_TOPIC_CONFIG
    assert all(
        entry.source == admin_api.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        for entry in configs.values()
    )


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_describes_and_alters_broker_configs(cluster):
    bootstrap = ("--bootstrap-server", cluster.state.bootstrap_servers)
    done = tributary(
        "configs", "alter", "--entity-type", "brokers", "--entity-default",
        "--add-config", "log.cleaner.backoff.ms=7000", *bootstrap,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Completed updating default config for brokers in the cluster.\n"
    done = tributary(
        "configs", "alter", "--entity-type", "brokers", "--entity-name", "1",
        "--add-config", "log.cleaner.backoff.ms=8000", *bootstrap,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    described = tributary(
        "configs", "describe", "--entity-type", "brokers", "--entity-name", "1", *bootstrap
    )
    assert described.returncode == 0, described.stderr
    header, line = described.stdout.splitlines()
    assert header == "Dynamic configs for broker 1 are:"
    # Every layer that sets it, highest first (the launcher's server.properties sets it too).
    assert line.startswith(
        "  log.cleaner.backoff.ms=8000 sensitive=false synonyms={"
        "DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=8000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=7000, "
    )
    assert line.endswith(", DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}")
    defaults = tributary(
        "configs", "describe", "--entity-type", "brokers", "--entity-default", *bootstrap
    )
    assert defaults.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.backoff.ms=7000 sensitive=false synonyms={"
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=7000}",
    ]
    refused = tributary(
        "configs", "alter", "--entity-type", "brokers", "--entity-name", "2",
        "--add-config", "log.dirs=/elsewhere", *bootstrap,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "INVALID_REQUEST" in refused.stderr and "log.dirs" in refused.stderr
    for args in (("--entity-default",), ("--entity-name", "1")):
        done = tributary(
            "configs", "alter", "--entity-type", "brokers", *args,
            "--delete-config", "log.cleaner.backoff.ms", *bootstrap,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
