"""Kafka AdminClients against a real 3-broker Tributary cluster's Kafka listeners: the
cluster and replica admin APIs Kafka's tools call.

confluent-kafka (librdkafka): `describe_cluster` (DescribeCluster, KIP-700) and
`elect_leaders` (ElectLeaders, KIP-460). kafka-python 3: `alter_partition_reassignments`
and `list_partition_reassignments` (KIP-455; confluent-kafka's Python AdminClient has
no reassignment call), `describe_log_dirs` and `describe_producers` (KIP-664). Each
answer is checked against what the cluster really did: the partition's replicas in
ZooKeeper after a move, its leader after an election, the bytes a partition holds, the
producer that wrote.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import running_cluster
from tests.integration.helpers import create_topic, partition_state, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("kafka-admin")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def confluent_admin(cluster):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.state.kafka_bootstrap_servers})


@pytest.fixture(scope="module")
def python_admin(cluster):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.state.kafka_bootstrap_servers.split(","),
        request_timeout_ms=30_000,
    )
    yield admin
    admin.close()


def test_confluent_describe_cluster_names_every_broker_at_its_kafka_listener(
    cluster, confluent_admin
):
    described = confluent_admin.describe_cluster(request_timeout=30).result(timeout=30)
    endpoints = {(n.id, n.host, n.port) for n in described.nodes}
    assert endpoints == {(b.id, "127.0.0.1", b.kafka_port) for b in cluster.state.brokers()}
    assert described.cluster_id  # the cluster id ZooKeeper holds
    assert described.controller.id in {b.id for b in cluster.state.brokers()}


def test_confluent_elect_leaders_moves_leadership_back_to_the_preferred_replica(
    cluster, confluent_admin
):
    from confluent_kafka import ElectionType, TopicPartition

    create_topic(cluster, "elect", partitions=1, rf=3)
    wait_until(lambda: partition_state(cluster, "elect", 0), 20)
    preferred = partition_state(cluster, "elect", 0).replicas[0]
    cluster.stop(f"broker-{preferred}")  # leadership moves away
    try:
        wait_until(lambda: partition_state(cluster, "elect", 0).leader != preferred, 30)
    finally:
        cluster.start(f"broker-{preferred}")
    wait_until(lambda: preferred in partition_state(cluster, "elect", 0).isr, 60)
    future = confluent_admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect", 0)])
    results = future.result(timeout=60)
    assert [(tp.topic, tp.partition, error) for tp, error in results.items()] == [
        ("elect", 0, None)
    ]
    assert partition_state(cluster, "elect", 0).leader == preferred
    again = confluent_admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect", 0)])
    (error,) = again.result(timeout=60).values()
    assert error is not None and error.code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED


def test_kafka_python_reassigns_a_partition_and_lists_the_move(cluster, python_admin):
    from kafka import TopicPartition

    create_topic(cluster, "moving", partitions=1, rf=2)
    wait_until(lambda: partition_state(cluster, "moving", 0), 20)
    before = partition_state(cluster, "moving", 0).replicas
    (outsider,) = {b.id for b in cluster.state.brokers()} - set(before)
    target = [outsider, before[0]]
    tp = TopicPartition("moving", 0)
    assert python_admin.alter_partition_reassignments({tp: target}) == {tp: None}
    listed = python_admin.list_partition_reassignments()  # empty once the move is done
    assert set(listed) <= {tp}
    wait_until(lambda: list(partition_state(cluster, "moving", 0).replicas) == target, 60)
    wait_until(lambda: python_admin.list_partition_reassignments() == {}, 30)
    state = partition_state(cluster, "moving", 0)
    assert sorted(state.isr) == sorted(target)


def test_kafka_python_describe_log_dirs_reports_each_brokers_partitions(cluster, python_admin):
    from kafka import KafkaProducer

    create_topic(cluster, "sized", partitions=1, rf=3)
    wait_until(lambda: partition_state(cluster, "sized", 0), 20)
    producer = KafkaProducer(
        bootstrap_servers=cluster.state.kafka_bootstrap_servers.split(","), acks="all"
    )
    for _ in range(100):
        producer.send("sized", b"x" * 1000)
    producer.flush(30)
    producer.close()
    answers = python_admin.describe_log_dirs(topic_partitions={"sized": [0]})
    sizes = {}
    for answer in answers:  # one per broker
        (log_dir,) = answer["log_dirs"]
        assert log_dir["error_code"] == 0 and log_dir["log_dir"]
        assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0  # v4: the disk's space
        for topic in log_dir["topics"]:
            for p in topic["partitions"]:
                sizes[answer["broker"]] = p["partition_size"]
    assert sorted(sizes) == [1, 2, 3]  # every replica's broker
    assert all(size >= 100_000 for size in sizes.values()), sizes


def test_kafka_python_describe_producers_shows_an_idempotent_producers_state(cluster, python_admin):
    from kafka import KafkaProducer, TopicPartition

    create_topic(cluster, "producers", partitions=1, rf=3)
    wait_until(lambda: partition_state(cluster, "producers", 0), 20)
    producer = KafkaProducer(
        bootstrap_servers=cluster.state.kafka_bootstrap_servers.split(","),
        enable_idempotence=True,
        acks="all",
    )
    for i in range(10):
        producer.send("producers", f"r-{i}".encode(), partition=0).get(timeout=30)
    producer_id = producer._transaction_manager.producer_id_and_epoch.producer_id
    producer.close()
    tp = TopicPartition("producers", 0)
    state = python_admin.describe_producers([tp])[tp]
    (active,) = state.active_producers
    assert active.producer_id == producer_id
    assert (active.producer_epoch, active.last_sequence) == (0, 9)  # ten records, one each
    assert active.last_timestamp > 0
    assert (active.coordinator_epoch, active.current_transaction_start_offset) == (-1, -1)


def test_group_offsets_listed_by_librdkafka_and_deleted_by_kafka_python(
    cluster, confluent_admin, python_admin
):
    """librdkafka lists a group's committed offsets (OffsetFetch v8, KIP-709's batched
    form); kafka-python deletes some (OffsetDelete, KIP-496), refused for a topic a live
    member subscribes to."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    create_topic(cluster, "offsets", partitions=2, rf=3)
    wait_until(lambda: partition_state(cluster, "offsets", 1), 20)
    bootstrap = cluster.state.kafka_bootstrap_servers.split(",")
    consumer = KafkaConsumer(
        "offsets", bootstrap_servers=bootstrap, group_id="offsets-g", enable_auto_commit=False
    )
    wait_until(lambda: consumer.poll(200) is not None and consumer.assignment(), 60)
    consumer.commit(
        {
            TopicPartition("offsets", 0): OffsetAndMetadata(7, "", -1),
            TopicPartition("offsets", 1): OffsetAndMetadata(9, "", -1),
        }
    )

    def listed() -> dict[int, int]:
        request = [ConsumerGroupTopicPartitions("offsets-g")]
        (future,) = confluent_admin.list_consumer_group_offsets(request).values()
        return {tp.partition: tp.offset for tp in future.result(timeout=30).topic_partitions}

    assert listed() == {0: 7, 1: 9}
    first = TopicPartition("offsets", 0)
    refused = python_admin.delete_group_offsets("offsets-g", [first])  # still subscribed
    assert refused[first].__name__ == "GroupSubscribedToTopicError"
    consumer.close()  # leaves the group: it is empty now
    deleted = python_admin.delete_group_offsets("offsets-g", [first])
    assert deleted[first].__name__ == "NoError"
    assert listed() == {1: 9}


def test_a_librdkafka_producer_auto_creates_a_new_topic(cluster):
    """auto.create.topics.enable (Kafka's default, on): a Kafka producer's Metadata for a
    topic no one created creates it with num.partitions and default.replication.factor;
    a native Metadata request allowing it does the same, one not allowing it does not."""
    import trio
    from confluent_kafka import Producer

    from client.connection import open_connection
    from client.protocol import messages as m

    producer = Producer({"bootstrap.servers": cluster.state.kafka_bootstrap_servers})
    reports: list = []
    for i in range(10):
        producer.produce(
            "auto-created", f"r-{i}".encode(), on_delivery=lambda e, _m: reports.append(e)
        )
    assert producer.flush(60) == 0
    assert reports == [None] * 10  # every record delivered to the new topic
    state = partition_state(cluster, "auto-created", 0)
    assert state and len(state.replicas) == 1  # default.replication.factor=1

    async def native(name: str, allow: bool) -> int:
        port = cluster.process("broker-1").port
        async with open_connection("127.0.0.1", port) as conn:
            request = m.MetadataRequest(topics=[name], allow_auto_topic_creation=allow)
            response = await conn.request(request, timeout_s=20)
            return response.topics[0].error_code

    assert trio.run(native, "not-created", False) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert trio.run(native, "natively-created", True) == 5  # LEADER_NOT_AVAILABLE: made
    wait_until(lambda: partition_state(cluster, "natively-created", 0), 30)
    assert partition_state(cluster, "not-created", 0) is None
