"""The Kafka-protocol listener end to end: real brokers (tests/support/cluster.py, real
TCP in one Trio run) with a `KAFKA` listener mapped to the Kafka wire protocol, driven
over a socket with kio-encoded requests, and smoke checks with kafka-python and
confluent-kafka (synchronous clients, run in a thread).

Every request goes the whole way: Kafka framing and headers (wire.py), the translation
(dispatcher.py, translate_*.py), the broker's own request handlers and purgatories, and back.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import time
import types
import typing
import uuid

import pytest
import trio
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.delete_topics.v6 import request as delete_topics_v6
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.fetch.v4 import request as fetch_v4
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v17 import request as fetch_v17
from kio.schema.list_offsets.v6 import request as list_offsets_v6
from kio.schema.metadata.v0 import request as metadata_v0
from kio.schema.metadata.v11 import request as metadata_v11
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_v4
from kio.schema.produce.v3 import request as produce_v3
from kio.schema.produce.v9 import request as produce_v9
from kio.serial import entity_reader, entity_writer

from broker.config import BrokerConfig
from broker.kafka.translate_admin import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG
from client.protocol.topic_ids import ZERO_TOPIC_ID
from client.protocol.types import TopicPartition
from server_common.properties import ConfigError
from tests.support.cluster import open_test_cluster

KAFKA_LISTENER = {
    "listeners": "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0",
    "listener.wire.protocol.map": "KAFKA:kafka",
}

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_TOPIC_EXCEPTION = 17
NOT_ENOUGH_REPLICAS = 19
FETCH_SESSION_ID_NOT_FOUND = 70
TOPIC_ALREADY_EXISTS = 36
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_ID = 100


def kafka_cluster(brokers: int = 1, topics: dict[str, int] | None = None):
    return open_test_cluster(
        brokers, topics=topics, transport="tcp", broker_settings=dict(KAFKA_LISTENER)
    )


def kafka_port(cluster, broker_id: int) -> int:
    return cluster.brokers[broker_id].server.bound_ports["KAFKA"]


def kafka_bootstrap(cluster) -> str:
    return ",".join(f"127.0.0.1:{kafka_port(cluster, b)}" for b in cluster.brokers)


class KafkaWire:
    """A minimal Kafka client connection: kio requests out, kio responses in."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.next_correlation_id = 1

    @classmethod
    async def open(cls, cluster, broker_id: int) -> KafkaWire:
        return cls(await trio.open_tcp_stream("127.0.0.1", kafka_port(cluster, broker_id)))

    def frame(self, request) -> tuple[int, bytes]:
        cls = type(request)
        header_cls = cls.__header_schema__
        correlation_id = self.next_correlation_id
        self.next_correlation_id += 1
        out = io.BytesIO()
        entity_writer(header_cls)(
            out,
            header_cls(
                request_api_key=cls.__api_key__,
                request_api_version=cls.__version__,
                correlation_id=correlation_id,
                client_id="kafka-wire-test",
            ),
        )
        entity_writer(cls)(out, request)
        return correlation_id, struct.pack(">i", out.tell()) + out.getvalue()

    async def send(self, request) -> int:
        correlation_id, data = self.frame(request)
        await self.stream.send_all(data)
        return correlation_id

    async def receive_frame(self) -> bytes | None:
        """The next response frame (without its size), None if the broker closed."""
        while True:
            if len(self.buffer) >= 4:
                (size,) = struct.unpack_from(">i", self.buffer)
                if len(self.buffer) >= 4 + size:
                    frame = bytes(self.buffer[4 : 4 + size])
                    del self.buffer[: 4 + size]
                    return frame
            data = await self.stream.receive_some(1 << 20)
            if not data:
                return None
            self.buffer += data

    async def receive(self, request_type: type) -> tuple[int, object]:
        from kio.index import load_response_from_request

        frame = await self.receive_frame()
        assert frame is not None, "the broker closed the connection"
        response_type = load_response_from_request(request_type)
        header, used = entity_reader(response_type.__header_schema__)(frame, 0)
        response, size = entity_reader(response_type)(frame, used)
        assert used + size == len(frame)
        return header.correlation_id, response

    async def call(self, request):
        correlation_id = await self.send(request)
        answered, response = await self.receive(type(request))
        assert answered == correlation_id
        return response

    async def aclose(self) -> None:
        await self.stream.aclose()


def kafka_batch(*values: bytes, key: bytes | None = b"k", timestamp: int = 1_000) -> bytes:
    """A v2 record batch as Kafka clients write it (kafka-python's builder)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamp + i, key=key, value=value, headers=[("h", b"x")])
    return bytes(builder.build())


def read_records(data: bytes) -> list[tuple[int, bytes | None, bytes | None, list]]:
    """(offset, key, value, headers) of every record in fetched bytes (as Kafka clients
    read them)."""
    out = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        out.extend((r.offset, r.key, r.value, r.headers) for r in batch)
    return out


def produce_request(topic: str, partition: int, records: bytes, *, acks: int = -1, v9=True):
    schema = produce_v9 if v9 else produce_v3
    return schema.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            schema.TopicProduceData(
                name=topic,
                partition_data=(schema.PartitionProduceData(index=partition, records=records),),
            ),
        ),
    )


def fetch_request(
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    current_leader_epoch: int = -1,
    session_id: int = 0,
    session_epoch: int = -1,
):
    return fetch_v12.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=(
            fetch_v12.FetchTopic(
                topic=topic,
                partitions=(
                    fetch_v12.FetchPartition(
                        partition=partition,
                        current_leader_epoch=current_leader_epoch,
                        fetch_offset=offset,
                        partition_max_bytes=partition_max_bytes,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def list_offsets_request(topic: str, partition: int, timestamp: int, leader_epoch: int = -1):
    return list_offsets_v6.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            list_offsets_v6.ListOffsetsTopic(
                name=topic,
                partitions=(
                    list_offsets_v6.ListOffsetsPartition(
                        partition_index=partition,
                        current_leader_epoch=leader_epoch,
                        timestamp=timestamp,
                    ),
                ),
            ),
        ),
    )


def only_partition(response):
    (topic,) = response.responses
    (partition,) = topic.partitions if hasattr(topic, "partitions") else topic.partition_responses
    return partition


# -- config ----------------------------------------------------------------------------------


def test_the_wire_protocol_map_names_listeners_and_protocols():
    config = BrokerConfig({"broker.id": "1", **KAFKA_LISTENER})
    assert config.wire_protocols == {"PLAINTEXT": "tributary", "KAFKA": "kafka"}
    assert BrokerConfig({"broker.id": "1"}).wire_protocols == {"PLAINTEXT": "tributary"}
    with pytest.raises(ConfigError, match="inter-broker listener"):
        BrokerConfig({**KAFKA_LISTENER, "broker.id": "1", "inter.broker.listener.name": "KAFKA"})
    with pytest.raises(ConfigError, match="not in listeners"):
        BrokerConfig({"broker.id": "1", "listener.wire.protocol.map": "OTHER:kafka"})
    with pytest.raises(ConfigError, match="NAME:protocol"):
        BrokerConfig({**KAFKA_LISTENER, "broker.id": "1", "listener.wire.protocol.map": "KAFKA"})
    with pytest.raises(ConfigError, match="NAME:protocol"):
        BrokerConfig(
            {**KAFKA_LISTENER, "broker.id": "1", "listener.wire.protocol.map": "KAFKA:http"}
        )


# -- ApiVersions and Metadata ---------------------------------------------------------------


async def test_api_versions_and_metadata_describe_the_kafka_listener():
    async with kafka_cluster(3, topics={"t": 3}) as cluster:
        wire = await KafkaWire.open(cluster, 2)
        versions = await wire.call(
            ApiVersionsRequest(client_software_name="test", client_software_version="1")
        )
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert advertised[0] == (3, 9) and advertised[1] == (4, 17) and advertised[18] == (0, 3)

        metadata = await wire.call(
            metadata_v12.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        assert {(b.node_id, b.host, b.port) for b in metadata.brokers} == {
            (i, "127.0.0.1", kafka_port(cluster, i)) for i in (1, 2, 3)
        }
        assert metadata.cluster_id == "test-cluster"
        # Kafka admin clients send CreateTopics to the "controller": a broker (every broker
        # serves it; Tributary's controller is no broker).
        assert metadata.controller_id == 1
        (topic,) = [t for t in metadata.topics if t.name == "t"]
        assert topic.error_code == NONE and not topic.is_internal
        for p in topic.partitions:
            view = cluster.partition(("t", p.partition_index))
            assert (p.leader_id, p.leader_epoch) == (view.leader, view.leader_epoch)
            assert (tuple(p.replica_nodes), tuple(p.isr_nodes)) == (view.replicas, view.isr)
            assert p.offline_replicas == ()

        def ask(name: str, allow: bool):
            return wire.call(
                metadata_v12.MetadataRequest(
                    topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name=name),),
                    allow_auto_topic_creation=allow,
                    include_topic_authorized_operations=False,
                )
            )

        # A client that does not allow auto-creation hears the topic is unknown...
        unknown = await ask("nope", False)
        assert [(t.name, t.error_code) for t in unknown.topics] == [
            ("nope", UNKNOWN_TOPIC_OR_PARTITION)
        ]
        assert all(tp.topic != "nope" for tp in cluster.controller.context.states)
        # ...one that allows it gets it created with the broker defaults (Kafka's
        # auto.create.topics.enable=true): LEADER_NOT_AVAILABLE until its leader is elected.
        created = await ask("auto", True)
        assert [(t.name, t.error_code) for t in created.topics] == [("auto", 5)]
        with trio.fail_after(10):
            while (await ask("auto", True)).topics[0].error_code != NONE:
                await trio.sleep(0.05)
        assert ("auto", 0) in {(tp.topic, tp.partition) for tp in cluster.controller.context.states}
        # A name no topic may have is never created.
        invalid = await ask("bad$#!", True)
        assert [(t.name, t.error_code) for t in invalid.topics] == [("bad$#!", 17)]

        # v0: an empty topic list means every topic.
        everything = await wire.call(metadata_v0.MetadataRequest(topics=()))
        assert "t" in {t.name for t in everything.topics}
        await wire.aclose()


async def test_describe_cluster_lists_the_kafka_listeners_and_refuses_controller_endpoints():
    from kio.schema.describe_cluster.v1 import request as describe_cluster_v1

    async with kafka_cluster(3) as cluster:
        wire = await KafkaWire.open(cluster, 3)
        described = await wire.call(
            describe_cluster_v1.DescribeClusterRequest(
                include_cluster_authorized_operations=False, endpoint_type=1
            )
        )
        assert described.error_code == NONE and described.cluster_id == "test-cluster"
        assert {(b.broker_id, b.host, b.port) for b in described.brokers} == {
            (i, "127.0.0.1", kafka_port(cluster, i)) for i in (1, 2, 3)
        }
        assert described.controller_id == 1  # the broker Metadata names, as it must be
        controllers = await wire.call(
            describe_cluster_v1.DescribeClusterRequest(
                include_cluster_authorized_operations=False, endpoint_type=2
            )
        )
        assert controllers.error_code == 119  # UNSUPPORTED_ENDPOINT_TYPE (KIP-919)
        assert controllers.brokers == ()
        await wire.aclose()


# -- every advertised version -----------------------------------------------------------


def minimal_request(cls):
    """The smallest valid instance of kio's dataclass `cls`: zeros, empty strings and
    tuples, None where allowed (acks 1, so a Produce is answered)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        if (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        ):
            continue
        values[field.name] = 1 if field.name == "acks" else _value(hints[field.name])
    return cls(**values)


def _value(hint):
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if type(None) in typing.get_args(hint):
            return None
        hint = typing.get_args(hint)[0]
        origin = typing.get_origin(hint)
    if origin is tuple:
        return ()
    if dataclasses.is_dataclass(hint):
        return minimal_request(hint)
    if hint is uuid.UUID:
        return uuid.UUID(int=0)
    if hint is KioErrorCode:
        return KioErrorCode.none
    for base in getattr(hint, "__mro__", (hint,)):
        if base is bool:
            return False
        if base is datetime.timedelta:
            return datetime.timedelta(0)
        if base is int:
            return hint(0) if base is not hint else 0
        if base is float:
            return 0.0
        if base is str:
            return ""
        if base is bytes:
            return b""
    raise TypeError(f"no minimal value for {hint!r}")


async def test_every_api_answers_its_lowest_and_highest_advertised_version():
    """ApiVersions tells the truth: each API, at the lowest and the highest version the
    listener advertises, gets an answer of that version on the same connection (an
    empty request's answer may carry an error code; it must decode)."""
    from broker.kafka import versions
    from broker.kafka.translation import request_class

    async with kafka_cluster(1, topics={"t": 1}) as cluster:
        wire = await KafkaWire.open(cluster, 1)
        advertised = await wire.call(
            ApiVersionsRequest(client_software_name="test", client_software_version="1")
        )
        table = {k.api_key: (k.min_version, k.max_version) for k in advertised.api_keys}
        assert table == versions.supported()
        for api_key, (low, high) in sorted(table.items()):
            for version in sorted({low, high}):
                with trio.fail_after(30):
                    await wire.call(minimal_request(request_class(api_key, version)))


def metadata_request(version, *topics: tuple[uuid.UUID | None, str | None]):
    module = {11: metadata_v11, 12: metadata_v12}[version]
    return module.MetadataRequest(
        topics=tuple(module.MetadataRequestTopic(topic_id=i, name=n) for i, n in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


async def test_metadata_answers_topic_ids_and_refuses_illegal_topic_names():
    async with kafka_cluster(3, topics={"t": 2, "u": 1}) as cluster:
        ids = cluster.controller.context.topic_ids
        assert ids["t"] != ids["u"] and ZERO_TOPIC_ID not in ids.values()
        for broker_id in (1, 2, 3):
            wire = await KafkaWire.open(cluster, broker_id)
            answer = await wire.call(metadata_request(12, (None, "t"), (None, "u")))
            assert [(t.name, t.error_code, t.topic_id) for t in answer.topics] == [
                ("t", NONE, ids["t"]),
                ("u", NONE, ids["u"]),
            ]
            await wire.aclose()

        wire = await KafkaWire.open(cluster, 1)
        # v12 asks by id: the answer names the topic; an id no topic has is UNKNOWN_TOPIC_ID.
        stranger = uuid.uuid4()
        by_id = await wire.call(metadata_request(12, (ids["u"], None), (stranger, None)))
        assert [(t.name, t.error_code, t.topic_id) for t in by_id.topics] == [
            ("u", NONE, ids["u"]),
            (None, UNKNOWN_TOPIC_ID, stranger),
        ]
        assert len(by_id.topics[0].partitions) == 1
        # Kafka 2.8 refuses topic ids before v12.
        refused = await wire.call(metadata_request(11, (ids["t"], "t")))
        assert [t.error_code for t in refused.topics] == [INVALID_REQUEST]

        # Names no topic can have are INVALID_TOPIC_EXCEPTION, not unknown (Kafka's
        # Topic.validate): illegal characters, too long, "." and "..".
        illegal = ["bad$#!", "x" * 250, ".", ".."]
        answer = await wire.call(metadata_request(12, *[(None, n) for n in [*illegal, "x" * 249]]))
        assert [(t.name, t.error_code, t.topic_id) for t in answer.topics] == [
            *[(n, INVALID_TOPIC_EXCEPTION, None) for n in illegal],
            ("x" * 249, UNKNOWN_TOPIC_OR_PARTITION, None),
        ]
        old = await wire.call(
            metadata_v0.MetadataRequest(topics=(metadata_v0.MetadataRequestTopic(name="bad$#!"),))
        )
        assert [(t.name, t.error_code) for t in old.topics] == [("bad$#!", INVALID_TOPIC_EXCEPTION)]
        await wire.aclose()


async def test_create_topics_v7_answers_the_new_topics_id_and_configs():
    async with kafka_cluster(3) as cluster:
        wire = await KafkaWire.open(cluster, 3)

        def create(name: str, **extra):
            return create_topics_v7.CreateTopicsRequest(
                topics=(
                    create_topics_v7.CreatableTopic(
                        name=name,
                        num_partitions=2,
                        replication_factor=2,
                        assignments=(),
                        configs=(
                            create_topics_v7.CreatableTopicConfig(
                                name="retention.ms", value="60000"
                            ),
                        ),
                    ),
                ),
                timeout=datetime.timedelta(seconds=30),
                **extra,
            )

        dry = await wire.call(create("dry", validate_only=True))
        (result,) = dry.topics
        assert (result.error_code, result.topic_id) == (NONE, None)  # nothing created
        assert (result.num_partitions, result.replication_factor) == (2, 2)

        created = await wire.call(create("fresh"))
        (result,) = created.topics
        assert result.error_code == NONE and result.topic_id is not None
        assert result.topic_id == cluster.controller.context.topic_ids["fresh"]
        configs = {c.name: (c.value, c.config_source) for c in result.configs}
        assert configs["retention.ms"] == ("60000", DYNAMIC_TOPIC_CONFIG)
        assert configs["cleanup.policy"] == ("delete", DEFAULT_CONFIG)
        answer = await wire.call(metadata_request(12, (None, "fresh")))
        assert answer.topics[0].topic_id == result.topic_id

        again = await wire.call(create("fresh"))
        (result,) = again.topics
        assert result.error_code == TOPIC_ALREADY_EXISTS
        assert (result.topic_id, result.num_partitions, result.configs) == (None, -1, ())
        await wire.aclose()


async def test_delete_topics_v6_by_topic_id():
    async with kafka_cluster(3, topics={"doomed": 2, "kept": 1}) as cluster:
        ids = dict(cluster.controller.context.topic_ids)
        wire = await KafkaWire.open(cluster, 2)

        def delete(*topics: tuple[str | None, uuid.UUID | None]):
            return delete_topics_v6.DeleteTopicsRequest(
                topics=tuple(
                    delete_topics_v6.DeleteTopicState(name=n, topic_id=i) for n, i in topics
                ),
                timeout=datetime.timedelta(seconds=30),
            )

        both = await wire.call(delete(("kept", ids["kept"])))
        assert [t.error_code for t in both.responses] == [INVALID_REQUEST]
        stranger = uuid.uuid4()
        answer = await wire.call(delete((None, ids["doomed"]), (None, stranger)))
        assert [(t.name, t.topic_id, t.error_code) for t in answer.responses] == [
            ("doomed", ids["doomed"], NONE),
            (None, stranger, UNKNOWN_TOPIC_ID),
        ]
        for broker in cluster.live():
            assert not broker.server.metadata_cache.contains_topic("doomed")
            assert broker.server.metadata_cache.contains_topic("kept")
        await wire.aclose()


# -- Produce and Fetch ----------------------------------------------------------------------


async def test_produce_acks_1_and_all_then_fetch_the_records_back():
    async with kafka_cluster(1, topics={"t": 1}) as cluster:
        wire = await KafkaWire.open(cluster, 1)
        first = only_partition(await wire.call(produce_request("t", 0, kafka_batch(b"a", b"b"))))
        assert (first.error_code, first.base_offset) == (NONE, 0)
        assert first.log_start_offset == 0
        second = only_partition(
            await wire.call(produce_request("t", 0, kafka_batch(b"c"), acks=1, v9=False))
        )
        assert (second.error_code, second.base_offset) == (NONE, 2)

        fetched = only_partition(await wire.call(fetch_request("t", 0, 0)))
        assert fetched.error_code == NONE
        assert (fetched.high_watermark, fetched.last_stable_offset) == (3, 3)
        assert fetched.log_start_offset == 0
        assert [(o, k, v) for o, k, v, _ in read_records(fetched.records)] == [
            (0, b"k", b"a"),
            (1, b"k", b"b"),
            (2, b"k", b"c"),
        ]
        assert read_records(fetched.records)[0][3] == [("h", b"x")]

        # Tributary's own producer's batches reach Kafka clients in Kafka's format.
        await cluster.append(("t", 0), b"native", key=b"nk")
        native = only_partition(await wire.call(fetch_request("t", 0, 3)))
        assert [(o, k, v) for o, k, v, _ in read_records(native.records)] == [(3, b"nk", b"native")]
        await wire.aclose()


async def test_acks_0_gets_no_response_and_errors_come_back_as_kafka_returns_them():
    async with kafka_cluster(2, topics={"t": 2}) as cluster:
        await cluster.create_topic(
            "strict", 1, assignment={0: [1]}, configs={"min.insync.replicas": "2"}
        )
        leader_of_1 = cluster.partition(("t", 1)).leader
        wire = await KafkaWire.open(cluster, cluster.partition(("t", 0)).leader)
        # acks=0: nothing comes back, the next request's answer is the next frame.
        await wire.send(produce_request("t", 0, kafka_batch(b"fire"), acks=0))
        fetched = only_partition(await wire.call(fetch_request("t", 0, 0)))
        assert [v for _, _, v, _ in read_records(fetched.records)] == [b"fire"]

        not_leader = only_partition(await wire.call(produce_request("t", 1, kafka_batch(b"x"))))
        assert leader_of_1 != cluster.partition(("t", 0)).leader
        assert not_leader.error_code == NOT_LEADER_OR_FOLLOWER

        unknown = only_partition(await wire.call(produce_request("nope", 0, kafka_batch(b"x"))))
        assert unknown.error_code == UNKNOWN_TOPIC_OR_PARTITION
        await wire.aclose()

        wire = await KafkaWire.open(cluster, 1)
        too_few = only_partition(await wire.call(produce_request("strict", 0, kafka_batch(b"x"))))
        assert too_few.error_code == NOT_ENOUGH_REPLICAS
        assert too_few.base_offset == -1
        await wire.aclose()


async def test_fetch_long_polls_through_the_purgatory():
    async with kafka_cluster(1, topics={"t": 1}) as cluster:
        wire = await KafkaWire.open(cluster, 1)
        started = trio.current_time()
        empty = only_partition(await wire.call(fetch_request("t", 0, 0, max_wait_ms=300)))
        assert trio.current_time() - started >= 0.25
        assert empty.error_code == NONE and not empty.records

        async def produce_later() -> None:
            await trio.sleep(0.3)
            producer = await KafkaWire.open(cluster, 1)
            await producer.call(produce_request("t", 0, kafka_batch(b"late")))
            await producer.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce_later)
            started = trio.current_time()
            with trio.fail_after(5):
                waited = only_partition(
                    await wire.call(fetch_request("t", 0, 0, max_wait_ms=10_000))
                )
            assert 0.2 <= trio.current_time() - started < 5
        assert [v for _, _, v, _ in read_records(waited.records)] == [b"late"]
        await wire.aclose()


async def bump_leader_epoch(cluster, tp) -> int:
    """Add broker 2 as a replica (the leader, broker 1, stays): the leader epoch goes up."""
    await cluster.reassign(tp, [1, 2])
    epoch = cluster.partition(tp).leader_epoch
    assert epoch > 0 and cluster.partition(tp).leader == 1
    return epoch


async def test_fetch_max_bytes_sessions_fencing_and_old_versions():
    async with kafka_cluster(2) as cluster:
        await cluster.create_topic("t", 1, assignment={0: [1]})
        await bump_leader_epoch(cluster, ("t", 0))
        wire = await KafkaWire.open(cluster, 1)
        for i in range(5):
            await wire.call(produce_request("t", 0, kafka_batch(b"v%d" % i + b"." * 500)))
        epoch = cluster.partition(("t", 0)).leader_epoch

        # partition max bytes: the first batch always comes whole, then whole batches only
        # (a partial trailing batch is allowed and skipped by clients).
        small = only_partition(await wire.call(fetch_request("t", 0, 0, partition_max_bytes=10)))
        assert [o for o, *_ in read_records(small.records)] == [0]

        # A full fetch that asks for a session (epoch 0) gets one (a non-zero id); an
        # incremental fetch in a session that does not exist is told so
        # (test_kafka_fetch_sessions.py has the rest of KIP-227).
        full = await wire.call(fetch_request("t", 0, 0, session_epoch=0))
        assert full.error_code == NONE and full.session_id != 0
        assert len(read_records(only_partition(full).records)) == 5
        unknown = 1 if full.session_id != 1 else 2
        incremental = await wire.call(fetch_request("t", 0, 0, session_id=unknown, session_epoch=3))
        assert incremental.error_code == FETCH_SESSION_ID_NOT_FOUND
        assert incremental.responses == ()

        fenced = only_partition(
            await wire.call(fetch_request("t", 0, 0, current_leader_epoch=epoch - 1))
        )
        assert fenced.error_code == FENCED_LEADER_EPOCH
        ahead = only_partition(
            await wire.call(fetch_request("t", 0, 0, current_leader_epoch=epoch + 1))
        )
        assert ahead.error_code == UNKNOWN_LEADER_EPOCH
        current = only_partition(
            await wire.call(fetch_request("t", 0, 4, current_leader_epoch=epoch))
        )
        assert [o for o, *_ in read_records(current.records)] == [4]

        old = await wire.call(
            fetch_v4.FetchRequest(
                max_wait=datetime.timedelta(0),
                min_bytes=1,
                topics=(
                    fetch_v4.FetchTopic(
                        topic="t",
                        partitions=(
                            fetch_v4.FetchPartition(
                                partition=0, fetch_offset=3, partition_max_bytes=1 << 20
                            ),
                        ),
                    ),
                ),
            )
        )
        part = only_partition(old)
        assert part.high_watermark == 5
        assert [o for o, *_ in read_records(part.records)] == [3, 4]
        await wire.aclose()


def fetch_by_id(
    *topics: tuple[uuid.UUID, int],
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: tuple[uuid.UUID, ...] = (),
):
    """A Fetch v17 (topics named by id, as Kafka 3.1+ clients send) of (topic id, offset)
    for partition 0 of each topic."""
    return fetch_v17.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=tuple(
            fetch_v17.FetchTopic(
                topic_id=topic_id,
                partitions=(
                    fetch_v17.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                    ),
                ),
            )
            for topic_id, offset in topics
        ),
        forgotten_topics_data=tuple(
            fetch_v17.ForgottenTopic(topic_id=topic_id, partitions=(0,)) for topic_id in forgotten
        ),
        rack_id="",
    )


def by_topic_id(response) -> dict[uuid.UUID, tuple[int, list]]:
    return {
        t.topic_id: (p.error_code, [v for _, _, v, _ in read_records(p.records)])
        for t in response.responses
        for p in t.partitions
    }


async def test_fetch_v13_and_later_name_topics_by_id_in_and_out_of_sessions():
    async with kafka_cluster(1, topics={"t": 1, "u": 1}) as cluster:
        ids = dict(cluster.controller.context.topic_ids)
        wire = await KafkaWire.open(cluster, 1)
        await wire.call(produce_request("t", 0, kafka_batch(b"t0", b"t1")))
        await wire.call(produce_request("u", 0, kafka_batch(b"u0")))
        stranger = uuid.uuid4()

        # A full fetch: each topic answered under its id, an unknown id told so.
        full = await wire.call(
            fetch_by_id((ids["t"], 0), (ids["u"], 0), (stranger, 0), session_epoch=0)
        )
        assert full.error_code == NONE and full.session_id != 0
        assert by_topic_id(full) == {
            ids["t"]: (NONE, [b"t0", b"t1"]),
            ids["u"]: (NONE, [b"u0"]),
            stranger: (UNKNOWN_TOPIC_ID, []),
        }

        # In the session: only what changed comes back, still under its id; a topic
        # forgotten by id is not answered again.
        await wire.call(produce_request("t", 0, kafka_batch(b"t2")))
        incremental = await wire.call(
            fetch_by_id(
                (ids["t"], 2), session_id=full.session_id, session_epoch=1, forgotten=(ids["u"],)
            )
        )
        assert by_topic_id(incremental) == {ids["t"]: (NONE, [b"t2"])}
        await wire.call(produce_request("u", 0, kafka_batch(b"u1")))
        quiet = await wire.call(
            fetch_by_id((ids["t"], 3), session_id=full.session_id, session_epoch=2)
        )
        assert by_topic_id(quiet) == {}

        # "t" deleted and created again: a new id. The session's partition, asked under
        # the old id, is answered UNKNOWN_TOPIC_ID (no data of the new topic under the
        # old id), and so is a fetch by the old id; the new id reads the new topic.
        await wire.call(
            delete_topics_v6.DeleteTopicsRequest(
                topics=(delete_topics_v6.DeleteTopicState(name="t", topic_id=None),),
                timeout=datetime.timedelta(seconds=30),
            )
        )
        with trio.fail_after(10):
            while True:  # the topic's znode goes when the controller has deleted it
                try:
                    await cluster.create_topic("t", 1)
                    break
                except ValueError:
                    await trio.sleep(0.05)
        new_id = cluster.controller.context.topic_ids["t"]
        assert new_id != ids["t"]
        await wire.call(produce_request("t", 0, kafka_batch(b"new")))
        stale = await wire.call(fetch_by_id(session_id=full.session_id, session_epoch=3))
        assert by_topic_id(stale) == {ids["t"]: (UNKNOWN_TOPIC_ID, [])}
        old = await wire.call(fetch_by_id((ids["t"], 0)))
        assert by_topic_id(old) == {ids["t"]: (UNKNOWN_TOPIC_ID, [])}
        fresh = await wire.call(fetch_by_id((new_id, 0)))
        assert by_topic_id(fresh) == {new_id: (NONE, [b"new"])}
        await wire.aclose()


# -- ListOffsets and OffsetForLeaderEpoch ---------------------------------------------------


async def test_list_offsets_and_offset_for_leader_epoch():
    async with kafka_cluster(2) as cluster:
        await cluster.create_topic("t", 1, assignment={0: [1]})
        await bump_leader_epoch(cluster, ("t", 0))
        wire = await KafkaWire.open(cluster, 1)
        await wire.call(produce_request("t", 0, kafka_batch(b"a", b"b", timestamp=1_000)))
        await wire.call(produce_request("t", 0, kafka_batch(b"c", timestamp=5_000)))
        epoch = cluster.partition(("t", 0)).leader_epoch

        async def offset(timestamp: int, leader_epoch: int = -1):
            (topic,) = (
                await wire.call(list_offsets_request("t", 0, timestamp, leader_epoch))
            ).topics
            (partition,) = topic.partitions
            return partition

        earliest, latest = await offset(-2), await offset(-1)
        assert (earliest.error_code, earliest.offset) == (NONE, 0)
        assert (latest.offset, latest.leader_epoch) == (3, epoch)
        by_time = await offset(1_001)
        assert (by_time.offset, by_time.timestamp) == (1, 1_001)
        assert (await offset(4_000)).offset == 2
        assert (await offset(9_000)).offset == -1
        assert (await offset(-1, epoch - 1)).error_code == FENCED_LEADER_EPOCH

        response = await wire.call(
            epoch_v4.OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=(
                    epoch_v4.OffsetForLeaderTopic(
                        topic="t",
                        partitions=(
                            epoch_v4.OffsetForLeaderPartition(
                                partition=0, current_leader_epoch=epoch, leader_epoch=epoch
                            ),
                        ),
                    ),
                ),
            )
        )
        (topic,) = response.topics
        (partition,) = topic.partitions
        assert (partition.error_code, partition.leader_epoch, partition.end_offset) == (
            NONE,
            epoch,
            3,
        )
        await wire.aclose()


# -- the connection ------------------------------------------------------------------------


async def test_pipelined_requests_are_answered_in_order():
    async with kafka_cluster(1, topics={"t": 1}) as cluster:
        wire = await KafkaWire.open(cluster, 1)
        requests = [
            fetch_request("t", 0, 0, max_wait_ms=300),  # waits in the purgatory
            produce_request("t", 0, kafka_batch(b"x")),
            list_offsets_request("t", 0, -1),
        ]
        frames = [wire.frame(r) for r in requests]
        await wire.stream.send_all(b"".join(data for _, data in frames))
        for (correlation_id, _), request in zip(frames, requests, strict=True):
            answered, _ = await wire.receive(type(request))
            assert answered == correlation_id
        await wire.aclose()


async def test_garbage_and_oversized_frames_close_only_that_connection():
    async with kafka_cluster(1, topics={"t": 1}) as cluster:
        for junk in [
            struct.pack(">i", 12) + b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x09ab",
            struct.pack(">i", 200 * 1024 * 1024),
            struct.pack(">i", 10) + struct.pack(">hhi", 0, 2, 1) + b"\x00\x00",  # Produce v2
        ]:
            wire = await KafkaWire.open(cluster, 1)
            await wire.stream.send_all(junk)
            with trio.fail_after(5):
                assert await wire.receive_frame() is None
            await wire.aclose()
        wire = await KafkaWire.open(cluster, 1)
        assert (await wire.call(list_offsets_request("t", 0, -1))).topics[0].name == "t"
        await wire.aclose()


async def test_an_unsupported_api_versions_gets_the_version_list():
    async with kafka_cluster(1) as cluster:
        wire = await KafkaWire.open(cluster, 1)
        body = struct.pack(">hhi", 18, 9, 77) + b"\x00\x00"
        await wire.stream.send_all(struct.pack(">i", len(body)) + body)
        frame = await wire.receive_frame()
        assert struct.unpack_from(">ih", frame) == (77, 35)
        # ... and the connection goes on.
        versions = await wire.call(
            ApiVersionsRequest(client_software_name="test", client_software_version="1")
        )
        assert versions.error_code == NONE
        await wire.aclose()


# -- real Kafka clients ---------------------------------------------------------------------


def _kafka_python_round_trip(bootstrap: str) -> list[tuple[int, int, bytes, bytes, list]]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTopicPartition

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type="gzip",
        enable_idempotence=False,  # needs InitProducerId, which Tributary does not serve
    )
    futures = [
        producer.send("t", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
        for i in range(20)
    ]
    producer.flush(30)
    assert all(f.succeeded() for f in futures)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    consumer.assign([KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
    consumer.seek_to_beginning()
    got = [(m.partition, m.offset, m.key, m.value, m.headers) for m in consumer]
    consumer.close()
    return got


async def test_kafka_python_produces_and_consumes():
    async with kafka_cluster(2, topics={"t": 2}) as cluster:
        await cluster.append(("t", 0), b"from-tributary", key=b"native")
        got = await trio.to_thread.run_sync(_kafka_python_round_trip, kafka_bootstrap(cluster))
        values = {value for _, _, _, value, _ in got}
        assert values == {b"from-tributary"} | {b"v%d" % i for i in range(20)}
        assert all(h == [("h", v[1:])] for _, _, _, v, h in got if v != b"from-tributary")
        # Tributary's own view of what kafka-python wrote.
        written = cluster.records(("t", 0)) + cluster.records(("t", 1))
        assert {r.value for r in written} == values


def _confluent_round_trip(bootstrap: str) -> tuple[list, list]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "zstd"})
    errors = []
    for i in range(50):
        producer.produce(
            "t",
            key=b"k%d" % i,
            value=b"v%d" % i,
            headers=[("h", b"x")],
            on_delivery=lambda error, message: errors.append(error) if error else None,
        )
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([KafkaTopicPartition("t", 0, 0), KafkaTopicPartition("t", 1, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 51 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            errors.append(message.error())
            continue
        got.append((message.key(), message.value(), message.headers()))
    consumer.close()
    return errors, got


async def test_confluent_kafka_produces_and_consumes():
    pytest.importorskip("confluent_kafka")
    async with kafka_cluster(2, topics={"t": 2}) as cluster:
        await cluster.append(("t", 1), b"from-tributary", key=b"native")
        errors, got = await trio.to_thread.run_sync(_confluent_round_trip, kafka_bootstrap(cluster))
        assert errors == []
        assert {v for _, v, _ in got} == {b"from-tributary"} | {b"v%d" % i for i in range(50)}
        assert all(h == [("h", b"x")] for k, _, h in got if k != b"native")
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        assert len(cluster.records(tp0)) + len(cluster.records(tp1)) == 51


def _aiokafka_round_trip(bootstrap: str) -> list:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as KafkaTopicPartition

    async def run() -> list:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="lz4")
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(
                    "t", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"z")]
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
            await consumer.seek_to_beginning()
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 21 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                got.extend(m for messages in batches.values() for m in messages)
            return [(m.key, m.value, list(m.headers)) for m in got]
        finally:
            await consumer.stop()

    return asyncio.run(run())


async def test_aiokafka_produces_and_consumes():
    pytest.importorskip("aiokafka")
    async with kafka_cluster(2, topics={"t": 2}) as cluster:
        await cluster.append(("t", 0), b"from-tributary", key=b"native")
        got = await trio.to_thread.run_sync(_aiokafka_round_trip, kafka_bootstrap(cluster))
        assert {v for _, v, _ in got} == {b"from-tributary"} | {b"v%d" % i for i in range(20)}
        assert all(h == [("h", b"z")] for k, _, h in got if k != b"native")


def _confluent_produce(bootstrap: str, count: int, delivered: list, failed: list) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
        }
    )

    def report(error, message) -> None:
        (failed if error else delivered).append(message.value())

    for i in range(count):
        producer.produce("t", value=b"%06d" % i, on_delivery=report)
        if i % 50 == 0:
            producer.poll(0)
        time.sleep(0.0005)
    assert producer.flush(60) == 0


async def test_confluent_kafka_producer_survives_losing_the_leader():
    """acks=all, min ISR 2, RF 3: the leader goes away mid-stream; librdkafka finds the
    new leader through Metadata by itself and every record reported delivered is there."""
    pytest.importorskip("confluent_kafka")
    async with kafka_cluster(3) as cluster:
        await cluster.create_topic("t", 1, 3, configs={"min.insync.replicas": "2"})
        delivered: list[bytes] = []
        failed: list[bytes] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                trio.to_thread.run_sync,
                _confluent_produce,
                kafka_bootstrap(cluster),
                3000,
                delivered,
                failed,
            )
            with trio.fail_after(30):
                while len(delivered) < 500:
                    await trio.sleep(0.02)
            old_leader = cluster.partition(("t", 0)).leader
            await cluster.stop_broker(old_leader)
            assert cluster.partition(("t", 0)).leader != old_leader
        assert failed == [] and len(delivered) == 3000
        assert set(delivered) <= set(cluster.values(("t", 0)))
