"""The admin and group translations of the Kafka listener (broker/kafka/translate_admin.py,
translate_groups.py), version by version.

For every API and every advertised version: a kio request built from one set of values is
serialised and parsed back with kio (so it is a valid message of that version), translated
to the native request and compared with what that version carries; a native response is
translated to the version's kio response, which must serialise (a wrong type fails there)
and parse back with the expected fields; `error_response` puts the code on every group,
member, topic, partition or resource of the request. At the bottom, end-to-end checks run
real Kafka clients in a thread against real brokers over TCP (tests/support/cluster.py with
a Kafka listener): kafka-python's admin (topics, configs, groups) and consumer group, and
confluent-kafka's and aiokafka's consumer groups, whose groups the native admin then sees.
"""

from __future__ import annotations

import dataclasses
import io
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from broker.kafka import translate_admin, translate_configs, translate_groups
from broker.kafka.translation import (
    KafkaHeader,
    NativeBatch,
    build,
    field_names,
    request_class,
    response_class,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID("6f1c3e2a-9b0d-4c8e-a1f2-3b4c5d6e7f80")
TRANSLATIONS = {
    **translate_admin.TRANSLATIONS,
    **translate_configs.TRANSLATIONS,
    **translate_groups.TRANSLATIONS,
}
VERSIONS = [
    (api_key, version)
    for api_key, t in sorted(TRANSLATIONS.items())
    for version in range(t.min_version, t.max_version + 1)
]


def ids(case):
    api_key, version = case
    return f"{ApiKey(api_key).name}-v{version}"


def roundtrip(entity: Any) -> Any:
    """Serialise with kio and parse back: the entity must be a valid message."""
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    data = buffer.getvalue()
    parsed, end = entity_reader(type(entity))(data, 0)
    assert end == len(data)
    return parsed


def kio_request(api_key: int, version: int, **values: Any) -> Any:
    return roundtrip(build(request_class(api_key, version), **values))


def to_native(api_key: int, version: int, request: Any) -> Any:
    header = KafkaHeader(api_key, version, correlation_id=7, client_id="test-client")
    return TRANSLATIONS[api_key].to_native(request, header)


def from_native(api_key: int, version: int, response: Any) -> Any:
    kio_response = TRANSLATIONS[api_key].from_native(response, version)
    assert type(kio_response) is response_class(api_key, version)
    return roundtrip(kio_response)


def error_codes(entity: Any) -> list[int]:
    """Every error code in a kio entity, depth first."""
    codes = []
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if field.metadata.get("kafka_type") == "error_code":
            codes.append(int(value))
        elif isinstance(value, tuple):
            codes.extend(
                c for item in value if dataclasses.is_dataclass(item) for c in error_codes(item)
            )
    return codes


def has(api_key: int, version: int, name: str, *, request: bool = False) -> bool:
    cls = request_class(api_key, version) if request else response_class(api_key, version)
    return name in field_names(cls)


# --- request values, one set for every version (build keeps what a version has) ------------

REQUESTS: dict[int, dict[str, Any]] = {
    ApiKey.FIND_COORDINATOR: {"key": "g", "key_type": 0, "coordinator_keys": ["g"]},
    ApiKey.JOIN_GROUP: {
        "group_id": "g",
        "session_timeout": 10_000,
        "rebalance_timeout": 300_000,
        "member_id": "m-1",
        "group_instance_id": "i-1",
        "protocol_type": "consumer",
        "protocols": [
            {"name": "range", "metadata": b"\x00\x01range"},
            {"name": "roundrobin", "metadata": b"\x00\x01rr"},
        ],
        "reason": "rejoin",
    },
    ApiKey.SYNC_GROUP: {
        "group_id": "g",
        "generation_id": 3,
        "member_id": "m-1",
        "group_instance_id": "i-1",
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [
            {"member_id": "m-1", "assignment": b"\x00\x00a1"},
            {"member_id": "m-2", "assignment": b""},
        ],
    },
    ApiKey.HEARTBEAT: {
        "group_id": "g",
        "generation_id": 3,
        "member_id": "m-1",
        "group_instance_id": "i-1",
    },
    ApiKey.LEAVE_GROUP: {
        "group_id": "g",
        "member_id": "m-1",
        "members": [
            {"member_id": "m-1"},
            {"member_id": "", "group_instance_id": "i-2", "reason": "shutdown"},
        ],
    },
    ApiKey.OFFSET_COMMIT: {
        "group_id": "g",
        "generation_id_or_member_epoch": 4,
        "member_id": "m-1",
        "group_instance_id": "i-1",
        "retention_time": 86_400_000,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 42,
                        "committed_leader_epoch": 3,
                        "committed_metadata": "md",
                    },
                    {"partition_index": 1, "committed_offset": 7, "committed_metadata": None},
                ],
            },
            {
                "name": "u",
                "partitions": [
                    {"partition_index": 5, "committed_offset": 0, "committed_metadata": ""}
                ],
            },
        ],
    },
    ApiKey.OFFSET_FETCH: {
        "group_id": "g",
        "topics": [
            {"name": "t", "partition_indexes": [0, 1]},
            {"name": "u", "partition_indexes": [5]},
        ],
        "groups": [  # v8+ (KIP-709): the same, as a batch of one group
            {
                "group_id": "g",
                "topics": [
                    {"name": "t", "partition_indexes": [0, 1]},
                    {"name": "u", "partition_indexes": [5]},
                ],
            }
        ],
        "require_stable": True,
    },
    ApiKey.LIST_GROUPS: {"states_filter": ["Stable", "Empty"], "types_filter": ["classic"]},
    ApiKey.DESCRIBE_GROUPS: {"groups": ["g", "gone"], "include_authorized_operations": True},
    ApiKey.DELETE_GROUPS: {"groups_names": ["g", "h"]},
    ApiKey.OFFSET_DELETE: {
        "group_id": "g",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}],
    },
    ApiKey.CREATE_TOPICS: {
        "topics": [
            {
                "name": "a",
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [],
                "configs": [
                    {"name": "retention.ms", "value": "1000"},
                    {"name": "cleanup.policy", "value": None},
                ],
            },
            {
                "name": "b",
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [
                    {"partition_index": 0, "broker_ids": [1, 2]},
                    {"partition_index": 1, "broker_ids": [2, 3]},
                ],
                "configs": [],
            },
            {
                "name": "c",
                "num_partitions": 6,
                "replication_factor": 3,
                "assignments": [],
                "configs": [],
            },
        ],
        "timeout": 5_000,
        "validate_only": True,
    },
    ApiKey.DELETE_TOPICS: {
        "topic_names": ["a", "b"],  # v0-5
        "topics": [{"name": "a", "topic_id": None}, {"topic_id": TOPIC_ID}],  # v6
        "timeout": 1_500,
    },
    ApiKey.DELETE_RECORDS: {
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "offset": 5},
                    {"partition_index": 1, "offset": -1},
                ],
            }
        ],
        "timeout": 2_000,
    },
    ApiKey.CREATE_PARTITIONS: {
        "topics": [
            {"name": "t", "count": 4, "assignments": None},
            {"name": "u", "count": 2, "assignments": [{"broker_ids": [2, 3]}]},
        ],
        "timeout": 3_000,
        "validate_only": True,
    },
    ApiKey.DESCRIBE_CONFIGS: {
        "resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
            {"resource_type": 2, "resource_name": "u", "configuration_keys": ["retention.ms"]},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": []},
        ],
        "include_synonyms": True,
        "include_documentation": True,
    },
    ApiKey.ALTER_CONFIGS: {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [{"name": "retention.ms", "value": "5"}, {"name": "x", "value": None}],
            },
            {"resource_type": 4, "resource_name": "", "configs": []},
        ],
        "validate_only": True,
    },
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [
                    {"name": "cleanup.policy", "config_operation": 2, "value": "compact"},
                    {"name": "retention.ms", "config_operation": 1, "value": None},
                ],
            },
            {
                "resource_type": 4,
                "resource_name": "1",
                "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "9"}],
            },
        ],
        "validate_only": False,
    },
}


def expected_native(api_key: int, version: int) -> Any:
    """The native request each version's request must translate to."""

    def since(v: int, value: Any, default: Any) -> Any:
        return value if version >= v else default

    if api_key == ApiKey.FIND_COORDINATOR:
        single = m.FindCoordinatorRequest(key="g", key_type=0)
        return NativeBatch([single]) if version >= 4 else single
    if api_key == ApiKey.JOIN_GROUP:
        return m.JoinGroupRequest(
            group_id="g",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=300_000,
            member_id="m-1",
            group_instance_id=since(5, "i-1", None),
            protocol_type="consumer",
            protocols=[
                m.JoinGroupProtocol(name="range", metadata=b"\x00\x01range"),
                m.JoinGroupProtocol(name="roundrobin", metadata=b"\x00\x01rr"),
            ],
            supports_skip_assignment=version >= 9,  # KIP-814
        )
    if api_key == ApiKey.SYNC_GROUP:
        return m.SyncGroupRequest(
            group_id="g",
            generation_id=3,
            member_id="m-1",
            group_instance_id=since(3, "i-1", None),
            assignments=[
                m.SyncGroupAssignment(member_id="m-1", assignment=b"\x00\x00a1"),
                m.SyncGroupAssignment(member_id="m-2", assignment=b""),
            ],
        )
    if api_key == ApiKey.HEARTBEAT:
        return m.HeartbeatRequest(
            group_id="g", generation_id=3, member_id="m-1", group_instance_id=since(3, "i-1", None)
        )
    if api_key == ApiKey.LEAVE_GROUP:
        if version < 3:
            return m.LeaveGroupRequest(group_id="g", members=[m.LeaveGroupMember(member_id="m-1")])
        return m.LeaveGroupRequest(
            group_id="g",
            members=[
                m.LeaveGroupMember(member_id="m-1"),
                m.LeaveGroupMember(member_id="", group_instance_id="i-2"),
            ],
        )
    if api_key == ApiKey.OFFSET_COMMIT:
        return m.OffsetCommitRequest(
            group_id="g",
            generation_id=4,
            member_id="m-1",
            group_instance_id=since(7, "i-1", None),
            topics=[
                m.OffsetCommitTopic(
                    name="t",
                    partitions=[
                        m.OffsetCommitPartition(
                            partition_index=0,
                            committed_offset=42,
                            committed_leader_epoch=since(6, 3, -1),
                            committed_metadata="md",
                        ),
                        m.OffsetCommitPartition(
                            partition_index=1, committed_offset=7, committed_metadata=None
                        ),
                    ],
                ),
                m.OffsetCommitTopic(
                    name="u",
                    partitions=[
                        m.OffsetCommitPartition(
                            partition_index=5, committed_offset=0, committed_metadata=""
                        )
                    ],
                ),
            ],
        )
    if api_key == ApiKey.OFFSET_FETCH:
        single = m.OffsetFetchRequest(
            group_id="g",
            topics=[
                m.OffsetFetchTopic(name="t", partition_indexes=[0, 1]),
                m.OffsetFetchTopic(name="u", partition_indexes=[5]),
            ],
            require_stable=version >= 7,  # KIP-447 (the test request's booleans are true)
        )
        return NativeBatch([single]) if version >= 8 else single
    if api_key == ApiKey.LIST_GROUPS:
        return m.ListGroupsRequest(states_filter=since(4, ["Stable", "Empty"], []))
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return m.DescribeGroupsRequest(groups=["g", "gone"])
    if api_key == ApiKey.DELETE_GROUPS:
        return m.DeleteGroupsRequest(groups_names=["g", "h"])
    if api_key == ApiKey.OFFSET_DELETE:
        return m.OffsetDeleteRequest(
            group_id="g", topics=[m.OffsetDeleteTopic(name="t", partitions=[0, 1])]
        )
    if api_key == ApiKey.CREATE_TOPICS:
        return m.CreateTopicsRequest(
            topics=[
                m.CreateTopicsTopic(
                    name="a",
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=[
                        m.CreateTopicsConfig(name="retention.ms", value="1000"),
                        m.CreateTopicsConfig(name="cleanup.policy", value=None),
                    ],
                ),
                m.CreateTopicsTopic(
                    name="b",
                    assignments=[
                        m.CreateTopicsAssignment(partition_index=0, broker_ids=[1, 2]),
                        m.CreateTopicsAssignment(partition_index=1, broker_ids=[2, 3]),
                    ],
                ),
                m.CreateTopicsTopic(name="c", num_partitions=6, replication_factor=3),
            ],
            timeout_ms=5_000,
            validate_only=True,
        )
    if api_key == ApiKey.DELETE_TOPICS:
        return m.DeleteTopicsRequest(
            topic_names=since(6, ["a"], ["a", "b"]),
            topic_ids=since(6, [TOPIC_ID.bytes], []),
            timeout_ms=1_500,
        )
    if api_key == ApiKey.DELETE_RECORDS:
        return m.DeleteRecordsRequest(
            topics=[
                m.DeleteRecordsTopic(
                    name="t",
                    partitions=[
                        m.DeleteRecordsPartition(partition_index=0, offset=5),
                        m.DeleteRecordsPartition(partition_index=1, offset=-1),
                    ],
                )
            ],
            timeout_ms=2_000,
        )
    if api_key == ApiKey.CREATE_PARTITIONS:
        return m.CreatePartitionsRequest(
            topics=[
                m.CreatePartitionsTopic(name="t", count=4, assignments=None),
                m.CreatePartitionsTopic(
                    name="u",
                    count=2,
                    assignments=[m.CreatePartitionsAssignment(broker_ids=[2, 3])],
                ),
            ],
            timeout_ms=3_000,
            validate_only=True,
        )
    if api_key == ApiKey.DESCRIBE_CONFIGS:
        return m.DescribeConfigsRequest(
            resources=[
                m.DescribeConfigsResource(
                    resource_type=2, resource_name="t", configuration_keys=None
                ),
                m.DescribeConfigsResource(
                    resource_type=2, resource_name="u", configuration_keys=["retention.ms"]
                ),
                m.DescribeConfigsResource(
                    resource_type=4, resource_name="1", configuration_keys=[]
                ),
            ],
            include_synonyms=True,
            include_documentation=since(3, True, False),
        )
    if api_key == ApiKey.ALTER_CONFIGS:
        return m.AlterConfigsRequest(
            resources=[
                m.AlterConfigsRequestResource(
                    resource_type=2,
                    resource_name="t",
                    configs=[
                        m.AlterConfigsRequestConfig(name="retention.ms", value="5"),
                        m.AlterConfigsRequestConfig(name="x", value=None),
                    ],
                ),
                m.AlterConfigsRequestResource(resource_type=4, resource_name="", configs=[]),
            ],
            validate_only=True,
        )
    if api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS:
        return m.IncrementalAlterConfigsRequest(
            resources=[
                m.AlterConfigsResource(
                    resource_type=2,
                    resource_name="t",
                    configs=[
                        m.AlterableConfig(
                            name="cleanup.policy", config_operation=2, value="compact"
                        ),
                        m.AlterableConfig(name="retention.ms", config_operation=1, value=None),
                    ],
                ),
                m.AlterConfigsResource(
                    resource_type=4,
                    resource_name="1",
                    configs=[
                        m.AlterableConfig(name="log.retention.ms", config_operation=0, value="9")
                    ],
                ),
            ],
            validate_only=False,
        )
    raise AssertionError(api_key)


# --- native responses, and what each version must show of them ------------------------------

NATIVE_RESPONSES: dict[int, Any] = {
    ApiKey.OFFSET_DELETE: m.OffsetDeleteResponse(
        error_code=0,
        throttle_time_ms=0,
        topics=[
            m.OffsetDeleteResponseTopic(
                name="t",
                partitions=[
                    m.OffsetDeleteResponsePartition(partition_index=0, error_code=0),
                    m.OffsetDeleteResponsePartition(
                        partition_index=1, error_code=ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    ),
                ],
            )
        ],
    ),
    ApiKey.FIND_COORDINATOR: m.FindCoordinatorResponse(
        throttle_time_ms=0, error_code=0, error_message=None, node_id=2, host="b2", port=29092
    ),
    ApiKey.JOIN_GROUP: m.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=0,
        generation_id=5,
        protocol_name="range",
        leader="m-1",
        member_id="m-1",
        members=[
            m.JoinGroupResponseMember(member_id="m-1", group_instance_id="i-1", metadata=b"\x01"),
            m.JoinGroupResponseMember(member_id="m-2", group_instance_id=None, metadata=b"\x02"),
        ],
    ),
    ApiKey.SYNC_GROUP: m.SyncGroupResponse(throttle_time_ms=0, error_code=0, assignment=b"\x00a"),
    ApiKey.HEARTBEAT: m.HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.NONE),
    ApiKey.LEAVE_GROUP: m.LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        members=[
            m.LeaveGroupResponseMember(
                member_id="m-1", group_instance_id=None, error_code=ErrorCode.UNKNOWN_MEMBER_ID
            ),
            m.LeaveGroupResponseMember(member_id="", group_instance_id="i-2", error_code=0),
        ],
    ),
    ApiKey.OFFSET_COMMIT: m.OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            m.OffsetCommitResponseTopic(
                name="t",
                partitions=[
                    m.OffsetCommitResponsePartition(partition_index=0, error_code=0),
                    m.OffsetCommitResponsePartition(
                        partition_index=1, error_code=ErrorCode.OFFSET_METADATA_TOO_LARGE
                    ),
                ],
            ),
            m.OffsetCommitResponseTopic(
                name="u",
                partitions=[
                    m.OffsetCommitResponsePartition(
                        partition_index=5, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                ],
            ),
        ],
    ),
    ApiKey.OFFSET_FETCH: m.OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[
            m.OffsetFetchResponseTopic(
                name="t",
                partitions=[
                    m.OffsetFetchResponsePartition(
                        partition_index=0,
                        committed_offset=42,
                        committed_leader_epoch=3,
                        metadata="md",
                        error_code=0,
                    ),
                    m.OffsetFetchResponsePartition(
                        partition_index=1,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=0,
                    ),
                ],
            )
        ],
    ),
    ApiKey.LIST_GROUPS: m.ListGroupsResponse(
        throttle_time_ms=0,
        error_code=0,
        groups=[
            m.ListGroupsResponseGroup(group_id="g", protocol_type="consumer", group_state="Stable"),
            m.ListGroupsResponseGroup(group_id="h", protocol_type="", group_state="Empty"),
        ],
    ),
    ApiKey.DESCRIBE_GROUPS: m.DescribeGroupsResponse(
        throttle_time_ms=0,
        groups=[
            m.DescribeGroupsResponseGroup(
                error_code=0,
                group_id="g",
                group_state="Stable",
                protocol_type="consumer",
                protocol_data="range",
                members=[
                    m.DescribeGroupsResponseMember(
                        member_id="m-1",
                        group_instance_id="i-1",
                        client_id="rdkafka",
                        client_host="/127.0.0.1",
                        member_metadata=b"\x00\x01",
                        member_assignment=b"\x00\x02",
                    )
                ],
                generation_id=5,
                coordinator_id=1,
            ),
            m.DescribeGroupsResponseGroup(
                error_code=0,
                group_id="gone",
                group_state="Dead",
                protocol_type="",
                protocol_data="",
                members=[],
            ),
        ],
    ),
    ApiKey.DELETE_GROUPS: m.DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[
            m.DeleteGroupsResponseResult(group_id="g", error_code=0),
            m.DeleteGroupsResponseResult(group_id="h", error_code=ErrorCode.NON_EMPTY_GROUP),
        ],
    ),
    ApiKey.CREATE_TOPICS: m.CreateTopicsResponse(
        throttle_time_ms=0,
        topics=[
            m.CreateTopicsResponseTopic(
                name="a",
                error_code=0,
                error_message=None,
                num_partitions=3,
                replication_factor=2,
                topic_id=TOPIC_ID.bytes,
                configs=[
                    m.CreateTopicsResponseConfig(
                        name="cleanup.policy", value="delete", is_default=True
                    ),
                    m.CreateTopicsResponseConfig(
                        name="retention.ms", value="1000", is_default=False
                    ),
                ],
            ),
            m.CreateTopicsResponseTopic(
                name="b",
                error_code=ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                error_message="brokers not live: [3]",
                num_partitions=-1,
                replication_factor=-1,
            ),
        ],
    ),
    ApiKey.DELETE_TOPICS: m.DeleteTopicsResponse(
        throttle_time_ms=0,
        responses=[
            m.DeleteTopicsResponseTopic(name="a", error_code=0, error_message=None),
            m.DeleteTopicsResponseTopic(
                name="b",
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="topic 'b' does not exist",
            ),
            m.DeleteTopicsResponseTopic(
                name="",
                error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                error_message="no topic has this topic id",
                topic_id=TOPIC_ID.bytes,
            ),
        ],
    ),
    ApiKey.DELETE_RECORDS: m.DeleteRecordsResponse(
        throttle_time_ms=0,
        topics=[
            m.DeleteRecordsResponseTopic(
                name="t",
                partitions=[
                    m.DeleteRecordsResponsePartition(
                        partition_index=0, low_watermark=5, error_code=0
                    ),
                    m.DeleteRecordsResponsePartition(
                        partition_index=1,
                        low_watermark=-1,
                        error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                    ),
                ],
            )
        ],
    ),
    ApiKey.CREATE_PARTITIONS: m.CreatePartitionsResponse(
        throttle_time_ms=0,
        results=[
            m.CreatePartitionsResponseTopic(name="t", error_code=0, error_message=None),
            m.CreatePartitionsResponseTopic(
                name="u",
                error_code=ErrorCode.INVALID_PARTITIONS,
                error_message="Topic already has 2 partitions.",
            ),
        ],
    ),
    ApiKey.DESCRIBE_CONFIGS: m.DescribeConfigsResponse(
        throttle_time_ms=0,
        results=[
            m.DescribeConfigsResponseResource(
                error_code=0,
                error_message=None,
                resource_type=2,
                resource_name="t",
                configs=[
                    m.DescribeConfigsResult(
                        name="retention.ms",
                        value="1000",
                        read_only=False,
                        is_default=False,
                        config_source=1,
                        synonyms=[
                            m.DescribeConfigsSynonym(name="retention.ms", value="1000", source=1),
                            m.DescribeConfigsSynonym(
                                name="log.retention.ms", value="5000", source=3
                            ),
                        ],
                        config_type=5,
                    ),
                    m.DescribeConfigsResult(
                        name="segment.bytes",
                        value="1073741824",
                        read_only=False,
                        is_default=True,
                        config_source=5,
                        synonyms=[
                            m.DescribeConfigsSynonym(
                                name="log.segment.bytes", value="1073741824", source=5
                            )
                        ],
                        config_type=3,
                    ),
                    m.DescribeConfigsResult(
                        name="cleanup.policy",
                        value="delete",
                        read_only=False,
                        is_default=False,
                        config_source=4,
                        synonyms=[
                            m.DescribeConfigsSynonym(
                                name="log.cleanup.policy", value="delete", source=4
                            )
                        ],
                        config_type=7,
                    ),
                ],
            ),
            m.DescribeConfigsResponseResource(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="Unexpected broker id, expected 2 or empty string, but received 1",
                resource_type=4,
                resource_name="1",
                configs=[],
            ),
        ],
    ),
    ApiKey.ALTER_CONFIGS: m.AlterConfigsResponse(
        throttle_time_ms=0,
        responses=[
            m.AlterConfigsResourceResponse(
                error_code=0, error_message=None, resource_type=2, resource_name="t"
            ),
            m.AlterConfigsResourceResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="Cannot update these configs dynamically: num.partitions",
                resource_type=4,
                resource_name="",
            ),
        ],
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: m.IncrementalAlterConfigsResponse(
        throttle_time_ms=0,
        responses=[
            m.AlterConfigsResourceResponse(
                error_code=ErrorCode.INVALID_CONFIG,
                error_message="unknown topic config 'x'",
                resource_type=2,
                resource_name="t",
            ),
            m.AlterConfigsResourceResponse(
                error_code=0, error_message=None, resource_type=4, resource_name="1"
            ),
        ],
    ),
}


def check_response(api_key: int, version: int, r: Any) -> None:
    """What the translated (and kio-parsed) response of `version` must say."""

    def since(v: int) -> bool:
        return version >= v

    if api_key == ApiKey.FIND_COORDINATOR:
        if since(4):  # KIP-699: one coordinator per key
            (r,) = r.coordinators
            assert r.key == "g"
        assert (r.error_code, r.node_id, r.host, r.port) == (0, 2, "b2", 29092)
        assert has(api_key, min(version, 3), "error_message") == since(1)
    elif api_key == ApiKey.JOIN_GROUP:
        assert (r.error_code, r.generation_id, r.protocol_name) == (0, 5, "range")
        assert (r.leader, r.member_id) == ("m-1", "m-1")
        assert [(x.member_id, x.metadata) for x in r.members] == [
            ("m-1", b"\x01"),
            ("m-2", b"\x02"),
        ]
        if since(5):
            assert [x.group_instance_id for x in r.members] == ["i-1", None]
        if since(7):
            assert r.protocol_type is None
    elif api_key == ApiKey.SYNC_GROUP:
        assert (r.error_code, r.assignment) == (0, b"\x00a")
    elif api_key == ApiKey.HEARTBEAT:
        assert r.error_code == 0
    elif api_key == ApiKey.LEAVE_GROUP:
        if since(3):
            assert r.error_code == 0
            assert [(x.member_id, x.group_instance_id, x.error_code) for x in r.members] == [
                ("m-1", None, ErrorCode.UNKNOWN_MEMBER_ID),
                ("", "i-2", 0),
            ]
        else:  # one member: its result is the answer
            assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    elif api_key == ApiKey.OFFSET_COMMIT:
        got = [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]
        assert got == [
            ("t", 0, 0),
            ("t", 1, ErrorCode.OFFSET_METADATA_TOO_LARGE),
            ("u", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
    elif api_key == ApiKey.OFFSET_FETCH:
        if since(8):  # KIP-709: one answer per group
            (r,) = r.groups
            assert r.group_id == "g"
        assert r.error_code == 0
        got = [
            (t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for t in r.topics
            for p in t.partitions
        ]
        assert got == [("t", 0, 42, "md", 0), ("t", 1, -1, "", 0)]
        if since(5):
            assert [p.committed_leader_epoch for p in r.topics[0].partitions] == [3, -1]
    elif api_key == ApiKey.OFFSET_DELETE:
        assert r.error_code == 0
        got = [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]
        assert got == [("t", 0, 0), ("t", 1, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)]
    elif api_key == ApiKey.LIST_GROUPS:
        assert r.error_code == 0
        assert [(g.group_id, g.protocol_type) for g in r.groups] == [
            ("g", "consumer"),
            ("h", ""),
        ]
        if since(4):
            assert [g.group_state for g in r.groups] == ["Stable", "Empty"]
        if since(5):
            assert {g.group_type for g in r.groups} == {"classic"}
    elif api_key == ApiKey.DESCRIBE_GROUPS:
        g, gone = r.groups
        assert (g.error_code, g.group_id, g.group_state, g.protocol_data) == (
            0,
            "g",
            "Stable",
            "range",
        )
        (member,) = g.members
        assert (member.member_id, member.client_id, member.client_host) == (
            "m-1",
            "rdkafka",
            "/127.0.0.1",
        )
        assert (member.member_metadata, member.member_assignment) == (b"\x00\x01", b"\x00\x02")
        if since(4):
            assert member.group_instance_id == "i-1"
        if since(6):  # KIP-1043: an unknown group is an error, no longer a Dead group
            assert gone.error_code == ErrorCode.GROUP_ID_NOT_FOUND
            assert gone.error_message
        else:
            assert (gone.error_code, gone.group_state) == (0, "Dead")
    elif api_key == ApiKey.DELETE_GROUPS:
        assert [(x.group_id, x.error_code) for x in r.results] == [
            ("g", 0),
            ("h", ErrorCode.NON_EMPTY_GROUP),
        ]
    elif api_key == ApiKey.CREATE_TOPICS:
        assert [(t.name, t.error_code, t.error_message) for t in r.topics] == [
            ("a", 0, None),
            ("b", ErrorCode.INVALID_REPLICA_ASSIGNMENT, "brokers not live: [3]"),
        ]
        if since(5):
            a, b = r.topics
            assert (a.num_partitions, a.replication_factor) == (3, 2)
            assert [(c.name, c.value, c.config_source) for c in a.configs] == [
                ("cleanup.policy", "delete", translate_admin.DEFAULT_CONFIG),
                ("retention.ms", "1000", translate_admin.DYNAMIC_TOPIC_CONFIG),
            ]
            assert (b.num_partitions, b.replication_factor, b.configs) == (-1, -1, ())
        if since(7):  # kio reads the zero id as None
            assert [t.topic_id for t in r.topics] == [TOPIC_ID, None]
    elif api_key == ApiKey.DELETE_TOPICS:
        # Before v6 names are not nullable: an unknown id's "" stays "" (never sent then).
        assert [(t.name, t.error_code) for t in r.responses] == [
            ("a", 0),
            ("b", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (None if since(6) else "", ErrorCode.UNKNOWN_TOPIC_ID),
        ]
        if since(5):
            assert r.responses[1].error_message == "topic 'b' does not exist"
        if since(6):
            assert [t.topic_id for t in r.responses] == [None, None, TOPIC_ID]
    elif api_key == ApiKey.DELETE_RECORDS:
        assert [
            (t.name, p.partition_index, p.low_watermark, p.error_code)
            for t in r.topics
            for p in t.partitions
        ] == [("t", 0, 5, 0), ("t", 1, -1, ErrorCode.OFFSET_OUT_OF_RANGE)]
    elif api_key == ApiKey.CREATE_PARTITIONS:
        assert [(x.name, x.error_code, x.error_message) for x in r.results] == [
            ("t", 0, None),
            ("u", ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions."),
        ]
    elif api_key == ApiKey.DESCRIBE_CONFIGS:
        topic, broker = r.results
        assert (broker.error_code, broker.resource_type, broker.resource_name) == (
            ErrorCode.INVALID_REQUEST,
            4,
            "1",
        )
        assert broker.error_message.startswith("Unexpected broker id")
        assert (topic.error_code, topic.resource_type, topic.resource_name) == (0, 2, "t")
        got = {
            c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in topic.configs
        }
        assert got == {
            "retention.ms": (
                "1000",
                1,
                [("retention.ms", "1000", 1), ("log.retention.ms", "5000", 3)],
            ),
            "segment.bytes": ("1073741824", 5, [("log.segment.bytes", "1073741824", 5)]),
            "cleanup.policy": ("delete", 4, [("log.cleanup.policy", "delete", 4)]),
        }
        if since(3):
            assert [c.config_type for c in topic.configs] == [5, 3, 7]  # LONG, INT, LIST
    elif api_key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        got = [(x.resource_type, x.resource_name, x.error_code) for x in r.responses]
        if api_key == ApiKey.ALTER_CONFIGS:
            assert got == [(2, "t", 0), (4, "", ErrorCode.INVALID_REQUEST)]
        else:
            assert got == [(2, "t", ErrorCode.INVALID_CONFIG), (4, "1", 0)]
    else:
        raise AssertionError(api_key)


# --- the tests ------------------------------------------------------------------------------


def test_every_advertised_version_exists_in_kio():
    for api_key, version in VERSIONS:
        assert request_class(api_key, version).__version__ == version
        assert response_class(api_key, version).__version__ == version


def test_ranges_cover_what_the_clients_send():
    """librdkafka 2.x, kafka-python 3.x and aiokafka 0.14 each find a version they speak."""
    ranges = {k: (t.min_version, t.max_version) for k, t in TRANSLATIONS.items()}
    # aiokafka 0.14's highest struct per API must be inside (it picks the highest it has).
    aiokafka_max = {
        ApiKey.FIND_COORDINATOR: 1,
        ApiKey.JOIN_GROUP: 5,
        ApiKey.SYNC_GROUP: 3,
        ApiKey.HEARTBEAT: 1,
        ApiKey.LEAVE_GROUP: 1,
        ApiKey.OFFSET_COMMIT: 3,
        ApiKey.OFFSET_FETCH: 3,
        ApiKey.CREATE_TOPICS: 3,
        ApiKey.DELETE_TOPICS: 3,
        ApiKey.DESCRIBE_CONFIGS: 2,
        ApiKey.LIST_GROUPS: 2,
        ApiKey.DESCRIBE_GROUPS: 3,
        ApiKey.DELETE_GROUPS: 1,
    }
    for api_key, version in aiokafka_max.items():
        low, high = ranges[api_key]
        assert low <= version <= high, ApiKey(api_key).name
    # KIP-394 (MEMBER_ID_REQUIRED) is what the coordinator always does: never below v4.
    assert ranges[ApiKey.JOIN_GROUP][0] == 4


@pytest.mark.parametrize("case", VERSIONS, ids=ids)
def test_request_to_native(case):
    api_key, version = case
    request = kio_request(api_key, version, **REQUESTS[api_key])
    assert to_native(api_key, version, request) == expected_native(api_key, version)


@pytest.mark.parametrize("case", VERSIONS, ids=ids)
def test_response_from_native(case):
    api_key, version = case
    native = NATIVE_RESPONSES[api_key]
    asked = expected_native(api_key, version) if api_key in REQUESTS else None
    if isinstance(asked, NativeBatch):  # the dispatcher hands (request, answer) pairs
        native = [(request, native) for request in asked.requests]
    check_response(api_key, version, from_native(api_key, version, native))


# How many error codes `error_response` must write for the request in REQUESTS.
ERROR_ITEMS = {
    ApiKey.FIND_COORDINATOR: 1,
    ApiKey.JOIN_GROUP: 1,
    ApiKey.SYNC_GROUP: 1,
    ApiKey.HEARTBEAT: 1,
    ApiKey.LEAVE_GROUP: 1,  # + one per member from v3
    ApiKey.OFFSET_COMMIT: 3,
    ApiKey.OFFSET_FETCH: 4,  # top level + 3 partitions
    ApiKey.LIST_GROUPS: 1,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.OFFSET_DELETE: 1,  # the group's: Kafka answers no partition then
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DESCRIBE_CONFIGS: 3,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 2,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.CREATE_PARTITIONS: 2,
}


@pytest.mark.parametrize("case", VERSIONS, ids=ids)
@pytest.mark.parametrize("code", [ErrorCode.NOT_COORDINATOR, ErrorCode.UNSUPPORTED_VERSION])
def test_error_response_answers_everything(case, code):
    api_key, version = case
    request = kio_request(api_key, version, **REQUESTS[api_key])
    response = TRANSLATIONS[api_key].error_response(request, version, code)
    assert type(response) is response_class(api_key, version)
    codes = error_codes(roundtrip(response))
    expected = ERROR_ITEMS[api_key]
    if api_key == ApiKey.LEAVE_GROUP and version >= 3:
        expected += 2
    assert codes == [code] * expected


def test_join_group_errors_keep_the_protocol_name_non_null_before_v7():
    native = m.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.MEMBER_ID_REQUIRED,
        generation_id=-1,
        protocol_name=None,
        leader="",
        member_id="rdkafka-1234",
        members=[],
    )
    for version in range(4, 9):
        r = from_native(ApiKey.JOIN_GROUP, version, native)
        assert (r.error_code, r.member_id) == (ErrorCode.MEMBER_ID_REQUIRED, "rdkafka-1234")
        assert r.protocol_name == ("" if version < 7 else None)


def test_find_coordinator_passes_the_key_type_on():
    request = kio_request(ApiKey.FIND_COORDINATOR, 3, key="txn-1", key_type=1)
    native = to_native(ApiKey.FIND_COORDINATOR, 3, request)
    # The native handler answers key type 1 (transactions) with INVALID_REQUEST.
    assert native == m.FindCoordinatorRequest(key="txn-1", key_type=1)


def test_offset_fetch_of_every_topic():
    request = kio_request(ApiKey.OFFSET_FETCH, 7, group_id="g", topics=None)
    assert to_native(ApiKey.OFFSET_FETCH, 7, request) == m.OffsetFetchRequest(
        group_id="g", topics=None
    )
    response = TRANSLATIONS[ApiKey.OFFSET_FETCH].error_response(
        request, 7, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    )
    assert error_codes(roundtrip(response)) == [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]


def test_list_groups_types_filter():
    def states(types):
        request = kio_request(ApiKey.LIST_GROUPS, 5, states_filter=["Stable"], types_filter=types)
        return to_native(ApiKey.LIST_GROUPS, 5, request).states_filter

    assert states([]) == ["Stable"]
    assert states(["Classic", "consumer"]) == ["Stable"]
    # Only KIP-848 groups wanted: a filter no state of a classic group matches.
    (impossible,) = states(["consumer"])
    assert impossible not in {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}
    assert impossible.lower() not in {"dead", "empty", "stable"}


def test_describe_configs_key_lists():
    request = kio_request(
        ApiKey.DESCRIBE_CONFIGS,
        1,
        resources=[{"resource_type": 2, "resource_name": "t", "configuration_keys": []}],
    )
    (resource,) = to_native(ApiKey.DESCRIBE_CONFIGS, 1, request).resources
    assert resource.configuration_keys == []  # empty and null both mean every key


def test_build_keeps_only_the_fields_a_version_has():
    v0 = build(response_class(ApiKey.HEARTBEAT, 0), throttle_time=5, error_code=16)
    assert field_names(type(v0)) == {"error_code"}
    v1 = roundtrip(build(response_class(ApiKey.HEARTBEAT, 1), throttle_time=5, error_code=16))
    assert (v1.throttle_time.total_seconds(), v1.error_code) == (0.005, 16)
    with pytest.raises(TypeError):
        build(response_class(ApiKey.HEARTBEAT, 1), throttle_time=5)  # error_code is required


# --- end to end: kafka-python against real brokers over TCP ---------------------------------

KAFKA_BROKER_SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "listeners": "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0",
    "listener.wire.protocol.map": "KAFKA:kafka",
}


def kafka_cluster(brokers: int = 1, **kwargs):
    from tests.support.cluster import open_test_cluster

    return open_test_cluster(
        brokers, transport="tcp", broker_settings=KAFKA_BROKER_SETTINGS, **kwargs
    )


def kafka_bootstrap(cluster) -> str:
    return ",".join(f"127.0.0.1:{b.server.bound_ports['KAFKA']}" for b in cluster.live())


async def in_thread(fn, *args):
    import trio

    return await trio.to_thread.run_sync(fn, *args)


async def test_kafka_python_admin_creates_describes_and_deletes_topics():
    kafka_admin = pytest.importorskip("kafka.admin")
    errors = pytest.importorskip("kafka.errors")

    async with kafka_cluster(2) as cluster:
        bootstrap = kafka_bootstrap(cluster)

        def create_describe_delete() -> dict[str, Any]:
            admin = kafka_admin.KafkaAdminClient(
                bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=20_000
            )
            try:
                out: dict[str, Any] = {}
                admin.create_topics(
                    {
                        "kp-a": {
                            "num_partitions": 3,
                            "replication_factor": 2,
                            "configs": {"retention.ms": "60000"},
                        },
                        "kp-b": {},  # broker defaults (-1, -1)
                        "kp-c": {"assignments": {0: [2, 1], 1: [1, 2]}},
                    }
                )
                admin.create_topics({"kp-v": {"num_partitions": 1}}, validate_only=True)
                try:
                    admin.create_topics({"kp-a": {"num_partitions": 1}})
                except errors.TopicAlreadyExistsError as exc:
                    out["again"] = exc
                out["topics"] = set(admin.list_topics())
                out["configs"] = admin.describe_configs(
                    [kafka_admin.ConfigResource("TOPIC", "kp-a")], config_filter="all"
                )
                admin.delete_topics(["kp-a", "kp-b", "kp-c"])
                try:
                    admin.delete_topics(["kp-a"])
                except errors.UnknownTopicOrPartitionError as exc:
                    out["gone"] = exc
                out["after"] = set(admin.list_topics())
                return out
            finally:
                admin.close()

        out = await in_thread(create_describe_delete)
        assert {"kp-a", "kp-b", "kp-c"} <= out["topics"]
        assert "kp-v" not in out["topics"]  # validate_only created nothing
        assert "again" in out and "gone" in out
        assert not {"kp-a", "kp-b", "kp-c"} & out["after"]
        configs = out["configs"]["topic"]["kp-a"]
        assert configs["retention.ms"]["value"] == "60000"
        assert configs["segment.bytes"]["value"] == "1073741824"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"


async def test_kafka_python_admin_describes_and_alters_topic_and_broker_configs():
    """kafka-python 3's admin: incremental and legacy AlterConfigs of a topic and a broker
    (it checks the keys against a 'dynamic' DescribeConfigs first), and DescribeConfigs
    of both, the broker's sent to that broker."""
    kafka_admin = pytest.importorskip("kafka.admin")

    async with kafka_cluster(2, topics={"kc": 1}) as cluster:
        bootstrap = kafka_bootstrap(cluster)

        def alter_and_describe() -> dict[str, Any]:
            admin = kafka_admin.KafkaAdminClient(
                bootstrap_servers=bootstrap, client_id="kp-configs", request_timeout_ms=20_000
            )
            Resource = kafka_admin.ConfigResource
            try:
                out: dict[str, Any] = {}
                out["incremental"] = admin.alter_configs(
                    [
                        Resource("TOPIC", "kc", configs={"retention.ms": "5000"}),
                        Resource("BROKER", "2", configs={"log.retention.bytes": "777777"}),
                    ],
                    incremental=True,
                )
                out["legacy"] = admin.alter_configs(
                    [Resource("TOPIC", "kc", configs={"segment.ms": "60000"})], incremental=False
                )
                out["configs"] = admin.describe_configs(
                    [Resource("TOPIC", "kc"), Resource("BROKER", "2")],
                    include_synonyms=True,
                    config_filter="all",
                )
                out["dynamic"] = admin.describe_configs(
                    [Resource("BROKER", "2")], config_filter="dynamic"
                )
                return out
            finally:
                admin.close()

        out = await in_thread(alter_and_describe)
    assert out["incremental"] == {"topic": {"kc": "OK"}, "broker": {"2": "OK"}}
    assert out["legacy"] == {"topic": {"kc": "OK"}}
    topic = out["configs"]["topic"]["kc"]
    # kafka-python keeps the other overrides when it falls back to the legacy API.
    assert topic["retention.ms"]["value"] == "5000"
    assert topic["segment.ms"]["value"] == "60000"
    assert topic["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    broker = out["configs"]["broker"]["2"]
    assert broker["log.retention.bytes"]["value"] == "777777"
    assert broker["log.retention.bytes"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    assert broker["broker.id"]["value"] == "2"
    dynamic = out["dynamic"]["broker"]["2"]
    assert "log.retention.ms" in dynamic and "broker.id" not in dynamic


async def test_kafka_python_consumer_group_joins_commits_and_is_seen_natively():
    kafka = pytest.importorskip("kafka")
    kafka_admin = pytest.importorskip("kafka.admin")
    from client.admin import open_admin
    from client.protocol.types import TopicPartition

    async with kafka_cluster(2, topics={"kg": 2}) as cluster:
        for p in range(2):
            await cluster.append(("kg", p), *(f"{p}:{i}".encode() for i in range(5)))
        bootstrap = kafka_bootstrap(cluster)

        def consume_and_commit() -> dict[str, Any]:
            consumer = kafka.KafkaConsumer(
                "kg",
                bootstrap_servers=bootstrap,
                group_id="kp-group",
                client_id="kp-consumer",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )
            out: dict[str, Any] = {"values": []}
            try:
                for _ in range(100):
                    for records in consumer.poll(timeout_ms=200).values():
                        out["values"].extend(r.value for r in records)
                    if len(out["values"]) >= 10:
                        break
                consumer.commit()
                out["assignment"] = consumer.assignment()
                out["committed"] = {
                    p: consumer.committed(kafka.TopicPartition("kg", p)) for p in range(2)
                }
                admin = kafka_admin.KafkaAdminClient(bootstrap_servers=bootstrap)
                try:
                    out["groups"] = admin.list_groups()
                    out["described"] = admin.describe_groups(["kp-group"])
                    out["offsets"] = admin.list_group_offsets({"kp-group": None})
                finally:
                    admin.close()
            finally:
                consumer.close()  # LeaveGroup
            return out

        out = await in_thread(consume_and_commit)
        assert sorted(out["values"]) == sorted(
            f"{p}:{i}".encode() for p in range(2) for i in range(5)
        )
        assert out["committed"] == {0: 5, 1: 5}
        assert out["assignment"] == {kafka.TopicPartition("kg", 0), kafka.TopicPartition("kg", 1)}
        assert [(g["group_id"], g["group_state"]) for g in out["groups"]] == [
            ("kp-group", "Stable")
        ]
        described = out["described"]["kp-group"]
        assert (described["protocol_type"], described["protocol_data"]) == ("consumer", "range")
        (member,) = described["members"]
        assert member["client_id"] == "kp-consumer"
        assert member["member_metadata"]["topics"] == ["kg"]  # opaque bytes passed through
        offsets = out["offsets"]["kp-group"]
        assert {(tp.partition, o.offset) for tp, o in offsets.items()} == {(0, 5), (1, 5)}

        # The group and its offsets are the native coordinator's: Tributary's admin sees them.
        async with open_admin(cluster.bootstrap, connector=cluster.connector()) as admin:
            offsets = await admin.list_group_offsets("kp-group")
            assert offsets == {
                TopicPartition("kg", 0): 5,
                TopicPartition("kg", 1): 5,
            }
            groups = {g.group_id: g for g in await admin.list_groups()}
            assert groups["kp-group"].state == "Empty"  # the consumer left on close

        def delete_group() -> dict[str, Any]:
            admin = kafka_admin.KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                return admin.delete_groups(["kp-group", "no-such-group"])
            finally:
                admin.close()

        deleted = await in_thread(delete_group)
        assert deleted == {"kp-group": "OK", "no-such-group": "GroupIdNotFoundError"}
        async with open_admin(cluster.bootstrap, connector=cluster.connector()) as admin:
            assert "kp-group" not in {g.group_id for g in await admin.list_groups()}


async def test_confluent_kafka_consumer_group_commits_and_reads_committed_offsets():
    ck = pytest.importorskip("confluent_kafka")

    async with kafka_cluster(1, topics={"kc": 2}) as cluster:
        for p in range(2):
            await cluster.append(("kc", p), *(f"{p}:{i}".encode() for i in range(3)))
        bootstrap = kafka_bootstrap(cluster)

        def consume_and_commit() -> dict[str, Any]:
            consumer = ck.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "ck-group",
                    "client.id": "ck-consumer",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 500,
                }
            )
            out: dict[str, Any] = {"values": []}
            try:
                consumer.subscribe(["kc"])
                for _ in range(200):
                    msg = consumer.poll(0.1)
                    if msg is not None and msg.error() is None:
                        out["values"].append(msg.value())
                    if len(out["values"]) >= 6:
                        break
                consumer.commit(asynchronous=False)
                committed = consumer.committed(
                    [ck.TopicPartition("kc", 0), ck.TopicPartition("kc", 1)], timeout=10
                )
                out["committed"] = {tp.partition: tp.offset for tp in committed}
            finally:
                consumer.close()  # LeaveGroup
            return out

        out = await in_thread(consume_and_commit)
        assert sorted(out["values"]) == sorted(
            f"{p}:{i}".encode() for p in range(2) for i in range(3)
        )
        assert out["committed"] == {0: 3, 1: 3}


async def test_aiokafka_consumer_group_commits():
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    async with kafka_cluster(1, topics={"ka": 1}) as cluster:
        await cluster.append(("ka", 0), *(f"v{i}".encode() for i in range(4)))
        bootstrap = kafka_bootstrap(cluster)

        async def consume() -> tuple[list[bytes], int | None]:
            consumer = aiokafka.AIOKafkaConsumer(
                "ka",
                bootstrap_servers=bootstrap,
                group_id="ak-group",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            await consumer.start()
            try:
                values: list[bytes] = []
                while len(values) < 4:
                    batches = await consumer.getmany(timeout_ms=200)
                    values.extend(r.value for records in batches.values() for r in records)
                await consumer.commit()
                return values, await consumer.committed(aiokafka.TopicPartition("ka", 0))
            finally:
                await consumer.stop()

        values, committed = await in_thread(lambda: asyncio.run(asyncio.wait_for(consume(), 60)))
        assert values == [b"v0", b"v1", b"v2", b"v3"]
        assert committed == 4


async def test_kafka_python_admin_adds_partitions_and_deletes_records():
    kafka = pytest.importorskip("kafka")
    kafka_admin = pytest.importorskip("kafka.admin")
    errors = pytest.importorskip("kafka.errors")

    async with kafka_cluster(2, topics={"kp-g": 1}) as cluster:
        await cluster.append(("kp-g", 0), *(f"v{i}".encode() for i in range(6)))
        bootstrap = kafka_bootstrap(cluster)

        def grow_and_trim() -> dict[str, Any]:
            admin = kafka_admin.KafkaAdminClient(
                bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=20_000
            )
            out: dict[str, Any] = {}
            try:
                admin.create_partitions({"kp-g": 3})
                try:
                    admin.create_partitions({"kp-g": 2})
                except errors.InvalidPartitionsError as exc:
                    out["shrink"] = exc
                out["deleted"] = admin.delete_records({kafka.TopicPartition("kp-g", 0): 4})
            finally:
                admin.close()
            return out

        out = await in_thread(grow_and_trim)
        assert "which is higher than the requested 2" in str(out["shrink"])
        (result,) = out["deleted"].values()
        assert result["low_watermark"] == 4, out["deleted"]
        for p in (1, 2):  # the added partitions have leaders
            assert cluster.partition(("kp-g", p)).leader in (1, 2)
        assert cluster.values(("kp-g", 0))[:1] == [b"v4"]
