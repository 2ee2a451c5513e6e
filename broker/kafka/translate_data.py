"""The data-plane translations of the Kafka listener (version ranges in versions.py).

How it works: each API is one `Translation` (translation.py): `to_native` turns the kio
request into the native `client.protocol.messages` request, `from_native` turns the
native response into the kio response of the client's version, and `error_response`
answers the whole request with one error code. `TRANSLATIONS` lists them for versions.py.

- Metadata: brokers at the addresses of the listener asked on, cluster id, the lowest
  live broker as controller id (Tributary's controller is not a broker; every broker
  serves CreateTopics and DeleteTopics), topics with their topic id (v10+), leader,
  leader epoch, replicas, ISR and offline replicas; v0's empty topic list means all
  topics; never auto-creates topics. A v12 request may name topics by id (a null name):
  answered under their names, or UNKNOWN_TOPIC_ID with a null name; v10-11 requests
  with a topic id or a null name are INVALID_REQUEST, as in Kafka 2.8.
- Produce: batches pass through unchanged (the native path validates them).
- Fetch: the native fetch (DelayedFetch purgatory for max_wait/min_bytes, max bytes,
  partition max bytes, current leader epoch fencing), always as a consumer, with the
  client's isolation level (read_committed: below the last stable offset, with the
  aborted transactions of the range); records are converted for
  Kafka clients by `client.protocol.records.to_kafka_format`. Fetch sessions (KIP-227,
  v7+): session id, epoch and forgotten topics go to the native request and the session
  id (and a session error, FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH, as
  the top-level error code with no partitions) comes back, so Kafka clients share the
  broker's session cache (broker/core/fetch_sessions.py) with its followers; v4-6 carry
  no session fields and are sessionless (epoch -1). v13+ name topics (and forgotten
  topics) by topic id: the native fetch takes the id and answers under it (an unknown
  id is UNKNOWN_TOPIC_ID); v15's replica state, v16's leader hints and v17's directory
  id are tagged fields a consumer leaves empty. v11+'s `rack_id` (KIP-392) goes to the
  native fetch and its `preferred_read_replica` comes back; a v11+ fetch carries client
  metadata whatever its rack (Kafka 2.8's KafkaApis), so a follower serves it (an
  empty rack gets no preferred replica: the leader serves it), an older one only the
  leader.
- ListOffsets (with the isolation level: read_committed's latest is the LSO; earliest
  -2, latest -1, by timestamp, max timestamp -3 (v7, KIP-734),
  earliest local -4 (v8, KIP-405: the log start, there being no tiered storage)) and
  OffsetForLeaderEpoch, always as a consumer.
- InitProducerId 0-4 (idempotent producers, librdkafka's enable.idempotence): a new
  producer id at epoch 0 from the native handler (a transactional id is refused with
  INVALID_REQUEST: no transactions). The producer id, epoch and sequences of Kafka-format
  batches are checked on the native produce path like Tributary's own (the log's
  producer state reads them from the v2 header, the same in both formats).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from broker.kafka.translation import (
    ZERO_MS,
    KafkaHeader,
    KafkaRequestError,
    Translation,
    build,
    default_response,
    kafka_error,
    ms_of,
    response_class,
    schema_class,
    timedelta_ms,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from client.protocol.records import to_kafka_format
from client.protocol.topic_ids import ZERO_TOPIC_ID_BYTES, topic_id_bytes, topic_id_of_bytes
from server_common.network import NO_RESPONSE

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _datetime_ms(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else _EPOCH + datetime.timedelta(milliseconds=ms)


# --- Metadata (3) ----------------------------------------------------------------------


def _metadata_to_native(request: Any, header: KafkaHeader) -> m.MetadataRequest:
    if request.topics is None or (header.api_version == 0 and not request.topics):
        # all topics (v0 says so with an empty list)
        return m.MetadataRequest(topics=None, allow_auto_topic_creation=False)
    names: list[str] = []
    ids: list[bytes] = []
    for t in request.topics:
        topic_id = getattr(t, "topic_id", None)  # kio reads the zero id as None
        if header.api_version < 12 and (topic_id is not None or t.name is None):
            raise KafkaRequestError(
                ErrorCode.INVALID_REQUEST,
                f"topic ids and null topic names need Metadata v12 (got v{header.api_version})",
            )
        if topic_id is not None:
            ids.append(topic_id_bytes(topic_id))
        elif t.name is not None:
            names.append(t.name)
    # v0-3 have no flag: Kafka lets them auto-create.
    allow = bool(getattr(request, "allow_auto_topic_creation", True))
    return m.MetadataRequest(topics=names, allow_auto_topic_creation=allow, topic_ids=ids)


def _admin_node(response: m.MetadataResponse) -> int:
    """The node Kafka clients send controller requests (CreateTopics, DeleteTopics) to.

    Tributary's controller is its own process, not a broker, and every broker serves those
    requests itself; so Kafka clients are given the lowest live broker as "controller" (-1,
    as Kafka answers when there is none, only when no broker is live)."""
    return min((b.node_id for b in response.brokers), default=-1)


def _metadata_from_native(response: m.MetadataResponse, version: int) -> Any:
    cls = response_class(ApiKey.METADATA, version)
    broker_cls = schema_class(cls, "MetadataResponseBroker")
    topic_cls = schema_class(cls, "MetadataResponseTopic")
    partition_cls = schema_class(cls, "MetadataResponsePartition")
    return build(
        cls,
        throttle_time=ZERO_MS,
        brokers=tuple(
            build(broker_cls, node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in response.brokers
        ),
        cluster_id=response.cluster_id,
        controller_id=_admin_node(response),
        topics=tuple(
            build(
                topic_cls,
                error_code=kafka_error(t.error_code),
                # Only a topic asked for by an unknown id has no name (v12's null).
                name=t.name or (None if version >= 12 else t.name),
                topic_id=topic_id_of_bytes(t.topic_id),
                is_internal=t.is_internal,
                partitions=tuple(
                    build(
                        partition_cls,
                        error_code=kafka_error(p.error_code),
                        partition_index=p.partition,
                        leader_id=p.leader,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=tuple(p.replicas),
                        isr_nodes=tuple(p.isr),
                        offline_replicas=tuple(p.offline_replicas),
                    )
                    for p in t.partitions
                ),
            )
            for t in response.topics
        ),
    )


def _metadata_error(request: Any, version: int, code: int) -> Any:
    cls = response_class(ApiKey.METADATA, version)
    topic_cls = schema_class(cls, "MetadataResponseTopic")
    return build(
        cls,
        throttle_time=ZERO_MS,
        brokers=(),
        topics=tuple(
            build(
                topic_cls,
                error_code=kafka_error(code),
                name=t.name,
                topic_id=getattr(t, "topic_id", None),
                partitions=(),
            )
            for t in request.topics or ()
        ),
    )


METADATA = Translation(
    api_key=ApiKey.METADATA,
    min_version=0,
    max_version=12,
    to_native=_metadata_to_native,
    from_native=_metadata_from_native,
    error_response=_metadata_error,
)


# --- Produce (0) -----------------------------------------------------------------------


def _produce_to_native(request: Any, header: KafkaHeader) -> m.ProduceRequest:
    return m.ProduceRequest(
        transactional_id=request.transactional_id,
        acks=request.acks,
        timeout_ms=ms_of(request.timeout),
        topics=[
            m.ProduceTopic(
                name=t.name,
                partitions=[
                    m.ProducePartition(partition=p.index, records=bytes(p.records or b""))
                    for p in t.partition_data
                ],
            )
            for t in request.topic_data
        ],
    )


def _produce_response(
    version: int, topics: list[tuple[str, list[dict]]], throttle_ms: int = 0
) -> Any:
    cls = response_class(ApiKey.PRODUCE, version)
    topic_cls = schema_class(cls, "TopicProduceResponse")
    partition_cls = schema_class(cls, "PartitionProduceResponse")
    return build(
        cls,
        throttle_time=timedelta_ms(throttle_ms),
        responses=tuple(
            build(
                topic_cls,
                name=name,
                partition_responses=tuple(
                    build(partition_cls, record_errors=(), **p) for p in partitions
                ),
            )
            for name, partitions in topics
        ),
    )


def _produce_from_native(response: m.ProduceResponse, version: int) -> Any:
    return _produce_response(
        version,
        [
            (
                t.name,
                [
                    dict(
                        index=p.partition,
                        error_code=kafka_error(p.error_code),
                        base_offset=p.base_offset,
                        log_append_time=_datetime_ms(p.log_append_time_ms),
                        log_start_offset=p.log_start_offset,
                        error_message=p.error_message,
                    )
                    for p in t.partitions
                ],
            )
            for t in response.topics
        ],
        response.throttle_time_ms,  # a client over its quota (broker/quota_gate.py)
    )


def _produce_error(request: Any, version: int, code: int) -> Any:
    if request.acks == 0:
        return NO_RESPONSE
    return _produce_response(
        version,
        [
            (
                t.name,
                [
                    dict(
                        index=p.index,
                        error_code=kafka_error(code),
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                    )
                    for p in t.partition_data
                ],
            )
            for t in request.topic_data
        ],
    )


PRODUCE = Translation(
    api_key=ApiKey.PRODUCE,
    min_version=3,
    max_version=9,
    to_native=_produce_to_native,
    from_native=_produce_from_native,
    error_response=_produce_error,
)


# --- Fetch (1) -------------------------------------------------------------------------


def _fetch_to_native(request: Any, header: KafkaHeader) -> m.FetchRequest:
    return m.FetchRequest(
        replica_id=m.CONSUMER_REPLICA_ID,  # a Kafka client is never a follower of ours
        max_wait_ms=ms_of(request.max_wait),
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=request.isolation_level,
        session_id=int(getattr(request, "session_id", 0)),
        session_epoch=int(getattr(request, "session_epoch", -1)),
        forgotten_topics_data=[
            m.FetchForgottenTopic(
                topic=getattr(t, "topic", ""),
                topic_id=_fetch_topic_id(t),
                partitions=[int(p) for p in t.partitions],
            )
            for t in getattr(request, "forgotten_topics_data", ())
        ],
        rack_id=getattr(request, "rack_id", "") or "",  # v11+ (KIP-392)
        client_metadata=header.api_version >= 11,  # Kafka's `clientMetadata`, rack or not
        topics=[
            m.FetchTopic(
                topic=getattr(t, "topic", ""),
                topic_id=_fetch_topic_id(t),
                partitions=[
                    m.FetchPartition(
                        partition=p.partition,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
                        log_start_offset=getattr(p, "log_start_offset", -1),
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def _fetch_topic_id(topic: Any) -> bytes:
    """The id a v13+ fetch names a topic by (16 bytes), zeros before v13. A v13+ topic
    with the zero id (kio reads it as None) is named by the name "" (no topic has it)."""
    if not hasattr(topic, "topic_id"):
        return ZERO_TOPIC_ID_BYTES
    return topic_id_bytes(topic.topic_id)


def _fetch_response(
    version: int,
    code: int,
    topics: list[tuple[str, uuid.UUID | None, list[dict]]],
    session_id: int = 0,
    throttle_ms: int = 0,
) -> Any:
    cls = response_class(ApiKey.FETCH, version)
    topic_cls = schema_class(cls, "FetchableTopicResponse")
    partition_cls = schema_class(cls, "PartitionData")
    return build(
        cls,
        throttle_time=timedelta_ms(throttle_ms),
        error_code=kafka_error(code),
        session_id=session_id,
        responses=tuple(
            build(
                topic_cls,
                topic=name,
                topic_id=topic_id,
                partitions=tuple(
                    build(partition_cls, **{"aborted_transactions": (), **p}) for p in partitions
                ),
            )
            for name, topic_id, partitions in topics
        ),
    )


def _fetch_from_native(response: m.FetchResponse, version: int) -> Any:
    return _fetch_response(
        version,
        response.error_code,
        [
            (
                t.topic,
                topic_id_of_bytes(t.topic_id),
                [
                    dict(
                        partition_index=p.partition,
                        error_code=kafka_error(p.error_code),
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        records=to_kafka_format(p.records) if p.records else b"",
                        preferred_read_replica=p.preferred_read_replica,  # v11+ (KIP-392)
                        aborted_transactions=[
                            dict(producer_id=a.producer_id, first_offset=a.first_offset)
                            for a in p.aborted_transactions
                        ],
                    )
                    for p in t.partitions
                ],
            )
            for t in response.topics
        ],
        response.session_id,
        response.throttle_time_ms,  # a consumer over its quota (broker/quota_gate.py)
    )


def _fetch_error(request: Any, version: int, code: int) -> Any:
    if version >= 7:  # a top-level error code exists: no partitions (what Kafka sends)
        return _fetch_response(version, code, [])
    return _fetch_response(
        version,
        ErrorCode.NONE,
        [
            (
                t.topic,
                None,
                [
                    dict(
                        partition_index=p.partition,
                        error_code=kafka_error(code),
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        records=b"",
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


FETCH = Translation(
    api_key=ApiKey.FETCH,
    min_version=4,
    max_version=17,
    to_native=_fetch_to_native,
    from_native=_fetch_from_native,
    error_response=_fetch_error,
)


# --- ListOffsets (2) -------------------------------------------------------------------


def _list_offsets_to_native(request: Any, header: KafkaHeader) -> m.ListOffsetsRequest:
    return m.ListOffsetsRequest(
        replica_id=m.CONSUMER_REPLICA_ID,
        isolation_level=getattr(request, "isolation_level", 0),
        topics=[
            m.ListOffsetsTopic(
                name=t.name,
                partitions=[
                    m.ListOffsetsPartition(
                        partition=p.partition_index,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                        timestamp=p.timestamp,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def _list_offsets_response(version: int, topics: list[tuple[str, list[dict]]]) -> Any:
    return _per_topic_response(ApiKey.LIST_OFFSETS, version, "name", topics)


def _list_offsets_from_native(response: m.ListOffsetsResponse, version: int) -> Any:
    return _list_offsets_response(
        version,
        [
            (
                t.name,
                [
                    dict(
                        partition_index=p.partition,
                        error_code=kafka_error(p.error_code),
                        timestamp=p.timestamp,
                        offset=p.offset,
                        leader_epoch=p.leader_epoch,
                    )
                    for p in t.partitions
                ],
            )
            for t in response.topics
        ],
    )


def _list_offsets_error(request: Any, version: int, code: int) -> Any:
    return _list_offsets_response(
        version,
        [
            (
                t.name,
                [
                    dict(
                        partition_index=p.partition_index,
                        error_code=kafka_error(code),
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


LIST_OFFSETS = Translation(
    api_key=ApiKey.LIST_OFFSETS,
    min_version=1,
    max_version=8,
    to_native=_list_offsets_to_native,
    from_native=_list_offsets_from_native,
    error_response=_list_offsets_error,
)


# --- OffsetForLeaderEpoch (23) ---------------------------------------------------------


def _epoch_to_native(request: Any, header: KafkaHeader) -> m.OffsetForLeaderEpochRequest:
    return m.OffsetForLeaderEpochRequest(
        replica_id=m.CONSUMER_REPLICA_ID,
        topics=[
            m.OffsetForLeaderEpochTopic(
                topic=t.topic,
                partitions=[
                    m.OffsetForLeaderEpochPartition(
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        leader_epoch=p.leader_epoch,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def _epoch_response(version: int, topics: list[tuple[str, list[dict]]]) -> Any:
    return _per_topic_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, "topic", topics)


def _per_topic_response(
    api_key: ApiKey, version: int, name_field: str, topics: list[tuple[str, list[dict]]]
) -> Any:
    """A response of `topics` (name, partition value dicts) in its `topics` field: `build`
    finds the version's nested topic and partition classes from the type hints."""
    return build(
        response_class(api_key, version),
        throttle_time=ZERO_MS,
        topics=[{name_field: name, "partitions": parts} for name, parts in topics],
    )


def _epoch_from_native(response: m.OffsetForLeaderEpochResponse, version: int) -> Any:
    return _epoch_response(
        version,
        [
            (
                t.topic,
                [
                    dict(
                        error_code=kafka_error(p.error_code),
                        partition=p.partition,
                        leader_epoch=p.leader_epoch,
                        end_offset=p.end_offset,
                    )
                    for p in t.partitions
                ],
            )
            for t in response.topics
        ],
    )


def _epoch_error(request: Any, version: int, code: int) -> Any:
    return _epoch_response(
        version,
        [
            (
                t.topic,
                [
                    dict(
                        error_code=kafka_error(code),
                        partition=p.partition,
                        leader_epoch=-1,
                        end_offset=-1,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


OFFSET_FOR_LEADER_EPOCH = Translation(
    api_key=ApiKey.OFFSET_FOR_LEADER_EPOCH,
    min_version=2,
    max_version=4,
    to_native=_epoch_to_native,
    from_native=_epoch_from_native,
    error_response=_epoch_error,
)


# --- InitProducerId (22) ----------------------------------------------------------------


def _init_producer_id_to_native(request: Any, header: KafkaHeader) -> m.InitProducerIdRequest:
    return m.InitProducerIdRequest(
        transactional_id=request.transactional_id,
        transaction_timeout_ms=ms_of(request.transaction_timeout),
        producer_id=int(getattr(request, "producer_id", -1)),
        producer_epoch=int(getattr(request, "producer_epoch", -1)),
    )


def _init_producer_id_from_native(response: m.InitProducerIdResponse, version: int) -> Any:
    return build(
        response_class(ApiKey.INIT_PRODUCER_ID, version),
        throttle_time=ZERO_MS,
        error_code=kafka_error(response.error_code),
        producer_id=response.producer_id,
        producer_epoch=response.producer_epoch,
    )


def _init_producer_id_error(request: Any, version: int, code: int) -> Any:
    return default_response(
        response_class(ApiKey.INIT_PRODUCER_ID, version),
        code,
        producer_id=-1,
        producer_epoch=-1,
    )


INIT_PRODUCER_ID = Translation(
    api_key=ApiKey.INIT_PRODUCER_ID,
    min_version=0,
    max_version=4,
    to_native=_init_producer_id_to_native,
    from_native=_init_producer_id_from_native,
    error_response=_init_producer_id_error,
)


TRANSLATIONS: dict[int, Translation] = {
    int(t.api_key): t
    for t in (
        METADATA,
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        OFFSET_FOR_LEADER_EPOCH,
        INIT_PRODUCER_ID,
    )
}
