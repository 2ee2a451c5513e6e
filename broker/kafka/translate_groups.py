"""Kafka's group APIs on the Kafka listener, translated to and from the native group handlers.

How it works: each API has three pure functions (see translation.py). `to_native` reads
the kio request of whatever version arrived (fields a version lacks are read with their
Kafka default) into the native message of `client.protocol.messages`; the broker's
`GroupHandlers` serve it exactly as for Tributary's own clients, so groups of Kafka
clients and Tributary clients are the same groups. `from_native` describes the native
answer once, version-independently, and `translation.build` keeps what the requested
version carries. Protocol metadata and assignments are opaque bytes passed through
unchanged (Tributary's consumer speaks Kafka's ConsumerProtocol too). `error_response`
answers every group, member, topic and partition of the request with the error code.

Version ranges (what librdkafka 2.x, kafka-python 3.x and aiokafka 0.14 negotiate, capped
where a newer version promises something the native side does not do):
- FindCoordinator 0-4: v4 batches several keys in one request (KIP-699), served as one
  native request per key (a `NativeBatch`); v5's TRANSACTION_ABORTABLE and v6's share
  groups are beyond the ZooKeeper era. Key type 1 (transactions) gets the native handler's
  CLUSTER_AUTHORIZATION_FAILED: no transactions (broker/handlers/groups.py says why).
- JoinGroup 4-8: v4 is the first where a new member expects MEMBER_ID_REQUIRED (KIP-394),
  which the coordinator always does; v5 adds static membership (KIP-345); v7's
  protocol_type (KIP-559) is answered null, which clients accept; v8's reason is only
  informative. v9 (KIP-814): a static leader rejoining a stable group is told it leads
  with `skip_assignment` (older versions are told the old leader id, as Kafka does, so
  they do not reassign).
- SyncGroup 0-5: v5's protocol_type/protocol_name are answered null (not checked).
- Heartbeat 0-4, LeaveGroup 0-5 (v0-2 leave one member; v3+ a batch; v5's reason only
  informative), DeleteGroups 0-2.
- OffsetCommit 2-9 (kio has no v0-1): retention_time (v2-4) is ignored as Kafka 2.1+
  does; v10 names topics by id, which Tributary does not have.
- OffsetFetch 2-8: v1 puts coordinator errors on each partition, which the native answer
  does not list; v8 batches several groups in one request (KIP-709), one native request
  per group; v9 is KIP-848's member epoch. v7's require_stable answers a partition with a
  transactional commit still pending UNSTABLE_OFFSET_COMMIT (KIP-447).
- OffsetDelete 0 (KIP-496): one to one; a group-level error answers no partition, as
  Kafka's does.
- ListGroups 0-5: v5's types_filter keeps only "classic" groups (all ours are).
- DescribeGroups 0-6: authorized_operations is left "not provided"; v6 (KIP-1043) answers
  an unknown group with GROUP_ID_NOT_FOUND where older versions get a Dead group.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.translation import (
    KafkaHeader,
    NativeBatch,
    Translation,
    build,
    ms_of,
    response_class,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode

# ListGroups v5+ group types (KIP-848): every Tributary group runs the classic protocol.
CLASSIC_GROUP_TYPE = "classic"
# A states filter no group state matches: how "no group of the requested types" reaches
# the native ListGroups, which filters by state only.
_NO_STATE = "(no classic group wanted)"
_DEAD = "Dead"


def _response(api_key: int, version: int, **values: Any) -> Any:
    values.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), **values)


# --- FindCoordinator (10) -------------------------------------------------------------------


# FindCoordinator v4+ (KIP-699) and OffsetFetch v8+ (KIP-709) batch keys and groups.
FIND_COORDINATOR_BATCHED = 4
OFFSET_FETCH_BATCHED = 8


def find_coordinator_to_native(
    request: Any, header: KafkaHeader
) -> m.FindCoordinatorRequest | NativeBatch:
    key_type = getattr(request, "key_type", 0)
    if header.api_version >= FIND_COORDINATOR_BATCHED:
        return NativeBatch(
            [m.FindCoordinatorRequest(key=k, key_type=key_type) for k in request.coordinator_keys]
        )
    return m.FindCoordinatorRequest(key=request.key, key_type=key_type)


def _coordinator(request: m.FindCoordinatorRequest, answer: Any) -> dict[str, Any]:
    if isinstance(answer, ErrorCode):
        return {
            "key": request.key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": answer,
            "error_message": answer.description,
        }
    return {
        "key": request.key,
        "node_id": answer.node_id,
        "host": answer.host,
        "port": answer.port,
        "error_code": answer.error_code,
        "error_message": answer.error_message,
    }


def find_coordinator_from_native(response: Any, version: int) -> Any:
    if version >= FIND_COORDINATOR_BATCHED:
        return _response(
            ApiKey.FIND_COORDINATOR,
            version,
            coordinators=[_coordinator(request, answer) for request, answer in response],
        )
    return _response(
        ApiKey.FIND_COORDINATOR,
        version,
        throttle_time=response.throttle_time_ms,
        error_code=response.error_code,
        error_message=response.error_message,
        node_id=response.node_id,
        host=response.host,
        port=response.port,
    )


def find_coordinator_error(request: Any, version: int, code: int) -> Any:
    if version >= FIND_COORDINATOR_BATCHED:
        error = ErrorCode.from_code(code)
        return _response(
            ApiKey.FIND_COORDINATOR,
            version,
            coordinators=[
                _coordinator(m.FindCoordinatorRequest(key=k), error)
                for k in request.coordinator_keys
            ],
        )
    return _response(
        ApiKey.FIND_COORDINATOR,
        version,
        error_code=code,
        error_message=None,
        node_id=-1,
        host="",
        port=-1,
    )


# --- JoinGroup (11) -------------------------------------------------------------------------


def join_group_to_native(request: Any, header: KafkaHeader) -> m.JoinGroupRequest:
    return m.JoinGroupRequest(
        group_id=request.group_id,
        session_timeout_ms=ms_of(request.session_timeout),
        rebalance_timeout_ms=ms_of(request.rebalance_timeout),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=[
            m.JoinGroupProtocol(name=p.name, metadata=bytes(p.metadata)) for p in request.protocols
        ],
        supports_skip_assignment=header.api_version >= 9,
    )


def _protocol_name(name: str | None, version: int) -> str | None:
    return name if version >= 7 else (name or "")  # nullable from v7


def join_group_from_native(response: m.JoinGroupResponse, version: int) -> Any:
    return _response(
        ApiKey.JOIN_GROUP,
        version,
        throttle_time=response.throttle_time_ms,
        error_code=response.error_code,
        generation_id=response.generation_id,
        protocol_type=None,
        protocol_name=_protocol_name(response.protocol_name, version),
        leader=response.leader,
        skip_assignment=response.skip_assignment,
        member_id=response.member_id,
        members=[
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "metadata": bytes(member.metadata),
            }
            for member in response.members
        ],
    )


def join_group_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.JOIN_GROUP,
        version,
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=_protocol_name(None, version),
        leader="",
        member_id="",
        members=[],
    )


# --- SyncGroup (14) -------------------------------------------------------------------------


def sync_group_to_native(request: Any, header: KafkaHeader) -> m.SyncGroupRequest:
    return m.SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        assignments=[
            m.SyncGroupAssignment(member_id=a.member_id, assignment=bytes(a.assignment))
            for a in request.assignments
        ],
    )


def sync_group_from_native(response: m.SyncGroupResponse, version: int) -> Any:
    return _response(
        ApiKey.SYNC_GROUP,
        version,
        throttle_time=response.throttle_time_ms,
        error_code=response.error_code,
        protocol_type=None,
        protocol_name=None,
        assignment=bytes(response.assignment),
    )


def sync_group_error(request: Any, version: int, code: int) -> Any:
    return _response(ApiKey.SYNC_GROUP, version, error_code=code, assignment=b"")


# --- Heartbeat (12) -------------------------------------------------------------------------


def heartbeat_to_native(request: Any, header: KafkaHeader) -> m.HeartbeatRequest:
    return m.HeartbeatRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )


def heartbeat_from_native(response: m.HeartbeatResponse, version: int) -> Any:
    return _response(
        ApiKey.HEARTBEAT,
        version,
        throttle_time=response.throttle_time_ms,
        error_code=response.error_code,
    )


def heartbeat_error(request: Any, version: int, code: int) -> Any:
    return _response(ApiKey.HEARTBEAT, version, error_code=code)


# --- LeaveGroup (13) ------------------------------------------------------------------------


def leave_group_to_native(request: Any, header: KafkaHeader) -> m.LeaveGroupRequest:
    if not hasattr(request, "members"):  # v0-2: one member, by id
        members = [m.LeaveGroupMember(member_id=request.member_id)]
    else:
        members = [
            m.LeaveGroupMember(member_id=p.member_id, group_instance_id=p.group_instance_id)
            for p in request.members
        ]
    return m.LeaveGroupRequest(group_id=request.group_id, members=members)


def leave_group_from_native(response: m.LeaveGroupResponse, version: int) -> Any:
    code = response.error_code
    if version < 3 and code == ErrorCode.NONE and response.members:
        code = response.members[0].error_code  # v0-2: the one member's result is the answer
    return _response(
        ApiKey.LEAVE_GROUP,
        version,
        throttle_time=response.throttle_time_ms,
        error_code=code,
        members=[
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "error_code": member.error_code,
            }
            for member in response.members
        ],
    )


def leave_group_error(request: Any, version: int, code: int) -> Any:
    members = getattr(request, "members", ())
    return _response(
        ApiKey.LEAVE_GROUP,
        version,
        error_code=code,
        members=[
            {
                "member_id": p.member_id,
                "group_instance_id": p.group_instance_id,
                "error_code": code,
            }
            for p in members
        ],
    )


# --- OffsetCommit (8) -----------------------------------------------------------------------


def offset_commit_to_native(request: Any, header: KafkaHeader) -> m.OffsetCommitRequest:
    # retention_time (v2-4) is ignored: offsets expire by offsets.retention.minutes.
    return m.OffsetCommitRequest(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        topics=[
            m.OffsetCommitTopic(
                name=topic.name,
                partitions=[
                    m.OffsetCommitPartition(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=getattr(p, "committed_leader_epoch", -1),
                        committed_metadata=p.committed_metadata,
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


def offset_commit_from_native(response: m.OffsetCommitResponse, version: int) -> Any:
    return _response(
        ApiKey.OFFSET_COMMIT,
        version,
        throttle_time=response.throttle_time_ms,
        topics=[
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": p.error_code}
                    for p in topic.partitions
                ],
            }
            for topic in response.topics
        ],
    )


def offset_commit_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.OFFSET_COMMIT,
        version,
        topics=[
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": code}
                    for p in topic.partitions
                ],
            }
            for topic in request.topics
        ],
    )


# --- OffsetFetch (9) ------------------------------------------------------------------------


def _offset_fetch_of_group(
    group_id: str, topics: Any, require_stable: bool = False
) -> m.OffsetFetchRequest:
    if topics is not None:
        topics = [
            m.OffsetFetchTopic(name=t.name, partition_indexes=list(t.partition_indexes))
            for t in topics
        ]
    return m.OffsetFetchRequest(group_id=group_id, topics=topics, require_stable=require_stable)


def offset_fetch_to_native(request: Any, header: KafkaHeader) -> m.OffsetFetchRequest | NativeBatch:
    stable = bool(getattr(request, "require_stable", False))
    if header.api_version >= OFFSET_FETCH_BATCHED:
        return NativeBatch(
            [_offset_fetch_of_group(g.group_id, g.topics, stable) for g in request.groups]
        )
    return _offset_fetch_of_group(request.group_id, request.topics, stable)


def _fetched_topics(response: m.OffsetFetchResponse) -> list[dict[str, Any]]:
    return [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "committed_offset": p.committed_offset,
                    "committed_leader_epoch": p.committed_leader_epoch,
                    "metadata": p.metadata,
                    "error_code": p.error_code,
                }
                for p in topic.partitions
            ],
        }
        for topic in response.topics
    ]


def _failed_topics(topics: Any, code: int) -> list[dict[str, Any]]:
    return [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": code,
                }
                for p in topic.partition_indexes
            ],
        }
        for topic in topics or ()
    ]


def _fetched_group(request: m.OffsetFetchRequest, answer: Any) -> dict[str, Any]:
    if isinstance(answer, ErrorCode):
        return {"group_id": request.group_id, "error_code": answer, "topics": []}
    return {
        "group_id": request.group_id,
        "error_code": answer.error_code,
        "topics": _fetched_topics(answer),
    }


def offset_fetch_from_native(response: Any, version: int) -> Any:
    if version >= OFFSET_FETCH_BATCHED:
        return _response(
            ApiKey.OFFSET_FETCH,
            version,
            groups=[_fetched_group(request, answer) for request, answer in response],
        )
    return _response(
        ApiKey.OFFSET_FETCH,
        version,
        throttle_time=response.throttle_time_ms,
        error_code=response.error_code,
        topics=_fetched_topics(response),
    )


def offset_fetch_error(request: Any, version: int, code: int) -> Any:
    if version >= OFFSET_FETCH_BATCHED:
        return _response(
            ApiKey.OFFSET_FETCH,
            version,
            groups=[
                {
                    "group_id": g.group_id,
                    "error_code": code,
                    "topics": _failed_topics(g.topics, code),
                }
                for g in request.groups
            ],
        )
    return _response(
        ApiKey.OFFSET_FETCH,
        version,
        error_code=code,
        topics=_failed_topics(request.topics, code),
    )


# --- ListGroups (16) ------------------------------------------------------------------------


def list_groups_to_native(request: Any, header: KafkaHeader) -> m.ListGroupsRequest:
    states = list(getattr(request, "states_filter", ()))
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    if types and CLASSIC_GROUP_TYPE not in types:
        states = [_NO_STATE]
    return m.ListGroupsRequest(states_filter=states)


def list_groups_from_native(response: m.ListGroupsResponse, version: int) -> Any:
    return _response(
        ApiKey.LIST_GROUPS,
        version,
        throttle_time=response.throttle_time_ms,
        error_code=response.error_code,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.group_state,
                "group_type": CLASSIC_GROUP_TYPE,
            }
            for g in response.groups
        ],
    )


def list_groups_error(request: Any, version: int, code: int) -> Any:
    return _response(ApiKey.LIST_GROUPS, version, error_code=code, groups=[])


# --- DescribeGroups (15) --------------------------------------------------------------------


def describe_groups_to_native(request: Any, header: KafkaHeader) -> m.DescribeGroupsRequest:
    return m.DescribeGroupsRequest(groups=list(request.groups))


def _described(group: m.DescribeGroupsResponseGroup, version: int) -> dict[str, Any]:
    code, message = group.error_code, None
    if version >= 6 and code == ErrorCode.NONE and group.group_state == _DEAD:
        code, message = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group.group_id} not found."
    return {
        "error_code": code,
        "error_message": message,
        "group_id": group.group_id,
        "group_state": group.group_state,
        "protocol_type": group.protocol_type,
        "protocol_data": group.protocol_data,
        "members": [
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "member_metadata": bytes(member.member_metadata),
                "member_assignment": bytes(member.member_assignment),
            }
            for member in group.members
        ],
    }


def describe_groups_from_native(response: m.DescribeGroupsResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_GROUPS,
        version,
        throttle_time=response.throttle_time_ms,
        groups=[_described(g, version) for g in response.groups],
    )


def describe_groups_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_GROUPS,
        version,
        groups=[
            {
                "error_code": code,
                "group_id": group_id,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
            for group_id in request.groups
        ],
    )


# --- DeleteGroups (42) ----------------------------------------------------------------------


def delete_groups_to_native(request: Any, header: KafkaHeader) -> m.DeleteGroupsRequest:
    return m.DeleteGroupsRequest(groups_names=list(request.groups_names))


def delete_groups_from_native(response: m.DeleteGroupsResponse, version: int) -> Any:
    return _response(
        ApiKey.DELETE_GROUPS,
        version,
        throttle_time=response.throttle_time_ms,
        results=[{"group_id": r.group_id, "error_code": r.error_code} for r in response.results],
    )


def delete_groups_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DELETE_GROUPS,
        version,
        results=[{"group_id": g, "error_code": code} for g in request.groups_names],
    )


# --- OffsetDelete (47) ----------------------------------------------------------------------


def offset_delete_to_native(request: Any, header: KafkaHeader) -> m.OffsetDeleteRequest:
    return m.OffsetDeleteRequest(
        group_id=request.group_id,
        topics=[
            m.OffsetDeleteTopic(name=t.name, partitions=[p.partition_index for p in t.partitions])
            for t in request.topics
        ],
    )


def offset_delete_from_native(response: m.OffsetDeleteResponse, version: int) -> Any:
    return _response(
        ApiKey.OFFSET_DELETE,
        version,
        error_code=response.error_code,
        throttle_time=response.throttle_time_ms,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": p.error_code}
                    for p in t.partitions
                ],
            }
            for t in response.topics
        ],
    )


def offset_delete_error(request: Any, version: int, code: int) -> Any:
    return _response(ApiKey.OFFSET_DELETE, version, error_code=code, topics=[])


TRANSLATIONS: dict[int, Translation] = {
    int(t.api_key): t
    for t in [
        Translation(
            ApiKey.FIND_COORDINATOR,
            0,
            4,
            find_coordinator_to_native,
            find_coordinator_from_native,
            find_coordinator_error,
        ),
        Translation(
            ApiKey.JOIN_GROUP, 4, 9, join_group_to_native, join_group_from_native, join_group_error
        ),
        Translation(
            ApiKey.SYNC_GROUP, 0, 5, sync_group_to_native, sync_group_from_native, sync_group_error
        ),
        Translation(
            ApiKey.HEARTBEAT, 0, 4, heartbeat_to_native, heartbeat_from_native, heartbeat_error
        ),
        Translation(
            ApiKey.LEAVE_GROUP,
            0,
            5,
            leave_group_to_native,
            leave_group_from_native,
            leave_group_error,
        ),
        Translation(
            ApiKey.OFFSET_COMMIT,
            2,
            9,
            offset_commit_to_native,
            offset_commit_from_native,
            offset_commit_error,
        ),
        Translation(
            ApiKey.OFFSET_FETCH,
            2,
            8,
            offset_fetch_to_native,
            offset_fetch_from_native,
            offset_fetch_error,
        ),
        Translation(
            ApiKey.OFFSET_DELETE,
            0,
            0,
            offset_delete_to_native,
            offset_delete_from_native,
            offset_delete_error,
        ),
        Translation(
            ApiKey.LIST_GROUPS,
            0,
            5,
            list_groups_to_native,
            list_groups_from_native,
            list_groups_error,
        ),
        Translation(
            ApiKey.DESCRIBE_GROUPS,
            0,
            6,
            describe_groups_to_native,
            describe_groups_from_native,
            describe_groups_error,
        ),
        Translation(
            ApiKey.DELETE_GROUPS,
            0,
            2,
            delete_groups_to_native,
            delete_groups_from_native,
            delete_groups_error,
        ),
    ]
}
