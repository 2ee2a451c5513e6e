"""Every request and response Tributary speaks, declared with `schema.struct`.

How it works: each class below is a frozen, slotted, keyword-only dataclass whose
annotations are its wire schema (see schema.py). Field names are the snake_case of
Kafka's JSON message schemas. Fields with a default may be left out on the wire; `T | None`
fields may carry nil. Record batches travel as opaque `bytes` (see records.py).
`REGISTRY` at the bottom maps (api key, version) to the request and response classes;
every API is at version 0 for now.

Nested types are named `<Api>Topic` / `<Api>Partition` for requests and
`<Api>ResponseTopic` / `<Api>ResponsePartition` for responses, or after what they hold.
"""

from __future__ import annotations

from client.protocol.api import ApiKey, ApiRegistry, ApiSpec
from client.protocol.schema import empty_list, struct

# ListOffsets special timestamps (Kafka's ListOffsetsRequest.LATEST/EARLIEST_TIMESTAMP).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
# Fetch/ListOffsets replica_id of a consumer (anything >= 0 is a follower broker).
CONSUMER_REPLICA_ID = -1
# ElectLeaders election_type values.
PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


# --- ApiVersions (18) ----------------------------------------------------------------------


@struct
class ApiVersionsRequest:
    # Kafka's v3 fields: who is asking (brokers may log it).
    client_software_name: str = ""
    client_software_version: str = ""
    # Clients set this to PROBE_LINE_END on the first request of a connection and brokers
    # ignore it: a line-based text server (HTTP, such as a metrics port; SMTP; Redis)
    # answers a line at once, so the client can tell from the first bytes back that the
    # peer is not a Tributary broker instead of waiting for a timeout.
    line_end: str = ""


# The bytes that end a request head for HTTP/1.x and a command for other text protocols.
PROBE_LINE_END = "\r\n\r\n"


@struct
class ApiVersionsResponseKey:
    api_key: int
    min_version: int
    max_version: int


@struct
class ApiVersionsResponse:
    error_code: int
    api_keys: list[ApiVersionsResponseKey]


# --- Metadata (3) --------------------------------------------------------------------------


@struct
class MetadataRequest:
    topics: list[str] | None  # None = all topics
    allow_auto_topic_creation: bool = False


@struct
class MetadataResponseBroker:
    node_id: int
    host: str
    port: int
    rack: str | None


@struct
class MetadataResponsePartition:
    error_code: int
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]


@struct
class MetadataResponseTopic:
    error_code: int
    name: str
    is_internal: bool
    partitions: list[MetadataResponsePartition]


@struct
class MetadataResponse:
    brokers: list[MetadataResponseBroker]
    cluster_id: str | None
    controller_id: int
    topics: list[MetadataResponseTopic]


# --- Produce (0) ---------------------------------------------------------------------------


@struct
class ProducePartition:
    partition: int
    records: bytes


@struct
class ProduceTopic:
    name: str
    partitions: list[ProducePartition]


@struct
class ProduceRequest:
    transactional_id: str | None = None
    acks: int  # 0: no response, 1: leader append, -1: all ISR
    timeout_ms: int
    topics: list[ProduceTopic]


@struct
class ProduceResponsePartition:
    partition: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None


@struct
class ProduceResponseTopic:
    name: str
    partitions: list[ProduceResponsePartition]


@struct
class ProduceResponse:
    topics: list[ProduceResponseTopic]
    throttle_time_ms: int


# --- Fetch (1) -----------------------------------------------------------------------------


@struct
class FetchPartition:
    partition: int
    current_leader_epoch: int = -1
    fetch_offset: int
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    partition_max_bytes: int


@struct
class FetchTopic:
    topic: str
    partitions: list[FetchPartition]


@struct
class FetchRequest:
    replica_id: int  # CONSUMER_REPLICA_ID (-1) for consumers, the broker id for followers
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0
    topics: list[FetchTopic]


@struct
class FetchResponsePartition:
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes


@struct
class FetchResponseTopic:
    topic: str
    partitions: list[FetchResponsePartition]


@struct
class FetchResponse:
    throttle_time_ms: int
    error_code: int
    topics: list[FetchResponseTopic]


# --- ListOffsets (2) -----------------------------------------------------------------------


@struct
class ListOffsetsPartition:
    partition: int
    current_leader_epoch: int = -1
    timestamp: int  # LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, or a time in ms


@struct
class ListOffsetsTopic:
    name: str
    partitions: list[ListOffsetsPartition]


@struct
class ListOffsetsRequest:
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: int = 0
    topics: list[ListOffsetsTopic]


@struct
class ListOffsetsResponsePartition:
    partition: int
    error_code: int
    timestamp: int
    offset: int
    leader_epoch: int


@struct
class ListOffsetsResponseTopic:
    name: str
    partitions: list[ListOffsetsResponsePartition]


@struct
class ListOffsetsResponse:
    topics: list[ListOffsetsResponseTopic]


# --- LeaderAndIsr (4) ----------------------------------------------------------------------


@struct
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    adding_replicas: list[int] = empty_list()
    removing_replicas: list[int] = empty_list()
    is_new: bool = False


@struct
class LeaderAndIsrLiveLeader:
    broker_id: int
    host: str
    port: int


@struct
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    type: int = 0
    partition_states: list[LeaderAndIsrPartitionState]
    live_leaders: list[LeaderAndIsrLiveLeader]


@struct
class LeaderAndIsrPartitionError:
    topic: str
    partition: int
    error_code: int


@struct
class LeaderAndIsrResponse:
    error_code: int
    partition_errors: list[LeaderAndIsrPartitionError]


# --- StopReplica (5) -----------------------------------------------------------------------


@struct
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int = -1
    delete_partition: bool


@struct
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    partitions: list[StopReplicaPartition]


@struct
class StopReplicaPartitionError:
    topic: str
    partition: int
    error_code: int


@struct
class StopReplicaResponse:
    error_code: int
    partition_errors: list[StopReplicaPartitionError]


# --- UpdateMetadata (6) --------------------------------------------------------------------


@struct
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int] = empty_list()


@struct
class UpdateMetadataEndpoint:
    listener: str
    host: str
    port: int


@struct
class UpdateMetadataBroker:
    id: int
    host: str  # the inter-broker listener's address
    port: int
    rack: str | None = None
    # Every advertised listener; a broker answers Metadata with the one the client used.
    endpoints: list[UpdateMetadataEndpoint] = empty_list()


@struct
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    partition_states: list[UpdateMetadataPartitionState]
    live_brokers: list[UpdateMetadataBroker]


@struct
class UpdateMetadataResponse:
    error_code: int


# --- ControlledShutdown (7) ----------------------------------------------------------------


@struct
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int = -1


@struct
class ControlledShutdownRemainingPartition:
    topic: str
    partition: int


@struct
class ControlledShutdownResponse:
    error_code: int
    remaining_partitions: list[ControlledShutdownRemainingPartition]


# --- OffsetForLeaderEpoch (23) -------------------------------------------------------------


@struct
class OffsetForLeaderEpochPartition:
    partition: int
    current_leader_epoch: int = -1
    leader_epoch: int


@struct
class OffsetForLeaderEpochTopic:
    topic: str
    partitions: list[OffsetForLeaderEpochPartition]


@struct
class OffsetForLeaderEpochRequest:
    replica_id: int = CONSUMER_REPLICA_ID
    topics: list[OffsetForLeaderEpochTopic]


@struct
class OffsetForLeaderEpochResponsePartition:
    error_code: int
    partition: int
    leader_epoch: int
    end_offset: int


@struct
class OffsetForLeaderEpochResponseTopic:
    topic: str
    partitions: list[OffsetForLeaderEpochResponsePartition]


@struct
class OffsetForLeaderEpochResponse:
    throttle_time_ms: int
    topics: list[OffsetForLeaderEpochResponseTopic]


# --- CreateTopics (19) ---------------------------------------------------------------------


@struct
class CreateTopicsAssignment:
    partition_index: int
    broker_ids: list[int]


@struct
class CreateTopicsConfig:
    name: str
    value: str | None


@struct
class CreateTopicsTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: list[CreateTopicsAssignment] = empty_list()
    configs: list[CreateTopicsConfig] = empty_list()


@struct
class CreateTopicsRequest:
    topics: list[CreateTopicsTopic]
    timeout_ms: int
    validate_only: bool = False


@struct
class CreateTopicsResponseTopic:
    name: str
    error_code: int
    error_message: str | None
    num_partitions: int
    replication_factor: int


@struct
class CreateTopicsResponse:
    throttle_time_ms: int
    topics: list[CreateTopicsResponseTopic]


# --- DeleteTopics (20) ---------------------------------------------------------------------


@struct
class DeleteTopicsRequest:
    topic_names: list[str]
    timeout_ms: int


@struct
class DeleteTopicsResponseTopic:
    name: str
    error_code: int
    error_message: str | None


@struct
class DeleteTopicsResponse:
    throttle_time_ms: int
    responses: list[DeleteTopicsResponseTopic]


# --- DeleteRecords (21) --------------------------------------------------------------------


@struct
class DeleteRecordsPartition:
    partition_index: int
    offset: int  # delete every record below this offset; -1: the high watermark


@struct
class DeleteRecordsTopic:
    name: str
    partitions: list[DeleteRecordsPartition]


@struct
class DeleteRecordsRequest:
    topics: list[DeleteRecordsTopic]
    timeout_ms: int


@struct
class DeleteRecordsResponsePartition:
    partition_index: int
    low_watermark: int  # the partition's log start offset now (-1 with an error)
    error_code: int


@struct
class DeleteRecordsResponseTopic:
    name: str
    partitions: list[DeleteRecordsResponsePartition]


@struct
class DeleteRecordsResponse:
    throttle_time_ms: int
    topics: list[DeleteRecordsResponseTopic]


# --- CreatePartitions (37) -----------------------------------------------------------------


@struct
class CreatePartitionsAssignment:
    broker_ids: list[int]


@struct
class CreatePartitionsTopic:
    name: str
    count: int  # the new total number of partitions
    assignments: list[CreatePartitionsAssignment] | None = None  # one per added partition


@struct
class CreatePartitionsRequest:
    topics: list[CreatePartitionsTopic]
    timeout_ms: int
    validate_only: bool = False


@struct
class CreatePartitionsResponseTopic:
    name: str
    error_code: int
    error_message: str | None


@struct
class CreatePartitionsResponse:
    throttle_time_ms: int
    results: list[CreatePartitionsResponseTopic]


# --- DescribeLogDirs (35) ------------------------------------------------------------------


@struct
class DescribeLogDirsTopic:
    topic: str
    partitions: list[int]


@struct
class DescribeLogDirsRequest:
    topics: list[DescribeLogDirsTopic] | None  # None = all


@struct
class DescribeLogDirsResponsePartition:
    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool = False
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    is_leader: bool
    leader_epoch: int


@struct
class DescribeLogDirsResponseTopic:
    name: str
    partitions: list[DescribeLogDirsResponsePartition]


@struct
class DescribeLogDirsResult:
    error_code: int
    log_dir: str
    topics: list[DescribeLogDirsResponseTopic]


@struct
class DescribeLogDirsResponse:
    throttle_time_ms: int
    results: list[DescribeLogDirsResult]


# --- VerifyLogDirs (1017, Tributary's own) -------------------------------------------------
# An on-demand scrub: the broker checks every batch's CRC in the logs asked for, repairs
# damaged ranges from an in-sync replica (waiting up to timeout_ms) and reports.

# Fates of a damaged range (VerifyLogDirsRange.status).
RANGE_REPAIRED = "repaired"
RANGE_PENDING = "pending"
RANGE_UNREPAIRABLE = "unrepairable"
RANGE_DROPPED = "dropped"


@struct
class VerifyLogDirsRequest:
    topics: list[str] | None  # None = all
    timeout_ms: int  # how long to wait for repairs


@struct
class VerifyLogDirsRange:
    first_offset: int
    last_offset: int
    segment_base_offset: int
    status: str
    detail: str


@struct
class VerifyLogDirsPartition:
    topic: str
    partition: int
    batches: int
    bytes: int
    ranges: list[VerifyLogDirsRange]


@struct
class VerifyLogDirsResponse:
    error_code: int
    error_message: str | None
    broker_id: int
    partitions: list[VerifyLogDirsPartition]


# --- DescribeConfigs (32) ------------------------------------------------------------------

# Resource types (Kafka's ConfigResource.Type).
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@struct
class DescribeConfigsResource:
    resource_type: int
    resource_name: str
    configuration_keys: list[str] | None = None  # None = every key


@struct
class DescribeConfigsRequest:
    resources: list[DescribeConfigsResource]


@struct
class DescribeConfigsResult:
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    is_sensitive: bool = False


@struct
class DescribeConfigsResponseResource:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: list[DescribeConfigsResult]


@struct
class DescribeConfigsResponse:
    throttle_time_ms: int
    results: list[DescribeConfigsResponseResource]


# --- IncrementalAlterConfigs (44) -----------------------------------------------------------

# config_operation values (Kafka's AlterConfigOp.OpType; APPEND and SUBTRACT not served).
CONFIG_SET = 0
CONFIG_DELETE = 1


@struct
class AlterableConfig:
    name: str
    config_operation: int
    value: str | None = None


@struct
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: list[AlterableConfig]


@struct
class IncrementalAlterConfigsRequest:
    resources: list[AlterConfigsResource]
    validate_only: bool = False


@struct
class AlterConfigsResourceResponse:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


@struct
class IncrementalAlterConfigsResponse:
    throttle_time_ms: int
    responses: list[AlterConfigsResourceResponse]


# --- ElectLeaders (43) ---------------------------------------------------------------------


@struct
class ElectLeadersTopic:
    topic: str
    partitions: list[int]


@struct
class ElectLeadersRequest:
    election_type: int = PREFERRED_ELECTION
    topic_partitions: list[ElectLeadersTopic] | None  # None = all
    timeout_ms: int


@struct
class ElectLeadersPartitionResult:
    partition_id: int
    error_code: int
    error_message: str | None


@struct
class ElectLeadersResponseTopic:
    topic: str
    partition_result: list[ElectLeadersPartitionResult]


@struct
class ElectLeadersResponse:
    throttle_time_ms: int
    error_code: int
    replica_election_results: list[ElectLeadersResponseTopic]


# --- AlterPartitionReassignments (45) ------------------------------------------------------


@struct
class AlterPartitionReassignmentsPartition:
    partition_index: int
    replicas: list[int] | None  # None = cancel the reassignment


@struct
class AlterPartitionReassignmentsTopic:
    name: str
    partitions: list[AlterPartitionReassignmentsPartition]


@struct
class AlterPartitionReassignmentsRequest:
    timeout_ms: int
    topics: list[AlterPartitionReassignmentsTopic]


@struct
class AlterPartitionReassignmentsResponsePartition:
    partition_index: int
    error_code: int
    error_message: str | None


@struct
class AlterPartitionReassignmentsResponseTopic:
    name: str
    partitions: list[AlterPartitionReassignmentsResponsePartition]


@struct
class AlterPartitionReassignmentsResponse:
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    responses: list[AlterPartitionReassignmentsResponseTopic]


# --- ListPartitionReassignments (46) -------------------------------------------------------


@struct
class ListPartitionReassignmentsTopic:
    name: str
    partition_indexes: list[int]


@struct
class ListPartitionReassignmentsRequest:
    timeout_ms: int
    topics: list[ListPartitionReassignmentsTopic] | None  # None = all


@struct
class ListPartitionReassignmentsResponsePartition:
    partition_index: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@struct
class ListPartitionReassignmentsResponseTopic:
    name: str
    partitions: list[ListPartitionReassignmentsResponsePartition]


@struct
class ListPartitionReassignmentsResponse:
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    topics: list[ListPartitionReassignmentsResponseTopic]


# --- FindCoordinator (10) ------------------------------------------------------------------


@struct
class FindCoordinatorRequest:
    key: str
    key_type: int = 0  # 0 = group


@struct
class FindCoordinatorResponse:
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int


# --- JoinGroup (11) ------------------------------------------------------------------------


@struct
class JoinGroupProtocol:
    name: str
    metadata: bytes


@struct
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str
    protocols: list[JoinGroupProtocol]


@struct
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@struct
class JoinGroupResponse:
    throttle_time_ms: int
    error_code: int
    generation_id: int
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[JoinGroupResponseMember]


# --- SyncGroup (14) ------------------------------------------------------------------------


@struct
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@struct
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    assignments: list[SyncGroupAssignment]


@struct
class SyncGroupResponse:
    throttle_time_ms: int
    error_code: int
    assignment: bytes


# --- Heartbeat (12) ------------------------------------------------------------------------


@struct
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@struct
class HeartbeatResponse:
    throttle_time_ms: int
    error_code: int


# --- LeaveGroup (13) -----------------------------------------------------------------------


@struct
class LeaveGroupMember:
    member_id: str
    group_instance_id: str | None = None


@struct
class LeaveGroupRequest:
    group_id: str
    members: list[LeaveGroupMember]


@struct
class LeaveGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    error_code: int


@struct
class LeaveGroupResponse:
    throttle_time_ms: int
    error_code: int
    members: list[LeaveGroupResponseMember]


# --- OffsetCommit (8) ----------------------------------------------------------------------


@struct
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@struct
class OffsetCommitTopic:
    name: str
    partitions: list[OffsetCommitPartition]


@struct
class OffsetCommitRequest:
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    topics: list[OffsetCommitTopic]


@struct
class OffsetCommitResponsePartition:
    partition_index: int
    error_code: int


@struct
class OffsetCommitResponseTopic:
    name: str
    partitions: list[OffsetCommitResponsePartition]


@struct
class OffsetCommitResponse:
    throttle_time_ms: int
    topics: list[OffsetCommitResponseTopic]


# --- OffsetFetch (9) -----------------------------------------------------------------------


@struct
class OffsetFetchTopic:
    name: str
    partition_indexes: list[int]


@struct
class OffsetFetchRequest:
    group_id: str
    topics: list[OffsetFetchTopic] | None  # None = all topics of the group


@struct
class OffsetFetchResponsePartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


@struct
class OffsetFetchResponseTopic:
    name: str
    partitions: list[OffsetFetchResponsePartition]


@struct
class OffsetFetchResponse:
    throttle_time_ms: int
    error_code: int
    topics: list[OffsetFetchResponseTopic]


# --- DescribeGroups (15) -------------------------------------------------------------------


@struct
class DescribeGroupsRequest:
    groups: list[str]


@struct
class DescribeGroupsResponseMember:
    member_id: str
    group_instance_id: str | None = None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@struct
class DescribeGroupsResponseGroup:
    error_code: int
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribeGroupsResponseMember]
    # Tributary's additions (not in Kafka's DescribeGroups): the generation and the
    # coordinator's broker id, for `groups describe` and `cluster watch`.
    generation_id: int = -1
    coordinator_id: int = -1


@struct
class DescribeGroupsResponse:
    throttle_time_ms: int
    groups: list[DescribeGroupsResponseGroup]


# --- ListGroups (16) -----------------------------------------------------------------------


@struct
class ListGroupsRequest:
    states_filter: list[str] = empty_list()  # KIP-518: only groups in these states


@struct
class ListGroupsResponseGroup:
    group_id: str
    protocol_type: str
    group_state: str = ""  # KIP-518


@struct
class ListGroupsResponse:
    throttle_time_ms: int
    error_code: int
    groups: list[ListGroupsResponseGroup]


# --- DeleteGroups (42) --------------------------------------------------------------------


@struct
class DeleteGroupsRequest:
    groups_names: list[str]


@struct
class DeleteGroupsResponseResult:
    group_id: str
    error_code: int


@struct
class DeleteGroupsResponse:
    throttle_time_ms: int
    results: list[DeleteGroupsResponseResult]


# --- InitProducerId (22) --------------------------------------------------------------------
# The idempotent producer's id and epoch (KIP-98). Tributary has no transactions: a
# request naming a transactional id is refused. `producer_id`/`producer_epoch` (Kafka's
# v3 fields, KIP-360) name the producer's current id and epoch, -1 for a new producer.


@struct
class InitProducerIdRequest:
    transactional_id: str | None = None
    transaction_timeout_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1


@struct
class InitProducerIdResponse:
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int


# --- the registry --------------------------------------------------------------------------

REGISTRY = ApiRegistry(
    ApiSpec(api_key, 0, request_type, response_type)
    for api_key, request_type, response_type in [
        (ApiKey.PRODUCE, ProduceRequest, ProduceResponse),
        (ApiKey.FETCH, FetchRequest, FetchResponse),
        (ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse),
        (ApiKey.METADATA, MetadataRequest, MetadataResponse),
        (ApiKey.LEADER_AND_ISR, LeaderAndIsrRequest, LeaderAndIsrResponse),
        (ApiKey.STOP_REPLICA, StopReplicaRequest, StopReplicaResponse),
        (ApiKey.UPDATE_METADATA, UpdateMetadataRequest, UpdateMetadataResponse),
        (ApiKey.CONTROLLED_SHUTDOWN, ControlledShutdownRequest, ControlledShutdownResponse),
        (ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse),
        (ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse),
        (ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse),
        (ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse),
        (ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse),
        (ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse),
        (ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse),
        (ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, DescribeGroupsResponse),
        (ApiKey.LIST_GROUPS, ListGroupsRequest, ListGroupsResponse),
        (ApiKey.DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse),
        (ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse),
        (ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse),
        (ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse),
        (ApiKey.DELETE_RECORDS, DeleteRecordsRequest, DeleteRecordsResponse),
        (ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, CreatePartitionsResponse),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        (ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, DescribeConfigsResponse),
        (ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest, DescribeLogDirsResponse),
        (ApiKey.ELECT_LEADERS, ElectLeadersRequest, ElectLeadersResponse),
        (
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            IncrementalAlterConfigsRequest,
            IncrementalAlterConfigsResponse,
        ),
        (
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse,
        ),
        (
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse,
        ),
        (ApiKey.VERIFY_LOG_DIRS, VerifyLogDirsRequest, VerifyLogDirsResponse),
        (ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse),
    ]
)


def api_versions_response(registry: ApiRegistry = REGISTRY) -> ApiVersionsResponse:
    """What a broker answers to ApiVersions: every API it speaks, with its version range."""
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponseKey(
                api_key=int(key),
                min_version=versions.min_version,
                max_version=versions.max_version,
            )
            for key, versions in registry.supported().items()
        ],
    )
