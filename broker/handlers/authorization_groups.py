"""Authorization of the consumer group APIs, as Kafka 2.8's KafkaApis checks them.

How it works: FindCoordinator and DescribeGroups need Describe on the group (a
transaction coordinator, Describe on the TransactionalId); Join, Sync, Heartbeat and
Leave need Read on the group; a refused one is answered GROUP_AUTHORIZATION_FAILED.
OffsetCommit needs Read on the group, then Read on each topic (the others' partitions
are answered TOPIC_AUTHORIZATION_FAILED); OffsetFetch needs Describe on the group, then
Describe on each named topic (the group's other topics are left out of an all-topics
answer); OffsetDelete needs Delete on the group, then Read on each topic. ListGroups
answers every group to a principal with Describe on the cluster, otherwise only the
groups it may Describe; DeleteGroups needs Delete on each group.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.handlers.authorization_check import (
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    Call,
    Check,
    Op,
    replace,
    then,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from server_common.network import error_answer
from server_common.security.acls import CLUSTER_NAME, AclOperation, ResourceType

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
TRANSACTION_KEY_TYPE = 1


def _group_rule(op: AclOperation):
    async def rule(check: Check, request: Any, call: Call) -> Any:
        if not check(op, GROUP, request.group_id):
            return error_answer(GROUP_DENIED, f"{check.principal} may not {op.title} the group")
        return await call(request)

    return rule


async def _find_coordinator(check: Check, request: m.FindCoordinatorRequest, call: Call) -> Any:
    if request.key_type == TRANSACTION_KEY_TYPE:
        allowed = check(Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.key)
        code = TXN_DENIED
    else:
        allowed, code = check(Op.DESCRIBE, GROUP, request.key), GROUP_DENIED
    if allowed:
        return await call(request)
    return m.FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=int(code),
        error_message="Authorization failed.",
        node_id=-1,
        host="",
        port=-1,
    )


async def _offset_commit(check: Check, request: m.OffsetCommitRequest, call: Call) -> Any:
    def refused(topic: m.OffsetCommitTopic, code: int) -> m.OffsetCommitResponseTopic:
        return m.OffsetCommitResponseTopic(
            name=topic.name,
            partitions=[
                m.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                for p in topic.partitions
            ],
        )

    if not check(Op.READ, GROUP, request.group_id):
        return m.OffsetCommitResponse(
            throttle_time_ms=0, topics=[refused(t, GROUP_DENIED) for t in request.topics]
        )
    allowed = [t for t in request.topics if check.topic(Op.READ, t.name)]
    denied = [refused(t, TOPIC_DENIED) for t in request.topics if not check.topic(Op.READ, t.name)]
    if not denied:
        return await call(request)
    if not allowed:
        return m.OffsetCommitResponse(throttle_time_ms=0, topics=denied)
    outcome = await call(replace(request, topics=allowed))
    return then(outcome, lambda r: replace(r, topics=[*r.topics, *denied]))


async def _offset_fetch(check: Check, request: m.OffsetFetchRequest, call: Call) -> Any:
    if not check(Op.DESCRIBE, GROUP, request.group_id):
        return m.OffsetFetchResponse(throttle_time_ms=0, error_code=GROUP_DENIED, topics=[])
    if request.topics is None:
        return then(
            await call(request),
            lambda r: replace(
                r, topics=[t for t in r.topics if check.quietly(Op.DESCRIBE, TOPIC, t.name)]
            ),
        )
    allowed = [t for t in request.topics if check.topic(Op.DESCRIBE, t.name)]
    denied = [
        m.OffsetFetchResponseTopic(
            name=t.name,
            partitions=[
                m.OffsetFetchResponsePartition(
                    partition_index=p,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata=None,
                    error_code=TOPIC_DENIED,
                )
                for p in t.partition_indexes
            ],
        )
        for t in request.topics
        if not check.topic(Op.DESCRIBE, t.name)
    ]
    if not denied:
        return await call(request)
    if not allowed:
        return m.OffsetFetchResponse(throttle_time_ms=0, error_code=0, topics=denied)
    outcome = await call(replace(request, topics=allowed))
    return then(outcome, lambda r: replace(r, topics=[*r.topics, *denied]))


async def _offset_delete(check: Check, request: m.OffsetDeleteRequest, call: Call) -> Any:
    if not check(Op.DELETE, GROUP, request.group_id):
        return m.OffsetDeleteResponse(error_code=GROUP_DENIED, throttle_time_ms=0, topics=[])
    allowed = [t for t in request.topics if check.topic(Op.READ, t.name)]
    denied = [
        m.OffsetDeleteResponseTopic(
            name=t.name,
            partitions=[
                m.OffsetDeleteResponsePartition(partition_index=p, error_code=TOPIC_DENIED)
                for p in t.partitions
            ],
        )
        for t in request.topics
        if not check.topic(Op.READ, t.name)
    ]
    if not denied:
        return await call(request)
    if not allowed:
        return m.OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=denied)
    outcome = await call(replace(request, topics=allowed))
    return then(outcome, lambda r: replace(r, topics=[*r.topics, *denied]))


async def _describe_groups(check: Check, request: m.DescribeGroupsRequest, call: Call) -> Any:
    allowed = [g for g in request.groups if check(Op.DESCRIBE, GROUP, g)]
    denied = [
        m.DescribeGroupsResponseGroup(
            error_code=GROUP_DENIED,
            group_id=g,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=[],
        )
        for g in request.groups
        if not check(Op.DESCRIBE, GROUP, g)
    ]
    if not denied:
        return await call(request)
    if not allowed:
        return m.DescribeGroupsResponse(throttle_time_ms=0, groups=denied)
    outcome = await call(replace(request, groups=allowed))
    return then(outcome, lambda r: replace(r, groups=[*r.groups, *denied]))


async def _list_groups(check: Check, request: m.ListGroupsRequest, call: Call) -> Any:
    outcome = await call(request)
    if check.quietly(Op.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return outcome
    return then(
        outcome,
        lambda r: replace(
            r, groups=[g for g in r.groups if check.quietly(Op.DESCRIBE, GROUP, g.group_id)]
        ),
    )


async def _delete_groups(check: Check, request: m.DeleteGroupsRequest, call: Call) -> Any:
    allowed = [g for g in request.groups_names if check(Op.DELETE, GROUP, g)]
    denied = [
        m.DeleteGroupsResponseResult(group_id=g, error_code=GROUP_DENIED)
        for g in request.groups_names
        if not check(Op.DELETE, GROUP, g)
    ]
    if not denied:
        return await call(request)
    if not allowed:
        return m.DeleteGroupsResponse(throttle_time_ms=0, results=denied)
    outcome = await call(replace(request, groups_names=allowed))
    return then(outcome, lambda r: replace(r, results=[*r.results, *denied]))


GROUP_RULES: dict[int, Callable[[Check, Any, Call], Awaitable[Any]]] = {
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _group_rule(Op.READ),
    ApiKey.SYNC_GROUP: _group_rule(Op.READ),
    ApiKey.HEARTBEAT: _group_rule(Op.READ),
    ApiKey.LEAVE_GROUP: _group_rule(Op.READ),
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DELETE_GROUPS: _delete_groups,
}
