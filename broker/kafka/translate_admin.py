"""Kafka's CreateTopics, DeleteTopics, DeleteRecords, CreatePartitions and DescribeConfigs on
the Kafka listener, translated to and from the native handlers (broker/handlers/topics.py
and configs.py; the data plane's, over the replica manager, for DeleteRecords).

How it works: as in translate_groups.py, `to_native` reads the kio request into the
native message, the broker's handlers do the work (validation, ZooKeeper writes,
waiting for leaders), and `from_native` describes the answer once for `translation.build`
to fit to the requested version; `error_response` answers every topic or resource of the
request with the error code. CreateTopics passes num_partitions / replication_factor -1
(broker defaults, KIP-464), manual assignments, configs and validate_only through; the
per-topic error codes and messages come back as the native handler wrote them, and
from v5 each new topic's partition count, replication factor and configs (a topic
override is DYNAMIC_TOPIC_CONFIG, a default DEFAULT_CONFIG, as for DescribeConfigs
below), from v7 its topic id.
DescribeConfigs adds what Kafka's v1+ answers carry and the native answer implies: the
config source (a topic override is DYNAMIC_TOPIC_CONFIG, anything else DEFAULT_CONFIG,
since the native answer does not say whether a default came from server.properties), one
synonym (the override itself, or the default under its broker-level name, as Kafka lists
them) and, from v3, the config's type. Documentation is left null (Kafka sends it only
when asked). Broker resources get the native handler's per-resource INVALID_REQUEST.

Version ranges (kio has no CreateTopics v0-1, DeleteTopics v0, DescribeConfigs v0):
- CreateTopics 2-7: v4 is the first with broker defaults (-1); v5 answers each new
  topic's configs, v6 only adds quota errors (never sent here), v7 the topic id.
- DeleteTopics 1-6: v6 may name a topic by its topic id instead (not both: a request
  naming one by both is INVALID_REQUEST, as in Kafka 2.8); an id no topic has is
  UNKNOWN_TOPIC_ID with a null name.
- DeleteRecords 0-2 and CreatePartitions 0-3: every version; they differ only in
  encoding (v2 flexible) and, for CreatePartitions v3, in a quota error never sent here.
  Each field maps one to one (offset -1 is the high watermark on both sides).
- DescribeConfigs 1-4.
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

# Kafka's DescribeConfigsResponse.ConfigSource.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# Kafka's ConfigDef.Type ids as DescribeConfigs v3+ sends them.
_UNKNOWN, _BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 0, 1, 2, 3, 5, 6, 7

# Each topic config: its type and the broker config that supplies its default
# (Kafka's LogConfig definitions and TopicConfigSynonyms).
TOPIC_CONFIGS: dict[str, tuple[int, str]] = {
    "segment.bytes": (_INT, "log.segment.bytes"),
    "segment.ms": (_LONG, "log.roll.ms"),
    "segment.index.bytes": (_INT, "log.index.size.max.bytes"),
    "index.interval.bytes": (_INT, "log.index.interval.bytes"),
    "retention.ms": (_LONG, "log.retention.ms"),
    "retention.bytes": (_LONG, "log.retention.bytes"),
    "max.message.bytes": (_INT, "message.max.bytes"),
    "flush.messages": (_LONG, "log.flush.interval.messages"),
    "flush.ms": (_LONG, "log.flush.interval.ms"),
    "message.timestamp.type": (_STRING, "log.message.timestamp.type"),
    "cleanup.policy": (_LIST, "log.cleanup.policy"),
    "delete.retention.ms": (_LONG, "log.cleaner.delete.retention.ms"),
    "min.cleanable.dirty.ratio": (_DOUBLE, "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": (_LONG, "log.cleaner.min.compaction.lag.ms"),
    "max.compaction.lag.ms": (_LONG, "log.cleaner.max.compaction.lag.ms"),
    "min.insync.replicas": (_INT, "min.insync.replicas"),
    "unclean.leader.election.enable": (_BOOLEAN, "unclean.leader.election.enable"),
}


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


# --- DescribeConfigs (32) -------------------------------------------------------------------


def describe_configs_to_native(request: Any, header: KafkaHeader) -> m.DescribeConfigsRequest:
    return m.DescribeConfigsRequest(
        resources=[
            m.DescribeConfigsResource(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                # null or empty: every key (Kafka treats both alike)
                configuration_keys=(
                    None if r.configuration_keys is None else list(r.configuration_keys)
                ),
            )
            for r in request.resources
        ]
    )


def _config_entry(resource_type: int, entry: m.DescribeConfigsResult) -> dict[str, Any]:
    config_type, broker_name = TOPIC_CONFIGS.get(entry.name, (_UNKNOWN, entry.name))
    if resource_type == m.TOPIC_RESOURCE:
        source = DEFAULT_CONFIG if entry.is_default else DYNAMIC_TOPIC_CONFIG
        synonym = broker_name if entry.is_default else entry.name
    else:
        source = DEFAULT_CONFIG if entry.is_default else STATIC_BROKER_CONFIG
        synonym = entry.name
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "is_default": entry.is_default,
        "config_source": source,
        "is_sensitive": entry.is_sensitive,
        "synonyms": [{"name": synonym, "value": entry.value, "source": source}],
        "config_type": config_type,
        "documentation": None,
    }


def describe_configs_from_native(response: m.DescribeConfigsResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_CONFIGS,
        version,
        throttle_time=response.throttle_time_ms,
        results=[
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [_config_entry(r.resource_type, c) for c in r.configs],
            }
            for r in response.results
        ],
    )


def describe_configs_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_CONFIGS,
        version,
        results=[
            {
                "error_code": code,
                "error_message": None,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [],
            }
            for r in request.resources
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
        Translation(
            ApiKey.DESCRIBE_CONFIGS,
            1,
            4,
            describe_configs_to_native,
            describe_configs_from_native,
            describe_configs_error,
        ),
    ]
}
