"""Topic ids (KIP-516) on a real 3-broker cluster (real processes, real ZooKeeper): every
broker answers the id the topic znode holds, natively and on its Kafka listener; the id
survives restarts of a broker and of the controller; a topic deleted and created again
gets a new one; a topic whose znode has no id (written before ids existed) is given one;
confluent-kafka (librdkafka) sees the id; and Metadata for a name no topic can have
answers INVALID_TOPIC_EXCEPTION, to Tributary's client and to kafka-python.
"""

from __future__ import annotations

import uuid

import pytest
import trio
from kio.schema.metadata.v12 import request as metadata_v12

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.topic_ids import ZERO_TOPIC_ID, topic_id_of_bytes
from server_common import zkdata
from tests.integration.conftest import running_cluster
from tests.integration.helpers import create_topic, kafka_call, wait_until
from tools.cluster.launcher import LocalCluster

INVALID_TOPIC_EXCEPTION = 17


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("topic-ids")) as cluster:
        yield cluster


def native_metadata(cluster: LocalCluster, broker_id: int, *topics: str) -> m.MetadataResponse:
    async def go():
        port = cluster.process(f"broker-{broker_id}").port
        async with open_connection("127.0.0.1", port) as conn:
            return await conn.request(m.MetadataRequest(topics=list(topics)), timeout_s=20)

    return trio.run(go)


def native_ids(cluster: LocalCluster, topic: str) -> dict[int, uuid.UUID | ErrorCode]:
    """Each broker's answer for `topic`: its id, or the error code."""
    out: dict[int, uuid.UUID | ErrorCode] = {}
    for broker in cluster.state.brokers():
        (answer,) = native_metadata(cluster, broker.id, topic).topics
        code = ErrorCode.from_code(answer.error_code)
        out[broker.id] = topic_id_of_bytes(answer.topic_id) if code is ErrorCode.NONE else code
    return out


def kafka_metadata(cluster: LocalCluster, broker_id: int, *topics: str):
    """A Kafka Metadata v12 request to the broker's Kafka listener, over a plain socket."""
    request = metadata_v12.MetadataRequest(
        topics=tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    port = cluster.process(f"broker-{broker_id}").kafka_port
    return kafka_call(port, request, client_id="topic-ids-test", timeout_s=20)


def znode_id(cluster: LocalCluster, topic: str) -> uuid.UUID | None:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.state.zookeeper_connect)
    zk.start(timeout=10)
    try:
        data, _ = zk.get(zkdata.topic_path(topic))
    finally:
        zk.stop()
        zk.close()
    return zkdata.TopicAssignment.decode(topic, data).topic_id


def agreed_id(cluster: LocalCluster, topic: str, timeout_s: float = 30) -> uuid.UUID:
    """The topic's id once the znode has one and every broker answers it."""

    def agreed():
        found = znode_id(cluster, topic)
        answers = set(native_ids(cluster, topic).values())
        return found if found is not None and answers == {found} else None

    return wait_until(agreed, timeout_s, interval_s=0.2)


def delete_topic(cluster: LocalCluster, topic: str) -> None:
    async def go():
        port = cluster.state.brokers()[0].port
        async with open_connection("127.0.0.1", port) as conn:
            response = await conn.request(
                m.DeleteTopicsRequest(topic_names=[topic], timeout_ms=30_000), timeout_s=40
            )
        assert response.responses[0].error_code == ErrorCode.NONE, response

    trio.run(go)


def test_every_broker_answers_the_same_id_before_and_after_restarts(cluster):
    create_topic(cluster, "ids", partitions=3, rf=3)
    topic_id = agreed_id(cluster, "ids")
    assert topic_id != ZERO_TOPIC_ID
    for broker in cluster.state.brokers():
        (answer,) = kafka_metadata(cluster, broker.id, "ids").topics
        assert (answer.name, answer.error_code, answer.topic_id) == ("ids", 0, topic_id)

    cluster.stop("broker-2")
    cluster.start("broker-2")
    assert agreed_id(cluster, "ids") == topic_id

    # A new controller loads the id from ZooKeeper; a broker started after it (with an
    # empty metadata cache) learns the id from the new controller only.
    controller = cluster.state.controllers()[0].name
    cluster.kill(controller)
    cluster.stop("broker-3")
    cluster.start(controller)
    cluster.start("broker-3")
    assert agreed_id(cluster, "ids") == topic_id
    (answer,) = kafka_metadata(cluster, 3, "ids").topics
    assert answer.topic_id == topic_id


def test_a_topic_deleted_and_created_again_gets_a_new_id(cluster):
    create_topic(cluster, "again", partitions=2, rf=2)
    first = agreed_id(cluster, "again")
    delete_topic(cluster, "again")
    wait_until(
        lambda: (
            set(native_ids(cluster, "again").values()) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        ),
        30,
    )
    # The znodes go after the brokers dropped the topic: create once they are gone.
    wait_until(lambda: _absent(cluster, "again"), 30)
    create_topic(cluster, "again", partitions=2, rf=2)
    second = agreed_id(cluster, "again")
    assert second not in (first, ZERO_TOPIC_ID)


def _absent(cluster: LocalCluster, topic: str) -> bool:
    try:
        znode_id(cluster, topic)
    except Exception:  # kazoo's NoNodeError
        return True
    return False


def test_a_topic_znode_without_an_id_is_given_one_by_the_controller(cluster):
    from kazoo.client import KazooClient

    brokers = [b.id for b in cluster.state.brokers()]
    old = zkdata.TopicAssignment("from-before-ids", {0: tuple(brokers), 1: tuple(brokers[:2])})
    zk = KazooClient(hosts=cluster.state.zookeeper_connect)
    zk.start(timeout=10)
    try:
        zk.create(zkdata.topic_path(old.topic), old.encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    assert b"topic_id" not in old.encode()
    topic_id = agreed_id(cluster, old.topic)
    assert topic_id != ZERO_TOPIC_ID


def test_kafka_clients_see_the_topic_id(cluster):
    """kcat's JSON (-L -J) has no topic ids; librdkafka's DescribeTopics and kafka-python's
    admin do (kafka-python also asks by id, Metadata v12)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kafka_admin = pytest.importorskip("kafka.admin")
    from confluent_kafka.admin import AdminClient

    create_topic(cluster, "seen-by-clients", partitions=2, rf=3)
    topic_id = agreed_id(cluster, "seen-by-clients")
    admin = AdminClient({"bootstrap.servers": cluster.state.kafka_bootstrap_servers})
    futures = admin.describe_topics(
        confluent_kafka.TopicCollection(["seen-by-clients"]), request_timeout=20
    )
    described = futures["seen-by-clients"].result(timeout=30)
    # librdkafka prints ids in standard base64 ("+" and "/"), Kafka URL-safe: compare bits.
    high = described.topic_id.get_most_significant_bits() & (1 << 64) - 1
    low = described.topic_id.get_least_significant_bits() & (1 << 64) - 1
    assert uuid.UUID(int=high << 64 | low) == topic_id
    assert len(described.partitions) == 2

    client = kafka_admin.KafkaAdminClient(bootstrap_servers=cluster.state.kafka_bootstrap_servers)
    try:
        (by_name,) = client.describe_topics(["seen-by-clients"])
        assert (by_name["error_code"], by_name["topic_id"]) == (0, str(topic_id))
        (by_id,) = client.describe_topics([topic_id])
        assert (by_id["error_code"], by_id["name"]) == (0, "seen-by-clients")
        assert len(by_id["partitions"]) == 2
        (illegal,) = client.describe_topics(["bad$#!"])
        assert (illegal["error_code"], illegal["name"]) == (INVALID_TOPIC_EXCEPTION, "bad$#!")
    finally:
        client.close()


def test_metadata_for_an_illegal_name_is_invalid_topic_exception(cluster):
    for name in ("bad$#!", "x" * 250, "..", "."):
        (native,) = native_metadata(cluster, 1, name).topics
        assert native.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, name
        (kafka,) = kafka_metadata(cluster, 2, name).topics
        assert kafka.error_code == INVALID_TOPIC_EXCEPTION, name
    (unknown,) = kafka_metadata(cluster, 2, "legal-but-absent").topics
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_librdkafka_drains_every_message_after_a_topic_is_recreated_with_fewer_partitions(
    cluster,
):
    """librdkafka applies a smaller partition count only when the topic id changes: with
    the zero id, records it queued for partitions 3-9 of a topic deleted and created
    again with 3 partitions never drained. With ids, every record is delivered or, if it
    was sent to a partition that is gone, failed at once; then all go to the new three.
    (Its latency next to a fresh topic's is a `make bench BENCH_ARGS=kafka` row.)"""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = cluster.state.kafka_bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("shrunk", 10, 3)])["shrunk"].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0,
            "topic.metadata.refresh.interval.ms": 1000,
            "message.timeout.ms": 60_000,
            # Its metadata refresh between the deletion and the test's create would
            # auto-create "shrunk" (1 partition, the broker default) first: seen once.
            "allow.auto.create.topics": False,
        }
    )
    outcomes: list[object] = []

    def report(error, message) -> None:
        outcomes.append(error if error is not None else message.partition())

    for i in range(100):
        producer.produce("shrunk", f"before-{i}".encode(), on_delivery=report)
    assert producer.flush(30) == 0
    assert sorted(set(outcomes)) == list(range(10))  # every partition had records
    admin.delete_topics(["shrunk"])["shrunk"].result(30)

    def create_again() -> bool:  # the deletion completes in the background
        try:
            admin.create_topics([NewTopic("shrunk", 3, 3)])["shrunk"].result(30)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise
        return True

    wait_until(create_again, 60, 0.5)
    outcomes.clear()
    for i in range(200):  # some go to partitions 3-9, which no longer exist
        producer.produce("shrunk", f"after-{i}".encode(), on_delivery=report)
        producer.poll(0.005)
    assert producer.flush(60) == 0, "records stuck in librdkafka's queues"
    assert len(outcomes) == 200  # each one delivered, or failed for its gone partition
    gone = {KafkaError._UNKNOWN_PARTITION, KafkaError._DESTROY}
    assert all(o in (0, 1, 2) or o.code() in gone for o in outcomes), outcomes
    wait_until(lambda: len(producer.list_topics("shrunk").topics["shrunk"].partitions) == 3, 30)
    outcomes.clear()
    for i in range(100):
        producer.produce("shrunk", f"later-{i}".encode(), on_delivery=report)
    assert producer.flush(60) == 0
    assert sorted(set(outcomes)) == [0, 1, 2]
