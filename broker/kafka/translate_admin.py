"""Kafka's CreateTopics, DeleteTopics, DeleteRecords and CreatePartitions on the Kafka
listener, translated to and from the native handlers (broker/handlers/topics.py; the data
plane's, over the replica manager, for DeleteRecords). The config APIs are in
translate_configs.py.

How it works: as in translate_groups.py, `to_native` reads the kio request into the
native message, the broker's handlers do the work (validation, ZooKeeper writes,
waiting for leaders), and `from_native` describes the answer once for `translation.build`
to fit to the requested version; `error_response` answers every topic or resource of the
request with the error code. CreateTopics passes num_partitions / replication_factor -1
(broker defaults, KIP-464), manual assignments, configs and validate_only through; the
per-topic error codes and messages come back as the native handler wrote them, and
from v5 each new topic's partition count, replication factor and configs (a topic
override is DYNAMIC_TOPIC_CONFIG, a default DEFAULT_CONFIG), from v7 its topic id.

Version ranges (kio has no CreateTopics v0-1, DeleteTopics v0):
- CreateTopics 2-7: v4 is the first with broker defaults (-1); v5 answers each new
  topic's configs, v6 only adds quota errors (never sent here), v7 the topic id.
- DeleteTopics 1-6: v6 may name a topic by its topic id instead (not both: a request
  naming one by both is INVALID_REQUEST, as in Kafka 2.8); an id no topic has is
  UNKNOWN_TOPIC_ID with a null name.
- DeleteRecords 0-2 and CreatePartitions 0-3: every version; they differ only in
  encoding (v2 flexible) and, for CreatePartitions v3, in a quota error never sent here.
  Each field maps one to one (offset -1 is the high watermark on both sides).
"""

from __future__ import annotations

from typing import Any

from broker.kafka.translation import (
    KafkaHeader,
    KafkaRequestError,
    Translation,
    build,
    ms_of,
    response_class,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from client.protocol.topic_ids import topic_id_bytes, topic_id_of_bytes

# CreateTopics v5+ config sources (Kafka's DescribeConfigsResponse.ConfigSource): an
# override of the new topic's, or a default.
DYNAMIC_TOPIC_CONFIG = m.SOURCE_DYNAMIC_TOPIC_CONFIG
DEFAULT_CONFIG = m.SOURCE_DEFAULT_CONFIG


def _response(api_key: int, version: int, **values: Any) -> Any:
    values.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), **values)


# --- CreateTopics (19) ----------------------------------------------------------------------


def create_topics_to_native(request: Any, header: KafkaHeader) -> m.CreateTopicsRequest:
    return m.CreateTopicsRequest(
        topics=[
            m.CreateTopicsTopic(
                name=topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignments=[
                    m.CreateTopicsAssignment(
                        partition_index=a.partition_index, broker_ids=list(a.broker_ids)
                    )
                    for a in topic.assignments
                ],
                configs=[m.CreateTopicsConfig(name=c.name, value=c.value) for c in topic.configs],
            )
            for topic in request.topics
        ],
        timeout_ms=ms_of(request.timeout),
        validate_only=getattr(request, "validate_only", False),
    )


def create_topics_from_native(response: m.CreateTopicsResponse, version: int) -> Any:
    return _response(
        ApiKey.CREATE_TOPICS,
        version,
        throttle_time=response.throttle_time_ms,
        topics=[
            {
                "name": t.name,
                "topic_id": topic_id_of_bytes(t.topic_id),
                "error_code": t.error_code,
                "error_message": t.error_message,
                "num_partitions": t.num_partitions,
                "replication_factor": t.replication_factor,
                "configs": [
                    {
                        "name": c.name,
                        "value": c.value,
                        "read_only": c.read_only,
                        "config_source": DEFAULT_CONFIG if c.is_default else DYNAMIC_TOPIC_CONFIG,
                        "is_sensitive": c.is_sensitive,
                    }
                    for c in t.configs
                ],
            }
            for t in response.topics
        ],
    )


def create_topics_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.CREATE_TOPICS,
        version,
        topics=[
            {
                "name": t.name,
                "topic_id": None,
                "error_code": code,
                "error_message": None,
                "configs": [],
            }
            for t in request.topics
        ],
    )


# --- DeleteTopics (20) ----------------------------------------------------------------------


def delete_topics_to_native(request: Any, header: KafkaHeader) -> m.DeleteTopicsRequest:
    if not hasattr(request, "topics"):  # v0-5: names only
        return m.DeleteTopicsRequest(
            topic_names=list(request.topic_names), timeout_ms=ms_of(request.timeout)
        )
    names: list[str] = []
    ids: list[bytes] = []
    for topic in request.topics:  # v6: a name or a topic id (kio reads the zero id as None)
        if (topic.name is None) == (topic.topic_id is None):
            raise KafkaRequestError(
                ErrorCode.INVALID_REQUEST, "give each topic a name or a topic id, not both"
            )
        if topic.topic_id is not None:
            ids.append(topic_id_bytes(topic.topic_id))
        else:
            names.append(topic.name)
    return m.DeleteTopicsRequest(
        topic_names=names, topic_ids=ids, timeout_ms=ms_of(request.timeout)
    )


def delete_topics_from_native(response: m.DeleteTopicsResponse, version: int) -> Any:
    return _response(
        ApiKey.DELETE_TOPICS,
        version,
        throttle_time=response.throttle_time_ms,
        responses=[
            {
                # "" is an id no topic has (only asked for from v6): v6's null name.
                "name": (t.name or None) if version >= 6 else t.name,
                "topic_id": topic_id_of_bytes(t.topic_id),
                "error_code": t.error_code,
                "error_message": t.error_message,
            }
            for t in response.responses
        ],
    )


def delete_topics_error(request: Any, version: int, code: int) -> Any:
    if hasattr(request, "topics"):
        asked = [(t.name, t.topic_id) for t in request.topics]
    else:
        asked = [(name, None) for name in request.topic_names]
    return _response(
        ApiKey.DELETE_TOPICS,
        version,
        responses=[
            {"name": name, "topic_id": topic_id, "error_code": code} for name, topic_id in asked
        ],
    )


# --- DeleteRecords (21) ---------------------------------------------------------------------


def delete_records_to_native(request: Any, header: KafkaHeader) -> m.DeleteRecordsRequest:
    return m.DeleteRecordsRequest(
        topics=[
            m.DeleteRecordsTopic(
                name=topic.name,
                partitions=[
                    m.DeleteRecordsPartition(partition_index=p.partition_index, offset=p.offset)
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
        timeout_ms=ms_of(request.timeout),
    )


def delete_records_from_native(response: m.DeleteRecordsResponse, version: int) -> Any:
    return _response(
        ApiKey.DELETE_RECORDS,
        version,
        throttle_time=response.throttle_time_ms,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": p.low_watermark,
                        "error_code": p.error_code,
                    }
                    for p in t.partitions
                ],
            }
            for t in response.topics
        ],
    )


def delete_records_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DELETE_RECORDS,
        version,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "low_watermark": -1, "error_code": code}
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
    )


# --- CreatePartitions (37) ------------------------------------------------------------------


def create_partitions_to_native(request: Any, header: KafkaHeader) -> m.CreatePartitionsRequest:
    return m.CreatePartitionsRequest(
        topics=[
            m.CreatePartitionsTopic(
                name=topic.name,
                count=topic.count,
                assignments=None
                if topic.assignments is None
                else [
                    m.CreatePartitionsAssignment(broker_ids=list(a.broker_ids))
                    for a in topic.assignments
                ],
            )
            for topic in request.topics
        ],
        timeout_ms=ms_of(request.timeout),
        validate_only=request.validate_only,
    )


def create_partitions_from_native(response: m.CreatePartitionsResponse, version: int) -> Any:
    return _response(
        ApiKey.CREATE_PARTITIONS,
        version,
        throttle_time=response.throttle_time_ms,
        results=[
            {"name": r.name, "error_code": r.error_code, "error_message": r.error_message}
            for r in response.results
        ],
    )


def create_partitions_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.CREATE_PARTITIONS,
        version,
        results=[
            {"name": t.name, "error_code": code, "error_message": None} for t in request.topics
        ],
    )


TRANSLATIONS: dict[int, Translation] = {
    int(t.api_key): t
    for t in [
        Translation(
            ApiKey.CREATE_TOPICS,
            2,
            7,
            create_topics_to_native,
            create_topics_from_native,
            create_topics_error,
        ),
        Translation(
            ApiKey.DELETE_TOPICS,
            1,
            6,
            delete_topics_to_native,
            delete_topics_from_native,
            delete_topics_error,
        ),
        Translation(
            ApiKey.DELETE_RECORDS,
            0,
            2,
            delete_records_to_native,
            delete_records_from_native,
            delete_records_error,
        ),
        Translation(
            ApiKey.CREATE_PARTITIONS,
            0,
            3,
            create_partitions_to_native,
            create_partitions_from_native,
            create_partitions_error,
        ),
    ]
}
