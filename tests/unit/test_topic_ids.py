"""Topic ids (KIP-516): how they are made, written to ZooKeeper as Kafka 2.8 writes them,
read back, carried to brokers, and kept by the controller.

The id helpers and the topic znode are checked against Kafka's formats (a 22-character
URL-safe base64 text; the version 3 topic znode with "topic_id"); the controller and the
brokers run for real on the in-memory test cluster (tests/support/cluster.py): a topic
whose znode has no id (created before ids existed) gets one from the controller, which
every broker then answers; partition additions, reassignments and a controller failover
keep it; a topic deleted and created again gets a new one.
"""

from __future__ import annotations

import json
import uuid

import msgpack
import pytest
import trio

from broker.core.metadata_cache import MetadataCache, PartitionMetadata
from client.admin import open_admin
from client.protocol import messages as m
from client.protocol.schema import decode_struct
from client.protocol.topic_ids import (
    METADATA_TOPIC_ID,
    ZERO_TOPIC_ID,
    new_topic_id,
    parse_topic_id,
    topic_id_bytes,
    topic_id_of_bytes,
    topic_id_str,
)
from client.protocol.types import TopicPartition
from server_common import zkdata
from server_common.zkdata import LEADER_DURING_DELETE, TopicAssignment, ZkDataError
from tests.support.cluster import TestCluster, open_test_cluster

# -- the id ----------------------------------------------------------------------------------


def test_new_ids_are_random_version_4_uuids_and_never_the_reserved_ones():
    ids = {new_topic_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(i.version == 4 for i in ids)
    # Whatever the generator draws, the zero id and Kafka's metadata topic id are skipped.
    drawn = iter([ZERO_TOPIC_ID, METADATA_TOPIC_ID, ZERO_TOPIC_ID, uuid.UUID(int=7)])
    assert new_topic_id(lambda: next(drawn)) == uuid.UUID(int=7)


def test_text_form_is_kafkas_base64_and_reads_back():
    # Kafka's Uuid.METADATA_TOPIC_ID.toString() and Uuid.ZERO_UUID.toString().
    assert topic_id_str(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert topic_id_str(ZERO_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAA"
    for _ in range(100):
        topic_id = new_topic_id()
        text = topic_id_str(topic_id)
        assert len(text) == 22 and "=" not in text
        assert parse_topic_id(text) == topic_id
        assert parse_topic_id(text + "==") == topic_id  # Kafka's decoder takes padding too
    # URL-safe: "_" and "-" where standard base64 has "/" and "+".
    assert topic_id_str(uuid.UUID(int=(1 << 128) - 1)) == "_" * 21 + "w"
    assert parse_topic_id("-" * 21 + "w") == uuid.UUID(bytes=bytes([0xFB, 0xEF, 0xBE] * 5 + [0xFB]))


@pytest.mark.parametrize(
    "text", ["", "AAAA", "A" * 23, "A" * 21 + "+", "A" * 21 + "/", "A" * 21 + "=", 42, None]
)
def test_a_malformed_text_is_a_value_error(text):
    with pytest.raises(ValueError):
        parse_topic_id(text)


def test_wire_bytes_and_their_absence():
    topic_id = new_topic_id()
    assert topic_id_of_bytes(topic_id_bytes(topic_id)) == topic_id
    assert topic_id_bytes(None) == bytes(16)
    assert topic_id_of_bytes(b"") == ZERO_TOPIC_ID  # an older peer sent none
    assert topic_id_of_bytes(b"\x01" * 15) == ZERO_TOPIC_ID


# -- the topic znode ----------------------------------------------------------------------------


def test_topic_znode_as_kafka_2_8_writes_it():
    # What Kafka 2.8's TopicZNode.encode writes (its key order differs; JSON has none).
    kafka = (
        b'{"removing_replicas":{"1":[3]},"partitions":{"0":[1,2],"1":[2,3,4]},'
        b'"topic_id":"Q6ybIWYqQFCkzMw12D_Jjw","adding_replicas":{"1":[4]},"version":3}'
    )
    znode = TopicAssignment.decode("t", kafka, zk_version=4)
    assert znode.topic_id == parse_topic_id("Q6ybIWYqQFCkzMw12D_Jjw")
    assert znode.partitions == {0: (1, 2), 1: (2, 3, 4)}
    assert (znode.adding_replicas, znode.removing_replicas) == ({1: (4,)}, {1: (3,)})
    assert znode.zk_version == 4 and znode.id_text == "Q6ybIWYqQFCkzMw12D_Jjw"
    written = json.loads(znode.encode())
    assert written == json.loads(kafka)
    again = TopicAssignment.decode("t", znode.encode())
    assert again == znode  # the version read is not part of the value


def test_topic_znode_without_an_id():
    # Written before topic ids (Kafka 2.7 and older, or Tributary before this change).
    old = b'{"version":2,"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}'
    znode = TopicAssignment.decode("t", old)
    assert znode.topic_id is None and znode.id_text is None
    assert json.loads(znode.encode()) == json.loads(old)  # still version 2, no "topic_id"
    oldest = TopicAssignment.decode("t", b'{"version":1,"partitions":{"0":[1,2]}}')
    assert oldest.topic_id is None and oldest.partitions == {0: (1, 2)}
    # The zero id says "none" too.
    zero = b'{"version":3,"partitions":{"0":[1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}'
    assert TopicAssignment.decode("t", zero).topic_id is None


@pytest.mark.parametrize("bad", ['"not-an-id"', "17", '"AAAAAAAAAAAAAAAAAAAAA"', "[]"])
def test_a_malformed_topic_id_makes_the_znode_unreadable(bad):
    data = f'{{"version":3,"partitions":{{"0":[1]}},"topic_id":{bad}}}'.encode()
    with pytest.raises(ZkDataError, match="topic_id"):
        TopicAssignment.decode("t", data)


# -- the native wire -----------------------------------------------------------------------------


def test_messages_from_peers_older_than_topic_ids_still_decode():
    old_topic = {"error_code": 0, "name": "t", "is_internal": False, "partitions": []}
    topic = decode_struct(m.MetadataResponseTopic, msgpack.unpackb(msgpack.packb(old_topic)))
    assert topic_id_of_bytes(topic.topic_id) == ZERO_TOPIC_ID
    old_update = {
        "controller_id": 1000,
        "controller_epoch": 1,
        "partition_states": [],
        "live_brokers": [],
    }
    assert decode_struct(m.UpdateMetadataRequest, old_update).topic_ids == []
    old_created = {
        "name": "t",
        "error_code": 0,
        "error_message": None,
        "num_partitions": 1,
        "replication_factor": 1,
    }
    created = decode_struct(m.CreateTopicsResponseTopic, old_created)
    assert (created.topic_id, created.configs) == (bytes(16), [])


def test_the_metadata_cache_forgets_an_id_with_its_topics_last_partition():
    cache = MetadataCache()
    first, second = new_topic_id(), new_topic_id()
    state = PartitionMetadata(leader=1, leader_epoch=0, isr=(1,), replicas=(1,))
    gone = PartitionMetadata(leader=LEADER_DURING_DELETE, leader_epoch=0, isr=(1,), replicas=(1,))
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    cache.update(1000, 1, [(t0, state), (t1, state)], [], {"t": first, "u": second})
    assert (cache.topic_id("t"), cache.topic_id("u")) == (first, ZERO_TOPIC_ID)  # u: no partition
    cache.update(1000, 1, [(t0, gone)], [], {})
    assert cache.topic_id("t") == first
    cache.update(1000, 1, [(t1, gone)], [], {})
    assert cache.topic_id("t") == ZERO_TOPIC_ID and "t" not in cache.topic_ids
    cache.update(1000, 1, [(t0, state)], [], {"t": second})  # created again
    assert cache.topic_id("t") == second


# -- the controller and the brokers ------------------------------------------------------------


async def raw_znode(cluster: TestCluster, topic: str) -> tuple[bytes, int]:
    zk = cluster.zookeeper.client()
    await zk.start()
    try:
        data, stat = await zk.get(zkdata.topic_path(topic))
    finally:
        await zk.stop()
    return data, stat.version


async def znode(cluster: TestCluster, topic: str) -> TopicAssignment:
    data, version = await raw_znode(cluster, topic)
    return TopicAssignment.decode(topic, data, version)


async def write_znode(cluster: TestCluster, assignment: TopicAssignment) -> None:
    zk = cluster.zookeeper.client()
    await zk.start()
    try:
        await zk.create(zkdata.topic_path(assignment.topic), assignment.encode(), makepath=True)
    finally:
        await zk.stop()


def broker_ids(cluster: TestCluster, topic: str) -> set[uuid.UUID]:
    return {b.server.metadata_cache.topic_id(topic) for b in cluster.live()}


async def agreed_id(cluster: TestCluster, topic: str) -> uuid.UUID:
    """The id the znode holds, once every broker's metadata shows that same id."""

    async def everyone_agrees() -> bool:
        found = (await znode(cluster, topic)).topic_id
        return found is not None and broker_ids(cluster, topic) == {found}

    with trio.fail_after(30):
        while not await everyone_agrees():
            await trio.sleep(0.05)
    return (await znode(cluster, topic)).topic_id


async def test_the_controller_gives_ids_to_topics_created_without_one():
    cluster = TestCluster(3)
    # A topic from before topic ids: its znode is there before the controller starts.
    await write_znode(cluster, TopicAssignment("old", {0: (1, 2), 1: (2, 3)}))
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        try:
            old = await agreed_id(cluster, "old")
            raw = json.loads((await raw_znode(cluster, "old"))[0])
            assert raw["version"] == 3 and parse_topic_id(raw["topic_id"]) == old
            assert cluster.controller.context.topic_ids["old"] == old

            # One written while the controller runs, by a writer that knows no ids.
            await write_znode(cluster, TopicAssignment("older", {0: (3,)}))
            older = await agreed_id(cluster, "older")
            assert older != old
            # Topics created the usual way come with their id; the controller keeps it.
            await cluster.create_topic("new", 2, 2)
            created = await agreed_id(cluster, "new")
            assert created not in (old, older)
        finally:
            nursery.cancel_scope.cancel()
    cluster.remove_files()


async def test_ids_survive_partition_additions_reassignments_and_controller_failover():
    async with open_test_cluster(3, topics={"t": 1}) as cluster:
        topic_id = await agreed_id(cluster, "t")
        async with open_admin(cluster.bootstrap, connector=cluster.connector()) as admin:
            assert (await admin.describe_topics(["t"]))[0].topic_id == topic_id
            await admin.create_partitions({"t": 3})
        assert len((await znode(cluster, "t")).partitions) == 3
        assert await agreed_id(cluster, "t") == topic_id

        await cluster.reassign(("t", 0), [2, 3])  # the controller rewrites the znode
        after = await znode(cluster, "t")
        assert after.partitions[0] == (2, 3) and after.topic_id == topic_id

        epoch = cluster.controller.context.epoch
        cluster.zookeeper.expire_session(cluster.controller.zk.session_id)
        await cluster.until(
            lambda: (
                cluster.controller.context is not None
                and cluster.controller.context.epoch > epoch
                and cluster.controller.is_active
            ),
            "a new controller term",
        )
        await cluster.until(cluster._settled, "the new term told every broker")
        assert cluster.controller.context.topic_ids["t"] == topic_id
        assert broker_ids(cluster, "t") == {topic_id}


async def test_a_znode_rewritten_without_its_id_gets_it_back():
    async with open_test_cluster(3, topics={"t": 1}) as cluster:
        topic_id = await agreed_id(cluster, "t")
        current = await znode(cluster, "t")
        # A broker of an older version adds a partition: it writes no topic id.
        older = TopicAssignment("t", {**current.partitions, 1: (2, 3)})
        zk = cluster.zookeeper.client()
        await zk.start()
        try:
            await zk.set(zkdata.topic_path("t"), older.encode(), current.zk_version)
        finally:
            await zk.stop()
        await cluster.until(
            lambda: all(b.server.metadata_cache.has_leaders("t", 2) for b in cluster.live()),
            "the new partition is online",
        )
        assert await agreed_id(cluster, "t") == topic_id
        assert (await znode(cluster, "t")).partitions == older.partitions


async def test_a_topic_deleted_and_created_again_gets_a_new_id():
    async with open_test_cluster(3, topics={"t": 2}) as cluster:
        first = await agreed_id(cluster, "t")
        async with open_admin(cluster.bootstrap, connector=cluster.connector()) as admin:
            await admin.delete_topic("t")
            assert broker_ids(cluster, "t") == {ZERO_TOPIC_ID}
            # The answer comes when the brokers dropped it; the controller then removes
            # its znodes (a create in between is TOPIC_ALREADY_EXISTS, as in Kafka).
            await cluster.until(
                lambda: not cluster.controller.context.has_topic("t"), "t is deleted"
            )
            await admin.create_topic("t", 2, 2)
            second = (await admin.describe_topics(["t"]))[0].topic_id
        assert second is not None and second != first
        assert await agreed_id(cluster, "t") == second
