"""Kafka's cluster and replica admin APIs on the Kafka listener, translated to and from the
native handlers: DescribeCluster (KIP-700), ElectLeaders (KIP-460), the partition
reassignment pair AlterPartitionReassignments / ListPartitionReassignments (KIP-455),
DescribeLogDirs and DescribeProducers (KIP-664).

How it works: as in translate_admin.py, `to_native` reads the kio request into the native
message, the broker's handlers do the work (broker/handlers/metadata.py, elections.py,
reassignments.py, log_dirs.py) and `from_native` describes the answer for
`translation.build` to fit to the requested version; `error_response` puts the error code
wherever the API carries one.

- DescribeCluster 0-1 is a native Metadata request for no topic: the brokers as this
  listener advertises them, the cluster id, and as controller the same broker Metadata
  names (translate_data.py `_admin_node`: Tributary's controller is not a broker). v1's
  endpoint_type 1 (brokers) is answered; 2 (controllers, KIP-919) gets
  UNSUPPORTED_ENDPOINT_TYPE, as a ZooKeeper-mode Kafka broker answers.
  cluster_authorized_operations is Kafka's "not asked" value (no ACLs yet).
- ElectLeaders 0-2: v0 means a preferred election; v1+ name the type. Unclean elections
  on demand are refused by the native handler (the controller runs them by itself where
  unclean.leader.election.enable is true), which every partition of the answer carries.
- AlterPartitionReassignments 0 and ListPartitionReassignments 0: one to one. (v1's
  allow_replication_factor_change is Kafka 4.0, beyond the ZooKeeper era.)
- DescribeLogDirs 1-4 (kio has no v0): one result for the broker's one log directory; v3
  adds a top-level error code, v4 the directory's total and usable bytes.
- DescribeProducers 0: one to one (with each producer's coordinator epoch and open
  transaction's start offset, -1 when none).
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

# DescribeCluster's api key: a Kafka-only API (no native message of its own).
DESCRIBE_CLUSTER = 60
# DescribeCluster v1's endpoint types (KIP-919).
ENDPOINT_TYPE_BROKERS = 1
# Kafka's "authorized operations were not asked for" (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _controller_id(response: m.MetadataResponse) -> int:
    """The broker Kafka clients are told is the controller: the lowest live one, as Metadata
    says (translate_data.py `_admin_node`); -1 when none is live."""
    return min((b.node_id for b in response.brokers), default=-1)


def _response(api_key: int, version: int, **values: Any) -> Any:
    values.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), **values)


# --- DescribeCluster (60) --------------------------------------------------------------------


def describe_cluster_to_native(request: Any, header: KafkaHeader) -> m.MetadataRequest:
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_TYPE_BROKERS)
    if endpoint_type != ENDPOINT_TYPE_BROKERS:
        raise KafkaRequestError(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)
    return m.MetadataRequest(topics=[], allow_auto_topic_creation=False)


def describe_cluster_from_native(response: m.MetadataResponse, version: int) -> Any:
    return _response(
        DESCRIBE_CLUSTER,
        version,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=ENDPOINT_TYPE_BROKERS,
        cluster_id=response.cluster_id or "",
        controller_id=_controller_id(response),
        brokers=[
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in response.brokers
        ],
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def describe_cluster_error(request: Any, version: int, code: int) -> Any:
    return _response(
        DESCRIBE_CLUSTER,
        version,
        error_code=code,
        error_message=ErrorCode.from_code(code).description,
        endpoint_type=getattr(request, "endpoint_type", ENDPOINT_TYPE_BROKERS),
        cluster_id="",
        controller_id=-1,
        brokers=[],
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


# --- ElectLeaders (43) -----------------------------------------------------------------------


def elect_leaders_to_native(request: Any, header: KafkaHeader) -> m.ElectLeadersRequest:
    return m.ElectLeadersRequest(
        election_type=getattr(request, "election_type", m.PREFERRED_ELECTION),
        topic_partitions=None
        if request.topic_partitions is None
        else [
            m.ElectLeadersTopic(topic=t.topic, partitions=list(t.partitions))
            for t in request.topic_partitions
        ],
        timeout_ms=ms_of(request.timeout),
    )


def elect_leaders_from_native(response: m.ElectLeadersResponse, version: int) -> Any:
    return _response(
        ApiKey.ELECT_LEADERS,
        version,
        error_code=response.error_code,
        replica_election_results=[
            {
                "topic": t.topic,
                "partition_result": [
                    {
                        "partition_id": p.partition_id,
                        "error_code": p.error_code,
                        "error_message": p.error_message,
                    }
                    for p in t.partition_result
                ],
            }
            for t in response.replica_election_results
        ],
    )


def elect_leaders_error(request: Any, version: int, code: int) -> Any:
    message = ErrorCode.from_code(code).description
    return _response(
        ApiKey.ELECT_LEADERS,
        version,
        error_code=code,
        replica_election_results=[
            {
                "topic": t.topic,
                "partition_result": [
                    {"partition_id": p, "error_code": code, "error_message": message}
                    for p in t.partitions
                ],
            }
            for t in request.topic_partitions or ()
        ],
    )


# --- AlterPartitionReassignments (45) --------------------------------------------------------


def alter_reassignments_to_native(
    request: Any, header: KafkaHeader
) -> m.AlterPartitionReassignmentsRequest:
    return m.AlterPartitionReassignmentsRequest(
        timeout_ms=ms_of(request.timeout),
        topics=[
            m.AlterPartitionReassignmentsTopic(
                name=t.name,
                partitions=[
                    m.AlterPartitionReassignmentsPartition(
                        partition_index=p.partition_index,
                        replicas=None if p.replicas is None else list(p.replicas),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def alter_reassignments_from_native(
    response: m.AlterPartitionReassignmentsResponse, version: int
) -> Any:
    return _response(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        version,
        error_code=response.error_code,
        error_message=response.error_message,
        responses=[
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "error_message": p.error_message,
                    }
                    for p in t.partitions
                ],
            }
            for t in response.responses
        ],
    )


def alter_reassignments_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        version,
        error_code=code,
        error_message=ErrorCode.from_code(code).description,
        responses=[],
    )


# --- ListPartitionReassignments (46) ---------------------------------------------------------


def list_reassignments_to_native(
    request: Any, header: KafkaHeader
) -> m.ListPartitionReassignmentsRequest:
    return m.ListPartitionReassignmentsRequest(
        timeout_ms=ms_of(request.timeout),
        topics=None
        if request.topics is None
        else [
            m.ListPartitionReassignmentsTopic(
                name=t.name, partition_indexes=list(t.partition_indexes)
            )
            for t in request.topics
        ],
    )


def list_reassignments_from_native(
    response: m.ListPartitionReassignmentsResponse, version: int
) -> Any:
    return _response(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        version,
        error_code=response.error_code,
        error_message=response.error_message,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "replicas": p.replicas,
                        "adding_replicas": p.adding_replicas,
                        "removing_replicas": p.removing_replicas,
                    }
                    for p in t.partitions
                ],
            }
            for t in response.topics
        ],
    )


def list_reassignments_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        version,
        error_code=code,
        error_message=ErrorCode.from_code(code).description,
        topics=[],
    )


# --- DescribeLogDirs (35) --------------------------------------------------------------------


def describe_log_dirs_to_native(request: Any, header: KafkaHeader) -> m.DescribeLogDirsRequest:
    return m.DescribeLogDirsRequest(
        topics=None
        if request.topics is None
        else [
            m.DescribeLogDirsTopic(topic=t.topic, partitions=list(t.partitions))
            for t in request.topics
        ]
    )


def describe_log_dirs_from_native(response: m.DescribeLogDirsResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_LOG_DIRS,
        version,
        error_code=ErrorCode.NONE,
        results=[
            {
                "error_code": r.error_code,
                "log_dir": r.log_dir,
                "total_bytes": r.total_bytes,
                "usable_bytes": r.usable_bytes,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {
                                "partition_index": p.partition_index,
                                "partition_size": p.partition_size,
                                "offset_lag": p.offset_lag,
                                "is_future_key": p.is_future_key,
                            }
                            for p in t.partitions
                        ],
                    }
                    for t in r.topics
                ],
            }
            for r in response.results
        ],
    )


def describe_log_dirs_error(request: Any, version: int, code: int) -> Any:
    return _response(ApiKey.DESCRIBE_LOG_DIRS, version, error_code=code, results=[])


# --- DescribeProducers (61) ------------------------------------------------------------------


def describe_producers_to_native(request: Any, header: KafkaHeader) -> m.DescribeProducersRequest:
    return m.DescribeProducersRequest(
        topics=[
            m.DescribeProducersTopic(name=t.name, partition_indexes=list(t.partition_indexes))
            for t in request.topics
        ]
    )


def describe_producers_from_native(response: m.DescribeProducersResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_PRODUCERS,
        version,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "error_message": p.error_message,
                        "active_producers": [
                            {
                                "producer_id": s.producer_id,
                                "producer_epoch": s.producer_epoch,
                                "last_sequence": s.last_sequence,
                                "last_timestamp": s.last_timestamp,
                                "coordinator_epoch": s.coordinator_epoch,
                                "current_txn_start_offset": s.current_txn_start_offset,
                            }
                            for s in p.active_producers
                        ],
                    }
                    for p in t.partitions
                ],
            }
            for t in response.topics
        ],
    )


def describe_producers_error(request: Any, version: int, code: int) -> Any:
    message = ErrorCode.from_code(code).description
    return _response(
        ApiKey.DESCRIBE_PRODUCERS,
        version,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": index,
                        "error_code": code,
                        "error_message": message,
                        "active_producers": [],
                    }
                    for index in t.partition_indexes
                ],
            }
            for t in request.topics
        ],
    )


TRANSLATIONS: dict[int, Translation] = {
    t.api_key: t
    for t in (
        Translation(
            api_key=DESCRIBE_CLUSTER,
            min_version=0,
            max_version=1,
            to_native=describe_cluster_to_native,
            from_native=describe_cluster_from_native,
            error_response=describe_cluster_error,
            native_api_key=ApiKey.METADATA,
        ),
        Translation(
            api_key=ApiKey.ELECT_LEADERS,
            min_version=0,
            max_version=2,
            to_native=elect_leaders_to_native,
            from_native=elect_leaders_from_native,
            error_response=elect_leaders_error,
        ),
        Translation(
            api_key=ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            min_version=0,
            max_version=0,
            to_native=alter_reassignments_to_native,
            from_native=alter_reassignments_from_native,
            error_response=alter_reassignments_error,
        ),
        Translation(
            api_key=ApiKey.LIST_PARTITION_REASSIGNMENTS,
            min_version=0,
            max_version=0,
            to_native=list_reassignments_to_native,
            from_native=list_reassignments_from_native,
            error_response=list_reassignments_error,
        ),
        Translation(
            api_key=ApiKey.DESCRIBE_LOG_DIRS,
            min_version=1,
            max_version=4,
            to_native=describe_log_dirs_to_native,
            from_native=describe_log_dirs_from_native,
            error_response=describe_log_dirs_error,
        ),
        Translation(
            api_key=ApiKey.DESCRIBE_PRODUCERS,
            min_version=0,
            max_version=0,
            to_native=describe_producers_to_native,
            from_native=describe_producers_from_native,
            error_response=describe_producers_error,
        ),
    )
}
