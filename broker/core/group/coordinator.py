"""The group coordinator: the group requests' checks and answers (sans-IO).

How it works (Kafka 2.8's `GroupCoordinator`, one thread): every request is first
checked here, in Kafka's order: may this broker answer for the group (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS), is the group known and alive, is the member known and not
fenced (KIP-345), is its generation current. What passes goes to one of two parts:

- `membership.py` (`GroupMembership`): the state machine of joins, rebalances, syncs and
  member liveness, with the delayed joins and heartbeats (`delayed.py`) and their
  purgatories;
- `metadata_manager.py` (`GroupMetadataManager`): the groups this broker coordinates,
  loaded from the `__consumer_offsets` partitions it leads (`begin_loading`/
  `finish_loading`/`unload`, fed by the shell) and written back through the `append`
  callable the shell gives (group metadata, offset commits, tombstones), with the
  committed offsets and their expiration.

OffsetCommit is accepted from a member of the current generation, or with generation -1
from an admin while the group is Empty. Answers are the wire messages themselves
(`client.protocol.messages`); time comes in as `now_ms`; the purgatories' `wake_at`
tells the shell when to call `expire_due`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from broker.core.group import offsets_topic as ot
from broker.core.group.config import CoordinatorStats, GroupConfig
from broker.core.group.group import Group, GroupState
from broker.core.group.membership import (
    UNKNOWN_MEMBER,
    GroupMembership,
    JoinCallback,
    JoinRequest,
    SyncCallback,
    join_error,
    sync_answer,
)
from broker.core.group.metadata_manager import (
    Append,
    Done,
    GroupLoader,
    GroupMetadataManager,
    Records,
)
from broker.core.group.txn_offsets import AppendTxn, TxnOffsets
from client.protocol import messages as m
from client.protocol.errors import ErrorCode

# The broker shell imports the group core's names from here (some defined beside it).
__all__ = [
    "Done",
    "GroupConfig",
    "GroupCoordinator",
    "GroupLoader",
    "JoinRequest",
    "Records",
    "describe",
]

log = logging.getLogger(__name__)


def _no_txn_append(partition, records, producer_id, producer_epoch, now_ms, done) -> None:
    done(ErrorCode.UNSUPPORTED_VERSION, now_ms)  # a shell that writes no transactions


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        append: Append,
        *,
        wake_at: Callable[[int], None] | None = None,
        events: Callable[[str, dict], None] | None = None,
        append_txn: AppendTxn | None = None,
    ) -> None:
        self.config = config
        self._events = events or (lambda kind, data: None)
        self.stats = CoordinatorStats()
        self.metadata = GroupMetadataManager(config, append, self.stats, self._events)
        self.membership = GroupMembership(config, self.metadata, self.stats, self._events, wake_at)
        self.join_purgatory = self.membership.join_purgatory
        self.heartbeat_purgatory = self.membership.heartbeat_purgatory
        self.txn_offsets = TxnOffsets(append_txn or _no_txn_append, self.metadata.partition_for)

    @property
    def groups(self) -> dict[str, Group]:
        return self.metadata.groups

    # -- ownership -----------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return self.metadata.partition_for(group_id)

    def begin_loading(self, partition: int, now_ms: int) -> int:
        """This broker now leads `partition`: unload what it had, start loading."""
        self.unload(partition, now_ms)
        return self.metadata.begin_loading(partition)

    def is_loading(self, partition: int, token: int) -> bool:
        return self.metadata.is_loading(partition, token)

    def finish_loading(
        self, partition: int, token: int, loader: GroupLoader, now_ms: int
    ) -> int | None:
        """Install what `loader` read; the number of groups, or None if `partition` was
        unloaded (or reloaded) meanwhile and nothing was installed."""
        membership = self.membership
        loaded = self.metadata.finish_loading(
            partition, token, loader, now_ms, lambda group: membership.group_loaded(group, now_ms)
        )
        if loaded is not None:
            self.txn_offsets.install(loader.txn.still_open())
        return loaded

    def unload(self, partition: int, now_ms: int) -> int:
        """Stop coordinating `partition`'s groups (leadership moved or the broker stops)."""
        membership = self.membership
        self.txn_offsets.unload(partition)
        return self.metadata.unload(
            partition, lambda group: membership.group_unloaded(group, now_ms)
        )

    # -- JoinGroup -----------------------------------------------------------------
    def join_group(self, request: JoinRequest, now_ms: int, respond: JoinCallback) -> None:
        status = self.metadata.status(request.group_id)
        if status is not ErrorCode.NONE:
            respond(join_error(status, request.member_id))
            return
        cfg = self.config
        if (
            not cfg.min_session_timeout_ms
            <= request.session_timeout_ms
            <= (cfg.max_session_timeout_ms)
        ):
            respond(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id))
            return
        unknown = request.member_id == UNKNOWN_MEMBER
        group = self.groups.get(request.group_id)
        if group is None:
            if not unknown:
                respond(join_error(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id))
                return
            group = Group(request.group_id, state_timestamp_ms=now_ms)
            self.groups[request.group_id] = group
        if self._group_full(group, request):
            respond(join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, request.member_id))
            return
        if group.is_state(GroupState.DEAD):
            respond(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id))
            return
        if not group.supports(request.protocol_type, request.protocols):
            respond(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
            return
        self.membership.join(group, request, now_ms, respond)

    def _group_full(self, group: Group, request: JoinRequest) -> bool:
        if len(group.members) + len(group.pending_members) < self.config.max_size:
            return False
        if request.member_id == UNKNOWN_MEMBER:
            return group.static_member_id(request.group_instance_id) is None
        return not group.has(request.member_id) and request.member_id not in group.pending_members

    # -- SyncGroup -----------------------------------------------------------------
    def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        now_ms: int,
        respond: SyncCallback,
    ) -> None:
        status = self.metadata.status(group_id)
        if status is not ErrorCode.NONE:
            respond(sync_answer(status))
            return
        group = self.groups.get(group_id)
        if group is None:
            respond(sync_answer(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if group.is_state(GroupState.DEAD):
            respond(sync_answer(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        fenced = self.membership.fenced(group, member_id, group_instance_id)
        if fenced is not ErrorCode.NONE:
            respond(sync_answer(fenced))
            return
        if generation != group.generation:
            respond(sync_answer(ErrorCode.ILLEGAL_GENERATION))
            return
        self.membership.sync(group, group.members[member_id], assignments, now_ms, respond)

    # -- Heartbeat and LeaveGroup --------------------------------------------------
    def heartbeat(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        status = self.metadata.status(group_id)
        if status is not ErrorCode.NONE:
            return status
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        fenced = self.membership.fenced(group, member_id, group_instance_id)
        if fenced is not ErrorCode.NONE:
            return fenced
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self.membership.schedule_heartbeat(group, group.members[member_id], now_ms)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove each (member id, instance id); a top-level error and one per member."""
        status = self.metadata.status(group_id)
        if status is not ErrorCode.NONE:
            return status, []
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in members]
        membership = self.membership
        results = []
        for member_id, instance_id in members:
            if instance_id is not None and member_id == UNKNOWN_MEMBER:
                member_id = group.static_member_id(instance_id) or UNKNOWN_MEMBER
            if member_id in group.pending_members:
                membership.remove_pending_member(group, member_id, now_ms)
                results.append(ErrorCode.NONE)
                continue
            fenced = membership.fenced(group, member_id, instance_id)
            if fenced is not ErrorCode.NONE:
                results.append(fenced)
                continue
            member = group.members[member_id]
            log.info("group %s: member %s left", group_id, member_id)
            membership.remove_member_and_update(group, member, now_ms, "member left")
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    # -- offsets ---------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], ot.OffsetValue],
        now_ms: int,
        respond: Callable[[dict[tuple[str, int], ErrorCode]], None],
    ) -> None:
        def fail(code: ErrorCode) -> None:
            respond({tp: code for tp in offsets})

        status = self.metadata.status(group_id)
        if status is not ErrorCode.NONE:
            fail(status)
            return
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # The group is gone (e.g. expired): its members must rejoin.
                fail(ErrorCode.ILLEGAL_GENERATION)
                return
            group = Group(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        if group.is_state(GroupState.DEAD):
            fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        if generation < 0 and group.is_state(GroupState.EMPTY):
            self.metadata.store_offsets(group, offsets, now_ms, respond)
            return
        if group_instance_id is not None:
            known = group.static_member_id(group_instance_id)
            if known is not None and known != member_id:
                fail(ErrorCode.FENCED_INSTANCE_ID)
                return
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            fail(ErrorCode.REBALANCE_IN_PROGRESS)
            return
        if not group.has(member_id):
            fail(ErrorCode.UNKNOWN_MEMBER_ID)
            return
        if generation != group.generation:
            fail(ErrorCode.ILLEGAL_GENERATION)
            return
        self.membership.schedule_heartbeat(group, group.members[member_id], now_ms)
        self.metadata.store_offsets(group, offsets, now_ms, respond)

    def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], ot.OffsetValue],
        now_ms: int,
        respond: Callable[[dict[tuple[str, int], ErrorCode]], None],
    ) -> None:
        """TxnOffsetCommit (Kafka 2.8's checks, with KIP-447's member and generation: a
        zombie member of an older generation is fenced); pending until the marker."""

        def fail(code: ErrorCode) -> None:
            respond({tp: code for tp in offsets})

        status = self.metadata.status(group_id)
        if status is not ErrorCode.NONE:
            return fail(status)
        group = self.groups.get(group_id)
        if group is None:
            group = Group(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        if group.is_state(GroupState.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not (generation < 0 and group.is_state(GroupState.EMPTY)):
            if group_instance_id is not None:
                known = group.static_member_id(group_instance_id)
                if known is not None and known != member_id:
                    return fail(ErrorCode.FENCED_INSTANCE_ID)
            if member_id and not group.has(member_id):
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation >= 0 and generation != group.generation:
                return fail(ErrorCode.ILLEGAL_GENERATION)
        self.txn_offsets.store(
            group,
            producer_id,
            producer_epoch,
            offsets,
            now_ms,
            respond,
            self.config.metadata_max_bytes,
        )

    def complete_txn(self, partition: int, producer_id: int, committed: bool, now_ms: int) -> int:
        """A COMMIT/ABORT marker of `producer_id` landed on offsets partition `partition`
        (the replica manager's `txn_marker_listeners`)."""
        if partition not in self.metadata.owned:
            return 0
        for group_id, by_pid in self.txn_offsets.pending.items():
            if producer_id in by_pid and group_id not in self.groups:
                self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
        return self.txn_offsets.complete(partition, producer_id, committed, self.groups)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, dict[tuple[str, int], ot.OffsetValue | None]]:
        """Committed offsets of `partitions` (None: all the group has); None: none."""
        return self.metadata.fetch_offsets(group_id, partitions)

    def expire_offsets(self, now_ms: int) -> int:
        """KIP-211 offset expiration (`GroupMetadataManager.expire_offsets`)."""
        return self.metadata.expire_offsets(now_ms)

    # -- admin: list, describe, delete -----------------------------------------------
    def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[Group]]:
        wanted = {s.lower() for s in states}
        groups = [g for g in self.groups.values() if not wanted or g.state.value.lower() in wanted]
        code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.metadata.loading else ErrorCode.NONE
        return code, groups

    def describe_group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        status = self.metadata.status(group_id)
        if status is not ErrorCode.NONE:
            return status, None
        return ErrorCode.NONE, self.groups.get(group_id)

    def delete_groups(
        self,
        group_ids: list[str],
        now_ms: int,
        respond: Callable[[dict[str, ErrorCode]], None],
    ) -> None:
        """DeleteGroups (`GroupMetadataManager.delete_groups`): Empty groups only."""
        self.metadata.delete_groups(group_ids, now_ms, respond)

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]],
        now_ms: int,
        respond: Callable[[ErrorCode, dict[tuple[str, int], ErrorCode]], None],
    ) -> None:
        """OffsetDelete (`GroupMetadataManager.delete_offsets`)."""
        self.metadata.delete_offsets(group_id, partitions, now_ms, respond)

    # -- the shell's timer -------------------------------------------------------------
    def expire_due(self, now_ms: int) -> int:
        return self.membership.expire_due(now_ms)

    def next_deadline_ms(self) -> int | None:
        return self.membership.next_deadline_ms()

    def counts_by_state(self) -> dict[str, int]:
        counts = {state.value: 0 for state in GroupState if state is not GroupState.DEAD}
        for group in self.groups.values():
            if group.state.value in counts:
                counts[group.state.value] += 1
        return counts

    def shutdown(self, now_ms: int) -> None:
        for partition in list(self.metadata.owned | set(self.metadata.loading)):
            self.unload(partition, now_ms)


def describe(group: Group | None, group_id: str, coordinator_id: int) -> Any:
    """DescribeGroups' answer for one group (an unknown group is Dead, as Kafka)."""
    if group is None:
        return m.DescribeGroupsResponseGroup(
            error_code=ErrorCode.NONE,
            group_id=group_id,
            group_state=GroupState.DEAD.value,
            protocol_type="",
            protocol_data="",
            members=[],
            coordinator_id=coordinator_id,
        )
    stable = group.is_state(GroupState.STABLE)
    return m.DescribeGroupsResponseGroup(
        error_code=ErrorCode.NONE,
        group_id=group.group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=group.protocol or "",
        members=[
            m.DescribeGroupsResponseMember(
                member_id=mem.member_id,
                group_instance_id=mem.group_instance_id,
                client_id=mem.client_id,
                client_host=mem.client_host,
                member_metadata=mem.metadata_for(group.protocol),
                member_assignment=mem.assignment if stable else b"",
            )
            for mem in group.members.values()
        ],
        generation_id=group.generation,
        coordinator_id=coordinator_id,
    )
