"""The admin client's consumer group requests: list, describe, read and alter offsets,
delete.

How it works: ListGroups goes to every live broker (each answers for the groups it
coordinates) and the answers are merged. Everything else about a group goes to its
coordinator (FindCoordinator, client/consumer/group/channel.py `find_coordinator`), one request
per group (`_group_request`), looked up again and retried while the answer is
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (or the
connection fails), for up to the request timeout. DescribeGroups' member assignments
are decoded with Kafka's ConsumerProtocol for groups of protocol type "consumer".
Offsets are altered with an OffsetCommit of generation -1 and member id "", which the
coordinator takes only while the group is Empty (`GroupOffsetsError` otherwise).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import trio

from client.admin.base import AdminBase, error_or_none
from client.admin.results import (
    GroupDescription,
    GroupListing,
    GroupOffsetsError,
    MemberDescription,
)
from client.connection import BrokerConnectionError
from client.consumer.group.channel import find_coordinator
from client.consumer.group.offsets import (
    committed_offsets,
    offset_commit_errors,
    offset_commit_request,
    offset_fetch_request,
)
from client.protocol import messages as m
from client.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
)
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import PartitionKey, TopicPartition

log = logging.getLogger(__name__)

# Answers after which the group's coordinator must be looked up again (or is loading).
_COORDINATOR_RETRY = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


class GroupAdmin(AdminBase):
    """Consumer groups and their offsets (a mixin of `client.admin.Admin`)."""

    async def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """Every group of the cluster (only those in `states`, if given), sorted by id:
        ListGroups to every live broker, merged. A broker that cannot be reached is
        skipped (logged); if none answers, `NoBrokersAvailableError`."""
        request = m.ListGroupsRequest(states_filter=list(states))
        found: dict[str, GroupListing] = {}
        for broker, response in await self._ask_every_broker(request, "ListGroups"):
            for g in response.groups:
                found[g.group_id] = GroupListing(
                    g.group_id, g.protocol_type, g.group_state, broker.node_id
                )
        return sorted(found.values())

    async def _group_request(
        self, group_id: str, request: Any, error_of: Callable[[Any], ErrorCode]
    ) -> tuple[Any, int]:
        """Send `request` to the group's coordinator: (its answer, the coordinator's id).
        Retries while the coordinator moves or loads (`error_of(answer)` says); raises
        `TributaryError` with the last error after the request timeout."""
        deadline = trio.current_time() + self.request_timeout_ms / 1000
        last: TributaryError | None = None
        with trio.move_on_at(deadline):
            while True:
                coordinator = await find_coordinator(
                    self._pool,
                    self.metadata,
                    group_id,
                    timeout_s=max(deadline - trio.current_time(), 0.001),
                    retry_backoff_ms=self.retry_backoff_ms,
                )
                try:
                    response = await self._pool.request(
                        *coordinator.address, request, timeout_s=self.request_timeout_ms / 1000
                    )
                    code = error_of(response)
                except BrokerConnectionError as exc:
                    response, code = None, exc.code
                except TributaryError as exc:  # a request-level error answer
                    response, code = None, exc.code
                if code not in _COORDINATOR_RETRY:
                    if response is None:
                        raise TributaryError(code, f"asking the coordinator of {group_id!r}")
                    return response, coordinator.node_id
                last = TributaryError(code, f"from broker {coordinator.node_id}")
                await trio.sleep(self.retry_backoff_ms / 1000)
        raise TributaryError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"the coordinator of group {group_id!r} did not answer within "
            f"{self.request_timeout_ms:g} ms" + (f" (last error: {last})" if last else ""),
        )

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """Each group as its coordinator describes it, in the order asked (an unknown group
        comes back with state "Dead" and no members). Raises the first group's error."""
        ids = list(group_ids)
        out: dict[str, GroupDescription] = {}

        async def describe(group_id: str) -> None:
            response, node = await self._group_request(
                group_id,
                m.DescribeGroupsRequest(groups=[group_id]),
                lambda r: ErrorCode.from_code(r.groups[0].error_code if r.groups else 0),
            )
            (group,) = response.groups
            if group.error_code:
                raise TributaryError(group.error_code, f"describing group {group_id!r}")
            out[group_id] = _group_description(group, node)

        async with trio.open_nursery() as nursery:
            for group_id in dict.fromkeys(ids):
                nursery.start_soon(describe, group_id)
        return [out[g] for g in ids]

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (of `partitions`, or all it has); partitions
        without a committed offset are left out."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        response, _ = await self._group_request(
            group_id,
            offset_fetch_request(group_id, wanted),
            lambda r: ErrorCode.from_code(r.error_code),
        )
        if response.error_code:
            raise TributaryError(response.error_code, f"offsets of group {group_id!r}")
        out: dict[TopicPartition, int] = {}
        for tp, committed in sorted(committed_offsets(response).items()):
            if committed.error is not ErrorCode.NONE:
                raise TributaryError(committed.error, f"the offset of {tp} in {group_id!r}")
            if committed.offset is not None:
                out[tp] = committed.offset
        return out

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[PartitionKey, int]) -> None:
        """Set the group's committed offsets (the group must be Empty: no members);
        raises `GroupOffsetsError` naming the failed partitions."""
        wanted = {TopicPartition(*tp): int(o) for tp, o in offsets.items()}
        if not wanted:
            return
        for tp, offset in wanted.items():
            if offset < 0:
                raise ValueError(f"cannot commit a negative offset ({offset}) for {tp}")

        def coordinator_error(response: m.OffsetCommitResponse) -> ErrorCode:
            codes = set(offset_commit_errors(response).values())
            return next((c for c in codes if c in _COORDINATOR_RETRY), ErrorCode.NONE)

        response, _ = await self._group_request(
            group_id, offset_commit_request(group_id, wanted), coordinator_error
        )
        errors = {
            tp: code
            for tp, code in offset_commit_errors(response).items()
            if code is not ErrorCode.NONE
        }
        if errors:
            raise GroupOffsetsError(group_id, errors)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, TributaryError | None]:
        """Delete groups (and their offsets): None for each deleted, else its error
        (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND...)."""
        out: dict[str, TributaryError | None] = {}

        async def delete(group_id: str) -> None:
            try:
                response, _ = await self._group_request(
                    group_id,
                    m.DeleteGroupsRequest(groups_names=[group_id]),
                    lambda r: ErrorCode.from_code(r.results[0].error_code if r.results else 0),
                )
            except TributaryError as exc:
                out[group_id] = exc
                return
            codes = [r.error_code for r in response.results if r.group_id == group_id]
            code = ErrorCode.from_code(codes[0]) if codes else ErrorCode.UNKNOWN_SERVER_ERROR
            out[group_id] = error_or_none(code, f"deleting group {group_id!r}")

        ids = list(dict.fromkeys(group_ids))
        async with trio.open_nursery() as nursery:
            for group_id in ids:
                nursery.start_soon(delete, group_id)
        return {g: out[g] for g in ids}


def _group_description(group: m.DescribeGroupsResponseGroup, node: int) -> GroupDescription:
    members = []
    for member in group.members:
        assignment: set[TopicPartition] = set()
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE and member.member_assignment:
            try:
                assignment = set(decode_assignment(member.member_assignment).partitions)
            except ConsumerProtocolError as exc:
                log.warning(
                    "group %s: member %s has an unreadable assignment: %s",
                    group.group_id,
                    member.member_id,
                    exc,
                )
        members.append(
            MemberDescription(
                member.member_id,
                member.group_instance_id,
                member.client_id,
                member.client_host,
                assignment,
            )
        )
    return GroupDescription(
        group.group_id,
        group.group_state,
        group.protocol_type,
        group.protocol_data,
        group.generation_id,
        group.coordinator_id if group.coordinator_id >= 0 else node,
        members,
    )
