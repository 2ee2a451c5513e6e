"""Consumer groups: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, OffsetDelete and DeleteGroups.

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring). Any broker answers FindCoordinator; everything else about a group goes to
its coordinator (ListGroups to every broker, each answering for the groups it
coordinates). Member metadata and assignments travel as opaque `bytes` (Kafka's
ConsumerProtocol, see `client.protocol.consumer_protocol`).
"""

from __future__ import annotations

from client.protocol.schema import empty_list, struct

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
    # KIP-814 (Kafka's JoinGroup v9): the client understands `skip_assignment`, so a
    # static leader rejoining a stable group may be told it leads without reassigning.
    supports_skip_assignment: bool = False


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
    skip_assignment: bool = False  # KIP-814: the leader must not compute an assignment


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
    # KIP-447: a partition with a transactional commit still pending is answered
    # UNSTABLE_OFFSET_COMMIT (the consumer retries) instead of its older offset.
    require_stable: bool = False


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


# --- OffsetDelete (47) ---------------------------------------------------------------------
# KIP-496: delete a group's committed offsets of some partitions; refused per partition
# (GROUP_SUBSCRIBED_TO_TOPIC) while a member of a consumer group subscribes to the topic.


@struct
class OffsetDeleteTopic:
    name: str
    partitions: list[int]


@struct
class OffsetDeleteRequest:
    group_id: str
    topics: list[OffsetDeleteTopic]


@struct
class OffsetDeleteResponsePartition:
    partition_index: int
    error_code: int


@struct
class OffsetDeleteResponseTopic:
    name: str
    partitions: list[OffsetDeleteResponsePartition]


@struct
class OffsetDeleteResponse:
    error_code: int
    throttle_time_ms: int
    topics: list[OffsetDeleteResponseTopic]


# --- DeleteGroups (42) ---------------------------------------------------------------------


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
