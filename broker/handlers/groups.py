"""Request handlers for the group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and
OffsetDelete.

How it works: each handler turns a message into one call on the sans-IO
`GroupCoordinator` (through `GroupService`) before any `await`, and turns the answer
back into a message. JoinGroup, SyncGroup, OffsetCommit, DeleteGroups and OffsetDelete
may have to wait (for the other members, for the offsets partition's ISR), so they return a `Reply`
the coordinator's callback fills. FindCoordinator is answered from the metadata cache
on the listener the request came in on, creating `__consumer_offsets` on first use.
The client's host (DescribeGroups shows it) comes from the connection.

FindCoordinator for a transactional id (key type 1) goes to
`find_transaction_coordinator` (the transaction handlers, set by broker/txn_wiring.py).
Without one it is refused with CLUSTER_AUTHORIZATION_FAILED and a message saying that
transactions are not supported: librdkafka retries every other error of its
transaction-coordinator lookup until init_transactions times out, and stops at once,
printing the broker's message, on this one. Any other key type is an INVALID_REQUEST, as
in Kafka.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.core.group.coordinator import JoinRequest, describe
from broker.core.group.offsets_topic import OFFSETS_TOPIC, OffsetValue
from broker.core.metadata_cache import MetadataCache
from broker.handlers.coordinators import coordinator_answer, locate_coordinator
from broker.tasks.group_service import GroupService
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader
from client.protocol.errors import ErrorCode
from server_common.network import Reply, client_host

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
NO_TRANSACTIONS = (
    "Tributary does not support transactions: there is no transaction coordinator "
    "(unset transactional.id; idempotent producers are supported)"
)

GROUP_APIS = frozenset(
    {
        ApiKey.FIND_COORDINATOR,
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.LIST_GROUPS,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
    }
)


class GroupHandlers:
    def __init__(
        self,
        service: GroupService,
        metadata_cache: MetadataCache,
        *,
        broker_id: int,
        clock: Callable[[], int],
    ) -> None:
        self.service = service
        self.coordinator = service.coordinator
        self.cache = metadata_cache
        self.broker_id = broker_id
        self.now_ms = clock
        self.find_transaction_coordinator: (
            Callable[[m.FindCoordinatorRequest, str | None], Awaitable[m.FindCoordinatorResponse]]
            | None
        ) = None
        # API key -> handler(request) for the group APIs answered without waiting (the
        # request is that API's message: its type follows from the key).
        self._answer_now: dict[int, Callable[[Any], object]] = {
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.DELETE_GROUPS: self.delete_groups,
            ApiKey.OFFSET_DELETE: self.offset_delete,
        }

    async def handle(self, header: RequestHeader, request: Any, listener: str | None) -> Any:
        api = header.api_key
        if api == ApiKey.FIND_COORDINATOR:
            return await self.find_coordinator(request, listener)
        if api == ApiKey.JOIN_GROUP:
            return self.join_group(request, header.client_id or "")
        return self._answer_now[api](request)

    # -- FindCoordinator ---------------------------------------------------------------
    async def find_coordinator(
        self, request: m.FindCoordinatorRequest, listener: str | None
    ) -> m.FindCoordinatorResponse:
        if request.key_type == TRANSACTION_KEY_TYPE:
            if self.find_transaction_coordinator is not None:
                return await self.find_transaction_coordinator(request, listener)
            return coordinator_answer(
                listener, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, NO_TRANSACTIONS
            )
        if request.key_type != GROUP_KEY_TYPE:
            return coordinator_answer(
                listener,
                ErrorCode.INVALID_REQUEST,
                f"unknown coordinator key type {request.key_type}",
            )
        if not request.key:
            return coordinator_answer(listener, ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        return await locate_coordinator(
            self.cache,
            listener,
            OFFSETS_TOPIC,
            self.coordinator.partition_for(request.key),
            self.service.ensure_offsets_topic,
        )

    # -- membership ---------------------------------------------------------------------
    def join_group(self, request: m.JoinGroupRequest, client_id: str) -> Reply:
        reply = Reply()
        self.coordinator.join_group(
            JoinRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                client_id=client_id,
                client_host=client_host(),
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                session_timeout_ms=request.session_timeout_ms,
                protocol_type=request.protocol_type,
                protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
                supports_skip_assignment=request.supports_skip_assignment,
            ),
            self.now_ms(),
            reply.set,
        )
        return reply

    def sync_group(self, request: m.SyncGroupRequest) -> Reply:
        reply = Reply()
        self.coordinator.sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
            {a.member_id: bytes(a.assignment) for a in request.assignments},
            self.now_ms(),
            reply.set,
        )
        return reply

    def heartbeat(self, request: m.HeartbeatRequest) -> m.HeartbeatResponse:
        code = self.coordinator.heartbeat(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
            self.now_ms(),
        )
        return m.HeartbeatResponse(throttle_time_ms=0, error_code=code)

    def leave_group(self, request: m.LeaveGroupRequest) -> m.LeaveGroupResponse:
        code, results = self.coordinator.leave_group(
            request.group_id,
            [(member.member_id, member.group_instance_id) for member in request.members],
            self.now_ms(),
        )
        return m.LeaveGroupResponse(
            throttle_time_ms=0,
            error_code=code,
            members=[
                m.LeaveGroupResponseMember(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    error_code=result,
                )
                for member, result in zip(request.members, results, strict=False)
            ],
        )

    # -- offsets ------------------------------------------------------------------------
    def offset_commit(self, request: m.OffsetCommitRequest) -> Reply | m.OffsetCommitResponse:
        now = self.now_ms()
        offsets: dict[tuple[str, int], OffsetValue] = {}
        unknown: dict[tuple[str, int], ErrorCode] = {}
        for topic in request.topics:
            known = self.cache.topics.get(topic.name, {})
            for part in topic.partitions:
                tp = (topic.name, part.partition_index)
                if part.partition_index not in known:
                    unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    offsets[tp] = OffsetValue(
                        offset=part.committed_offset,
                        leader_epoch=part.committed_leader_epoch,
                        metadata=part.committed_metadata or "",
                        commit_timestamp_ms=now,
                    )
        if not offsets:
            return _commit_response(unknown)
        reply = Reply()

        def respond(results: dict[tuple[str, int], ErrorCode]) -> None:
            reply.set(_commit_response({**unknown, **results}))

        self.coordinator.commit_offsets(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
            offsets,
            now,
            respond,
        )
        return reply

    def offset_fetch(self, request: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
        wanted = (
            None
            if request.topics is None
            else [(t.name, p) for t in request.topics for p in t.partition_indexes]
        )
        code, found = self.coordinator.fetch_offsets(request.group_id, wanted)
        by_topic: dict[str, list[m.OffsetFetchResponsePartition]] = {}
        pending = self.coordinator.txn_offsets
        for (topic, partition), value in sorted(found.items()):
            if request.require_stable and pending.has_pending(request.group_id, (topic, partition)):
                value, unstable = None, ErrorCode.UNSTABLE_OFFSET_COMMIT  # KIP-447
            else:
                unstable = ErrorCode.NONE
            by_topic.setdefault(topic, []).append(
                m.OffsetFetchResponsePartition(
                    partition_index=partition,
                    committed_offset=value.offset if value is not None else -1,
                    committed_leader_epoch=value.leader_epoch if value is not None else -1,
                    metadata=value.metadata if value is not None else "",
                    error_code=unstable,
                )
            )
        return m.OffsetFetchResponse(
            throttle_time_ms=0,
            error_code=code,
            topics=[
                m.OffsetFetchResponseTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()
            ],
        )

    # -- admin --------------------------------------------------------------------------
    def list_groups(self, request: m.ListGroupsRequest) -> m.ListGroupsResponse:
        code, groups = self.coordinator.list_groups(request.states_filter)
        return m.ListGroupsResponse(
            throttle_time_ms=0,
            error_code=code,
            groups=[
                m.ListGroupsResponseGroup(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type or "",
                    group_state=g.state.value,
                )
                for g in sorted(groups, key=lambda g: g.group_id)
            ],
        )

    def describe_groups(self, request: m.DescribeGroupsRequest) -> m.DescribeGroupsResponse:
        answers = []
        for group_id in request.groups:
            code, group = self.coordinator.describe_group(group_id)
            if code is not ErrorCode.NONE:
                answers.append(
                    m.DescribeGroupsResponseGroup(
                        error_code=code,
                        group_id=group_id,
                        group_state="",
                        protocol_type="",
                        protocol_data="",
                        members=[],
                    )
                )
            else:
                answers.append(describe(group, group_id, self.broker_id))
        return m.DescribeGroupsResponse(throttle_time_ms=0, groups=answers)

    def delete_groups(self, request: m.DeleteGroupsRequest) -> Reply:
        reply = Reply()

        def respond(results: dict[str, ErrorCode]) -> None:
            reply.set(
                m.DeleteGroupsResponse(
                    throttle_time_ms=0,
                    results=[
                        m.DeleteGroupsResponseResult(group_id=g, error_code=code)
                        for g, code in results.items()
                    ],
                )
            )

        self.coordinator.delete_groups(list(request.groups_names), self.now_ms(), respond)
        return reply

    def offset_delete(self, request: m.OffsetDeleteRequest) -> Reply:
        """OffsetDelete (KIP-496): the group's committed offsets of these partitions."""
        reply = Reply()
        partitions = [(t.name, p) for t in request.topics for p in t.partitions]
        self.coordinator.delete_offsets(
            request.group_id,
            partitions,
            self.now_ms(),
            lambda code, results: reply.set(_offset_delete_response(code, results)),
        )
        return reply


def _offset_delete_response(
    code: ErrorCode, results: dict[tuple[str, int], ErrorCode]
) -> m.OffsetDeleteResponse:
    by_topic: dict[str, list[m.OffsetDeleteResponsePartition]] = {}
    for (topic, partition), result in results.items():
        by_topic.setdefault(topic, []).append(
            m.OffsetDeleteResponsePartition(partition_index=partition, error_code=result)
        )
    return m.OffsetDeleteResponse(
        error_code=code,
        throttle_time_ms=0,
        topics=[m.OffsetDeleteResponseTopic(name=t, partitions=p) for t, p in by_topic.items()],
    )


def _commit_response(results: dict[tuple[str, int], ErrorCode]) -> m.OffsetCommitResponse:
    by_topic: dict[str, list[m.OffsetCommitResponsePartition]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(
            m.OffsetCommitResponsePartition(partition_index=partition, error_code=code)
        )
    return m.OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            m.OffsetCommitResponseTopic(name=name, partitions=parts)
            for name, parts in by_topic.items()
        ],
    )
