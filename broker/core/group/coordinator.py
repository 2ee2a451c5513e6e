"""The group coordinator: membership, rebalances and committed offsets (sans-IO).

How it works (Kafka 2.8's `GroupCoordinator` and `GroupMetadataManager`, one thread):

- Ownership: this broker coordinates the groups of every `__consumer_offsets` partition
  it leads. `begin_loading(p)` marks the partition loading (group requests answer
  COORDINATOR_LOAD_IN_PROGRESS); the shell reads the partition and feeds the records to a
  `GroupLoader`; `finish_loading` installs what it found (a group with members comes back
  Stable, its members get a fresh session). `unload(p)` drops the groups (parked answers
  get NOT_COORDINATOR) when leadership moves. A group id maps to its partition with
  `offsets_topic.partition_for`.
- Rebalance (eager protocol): a JoinGroup parks its answer on the member; the group goes
  to PreparingRebalance and a `DelayedJoin` waits until every member has rejoined or the
  rebalance timeout passes (members that did not rejoin are removed). Then a new
  generation starts: the protocol is chosen by vote, the leader's answer carries every
  member's subscription, and the group waits in CompletingRebalance for the leader's
  SyncGroup, whose assignment is written to the partition (acks=all) before every member
  gets its share and the group is Stable. An empty group's first rebalance waits
  `group.initial.rebalance.delay.ms` for more members (`InitialDelayedJoin`).
- Liveness: each member has a `DelayedHeartbeat` for its session timeout; a heartbeat,
  join or sync completes it and schedules the next. An expired member is removed and the
  group rebalances. KIP-394: a first join without a member id gets MEMBER_ID_REQUIRED and
  an id, and is only *pending* until it rejoins with it. KIP-345: a static member
  (`group_instance_id`) that comes back gets a new member id and, if the group is Stable,
  its old assignment without a rebalance; the old id is fenced (FENCED_INSTANCE_ID).
- Offsets: OffsetCommit (from a member of the current generation, or with generation -1
  from an admin while the group is Empty) is appended with acks=all through the `append`
  callable the shell gives; the cache is updated only once the write is acknowledged.
  `expire_offsets(now)` drops offsets of groups empty longer than
  `offsets.retention.minutes` (KIP-211) and writes tombstones.

Answers are the wire messages themselves (`client.protocol.messages`); time comes in as
`now_ms`; the purgatories' `wake_at` tells the shell when to call `expire_due`.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from broker.core.group import offsets_topic as ot
from broker.core.group.delayed import (
    DelayedHeartbeat,
    DelayedJoin,
    DelayedPendingMember,
    InitialDelayedJoin,
)
from broker.core.group.group import Group, GroupState, Member
from broker.core.purgatory import Purgatory
from client.protocol import messages as m
from client.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

UNKNOWN_MEMBER = ""
NO_GENERATION = -1
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member that never rejoins goes.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

Records = list[tuple[bytes, bytes | None]]
# append(partition, [(key, value)], now_ms, done(error_code)): acks=all to the partition.
Append = Callable[[int, Records, int, Callable[[ErrorCode], None]], None]

# How a failed write to __consumer_offsets is reported to a group client (Kafka 2.8).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def append_error(code: ErrorCode) -> ErrorCode:
    return _APPEND_ERRORS.get(code, code)


@dataclass(frozen=True)
class GroupConfig:
    offsets_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    commit_timeout_ms: int = 5000
    metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000


@dataclass
class CoordinatorStats:
    rebalances: int = 0  # generations completed
    commits: int = 0  # offsets committed (partitions)
    expired_members: int = 0


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


JoinCallback = Callable[[m.JoinGroupResponse], None]
SyncCallback = Callable[[m.SyncGroupResponse], None]


def _join_error(code: ErrorCode, member_id: str = UNKNOWN_MEMBER) -> m.JoinGroupResponse:
    return m.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=code,
        generation_id=NO_GENERATION,
        protocol_name=None,
        leader="",
        member_id=member_id,
        members=[],
    )


def _sync_answer(code: ErrorCode, assignment: bytes = b"") -> m.SyncGroupResponse:
    return m.SyncGroupResponse(throttle_time_ms=0, error_code=code, assignment=assignment)


class GroupLoader:
    """Replays one `__consumer_offsets` partition: the latest value of every key wins."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], ot.OffsetValue]] = {}
        self.groups: dict[str, ot.GroupValue | None] = {}
        self.bad_records = 0

    def add(self, key: bytes | None, value: bytes | None) -> None:
        try:
            record = ot.decode_record(key, value)
        except ot.BadOffsetsRecord as exc:
            self.bad_records += 1
            log.warning("skipping an unreadable __consumer_offsets record: %s", exc)
            return
        if isinstance(record, ot.OffsetRecord):
            offsets = self.offsets.setdefault(record.group_id, {})
            if record.value is None:
                offsets.pop((record.topic, record.partition), None)
            else:
                offsets[(record.topic, record.partition)] = record.value
        else:
            self.groups[record.group_id] = record.value


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        append: Append,
        *,
        wake_at: Callable[[int], None] | None = None,
        events: Callable[[str, dict], None] | None = None,
    ) -> None:
        self.config = config
        self._append = append
        self._events = events or (lambda kind, data: None)
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, int] = {}  # partition -> load token
        self._tokens = itertools.count(1)
        self.join_purgatory = Purgatory("Rebalance", wake_at)
        self.heartbeat_purgatory = Purgatory("Heartbeat", wake_at)
        self.stats = CoordinatorStats()

    # -- ownership -----------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return ot.partition_for(group_id, self.config.offsets_partitions)

    def begin_loading(self, partition: int, now_ms: int) -> int:
        """This broker now leads `partition`: unload what it had, start loading."""
        self.unload(partition, now_ms)
        token = next(self._tokens)
        self.loading[partition] = token
        return token

    def is_loading(self, partition: int, token: int) -> bool:
        return self.loading.get(partition) == token

    def finish_loading(
        self, partition: int, token: int, loader: GroupLoader, now_ms: int
    ) -> int | None:
        """Install what `loader` read; the number of groups, or None if `partition` was
        unloaded (or reloaded) meanwhile and nothing was installed."""
        if self.loading.get(partition) != token:
            return None
        del self.loading[partition]
        self.owned.add(partition)
        names = {g for g, offsets in loader.offsets.items() if offsets} | {
            g for g, v in loader.groups.items() if v is not None
        }
        for group_id in names:
            if self.partition_for(group_id) != partition:
                continue
            group = self._group_from(group_id, loader.groups.get(group_id), now_ms)
            group.offsets = loader.offsets.get(group_id, {})
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member, now_ms)
        loaded = sum(1 for g in self.groups if self.partition_for(g) == partition)
        self._events("groups_loaded", {"partition": partition, "groups": loaded})
        return loaded

    def _group_from(self, group_id: str, value: ot.GroupValue | None, now_ms: int) -> Group:
        group = Group(group_id, state_timestamp_ms=now_ms)
        if value is None:
            return group
        group.protocol_type = value.protocol_type or None
        group.generation = value.generation
        group.protocol = value.protocol
        group.state_timestamp_ms = value.state_timestamp_ms
        for mv in value.members:
            member = Member(
                member_id=mv.member_id,
                group_instance_id=mv.group_instance_id,
                client_id=mv.client_id,
                client_host=mv.client_host,
                rebalance_timeout_ms=mv.rebalance_timeout_ms,
                session_timeout_ms=mv.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", mv.subscription)],
                assignment=mv.assignment,
            )
            group.add(member)
        group.leader = value.leader if value.leader in group.members else group.leader
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    def unload(self, partition: int, now_ms: int) -> int:
        """Stop coordinating `partition`'s groups (leadership moved or the broker stops)."""
        self.loading.pop(partition, None)
        self.owned.discard(partition)
        gone = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in gone:
            self._fail_parked(group, ErrorCode.NOT_COORDINATOR)
            group.transition_to(GroupState.DEAD, now_ms)
            del self.groups[group.group_id]
            self.join_purgatory.check_and_complete(group.group_id, now_ms)
        return len(gone)

    def _status(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # -- JoinGroup -----------------------------------------------------------------
    def join_group(self, request: JoinRequest, now_ms: int, respond: JoinCallback) -> None:
        status = self._status(request.group_id)
        if status is not ErrorCode.NONE:
            respond(_join_error(status, request.member_id))
            return
        cfg = self.config
        if (
            not cfg.min_session_timeout_ms
            <= request.session_timeout_ms
            <= (cfg.max_session_timeout_ms)
        ):
            respond(_join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id))
            return
        unknown = request.member_id == UNKNOWN_MEMBER
        group = self.groups.get(request.group_id)
        if group is None:
            if not unknown:
                respond(_join_error(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id))
                return
            group = Group(request.group_id, state_timestamp_ms=now_ms)
            self.groups[request.group_id] = group
        if self._group_full(group, request):
            respond(_join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, request.member_id))
            return
        if group.is_state(GroupState.DEAD):
            respond(_join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id))
            return
        if not group.supports(request.protocol_type, request.protocols):
            respond(_join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
            return
        if unknown:
            self._join_unknown(group, request, now_ms, respond)
        else:
            self._join_known(group, request, now_ms, respond)

    def _group_full(self, group: Group, request: JoinRequest) -> bool:
        if len(group.members) + len(group.pending_members) < self.config.max_size:
            return False
        if request.member_id == UNKNOWN_MEMBER:
            return group.static_member_id(request.group_instance_id) is None
        return not group.has(request.member_id) and request.member_id not in group.pending_members

    def _join_unknown(
        self, group: Group, request: JoinRequest, now_ms: int, respond: JoinCallback
    ) -> None:
        new_id = f"{request.client_id or 'member'}-{uuid.uuid4()}"
        instance = request.group_instance_id
        if instance is not None:
            old_id = group.static_member_id(instance)
            if old_id is not None:
                self._rejoin_static(group, old_id, new_id, request, now_ms, respond)
            else:
                self._add_member_and_rebalance(group, new_id, request, now_ms, respond)
            return
        # KIP-394: hand out an id; the member becomes real when it rejoins with it.
        group.pending_members.add(new_id)
        op = DelayedPendingMember(self, group, new_id, now_ms + request.session_timeout_ms)
        self.heartbeat_purgatory.try_complete_else_watch(op, [(group.group_id, new_id)], now_ms)
        respond(_join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))

    def _join_known(
        self, group: Group, request: JoinRequest, now_ms: int, respond: JoinCallback
    ) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, request, now_ms, respond)
            return
        fenced = self._fenced(group, member_id, request.group_instance_id)
        if fenced is not ErrorCode.NONE:
            respond(_join_error(fenced, member_id))
            return
        member = group.members[member_id]
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request, now_ms, respond)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # A retried join of this generation: answer as the join phase did.
                respond(self._join_answer(group, member))
            else:
                self._update_member_and_rebalance(group, member, request, now_ms, respond)
        else:  # Stable or Empty
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, now_ms, respond)
            else:
                # A follower rejoining a stable group learns the current generation.
                respond(self._join_answer(group, member, with_members=False))

    def _fenced(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            known = group.static_member_id(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _rejoin_static(
        self,
        group: Group,
        old_id: str,
        new_id: str,
        request: JoinRequest,
        now_ms: int,
        respond: JoinCallback,
    ) -> None:
        old = group.members[old_id]
        # The old incarnation's parked answers are fenced.
        if old.join_callback is not None:
            callback, old.join_callback = old.join_callback, None
            callback(_join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        if old.sync_callback is not None:
            callback, old.sync_callback = old.sync_callback, None
            callback(_sync_answer(ErrorCode.FENCED_INSTANCE_ID))
        self.heartbeat_purgatory.check_and_complete((group.group_id, old_id), now_ms)
        member = group.replace_static_member(request.group_instance_id, old_id, new_id)
        member.client_id, member.client_host = request.client_id, request.client_host
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if group.is_state(GroupState.STABLE) and member.matches(request.protocols):
            # KIP-345: a returning static member keeps its assignment, no rebalance.
            self._schedule_heartbeat(group, member, now_ms)
            self._store_group_quietly(group, now_ms)
            respond(self._join_answer(group, member, with_members=False))
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            member.protocols = list(request.protocols)
            self._schedule_heartbeat(group, member, now_ms)
            respond(self._join_answer(group, member))
        else:
            member.protocols = list(request.protocols)
            member.join_callback = respond
            self._maybe_prepare_rebalance(group, now_ms, f"static member {new_id} rejoined")
            self.join_purgatory.check_and_complete(group.group_id, now_ms)

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        request: JoinRequest,
        now_ms: int,
        respond: JoinCallback,
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=list(request.protocols),
            is_new=True,
        )
        group.add(member, respond)
        # Pending-member expiry is done with; a new member that never finishes joining
        # goes after NewMemberJoinTimeoutMs.
        self.heartbeat_purgatory.check_and_complete((group.group_id, member_id), now_ms)
        group.new_member_added = True
        self._schedule_heartbeat(group, member, now_ms, timeout_ms=NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, now_ms, f"member {member_id} joined")
        self.join_purgatory.check_and_complete(group.group_id, now_ms)

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        request: JoinRequest,
        now_ms: int,
        respond: JoinCallback,
    ) -> None:
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        if member.join_callback is not None and member.join_callback is not respond:
            # A second join while one is parked: the older one is answered as superseded.
            old, member.join_callback = member.join_callback, None
            old(_join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_callback = respond
        self._maybe_prepare_rebalance(group, now_ms, f"member {member.member_id} rejoined")
        self.join_purgatory.check_and_complete(group.group_id, now_ms)

    def _maybe_prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, now_ms, reason)

    def _prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._fail_sync(group, ErrorCode.REBALANCE_IN_PROGRESS)
        timeout = group.max_rebalance_timeout_ms()
        delay = min(self.config.initial_rebalance_delay_ms, timeout)
        if group.is_state(GroupState.EMPTY) and delay > 0:
            op: DelayedJoin = InitialDelayedJoin(
                self, group, now_ms + delay, delay, max(0, timeout - delay)
            )
        else:
            op = DelayedJoin(self, group, now_ms + timeout)
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        log.info(
            "group %s: preparing to rebalance (generation %d): %s",
            group.group_id,
            group.generation,
            reason,
        )
        self._events(
            "group_rebalance",
            {"group": group.group_id, "generation": group.generation, "reason": reason},
        )
        self.join_purgatory.try_complete_else_watch(op, [group.group_id], now_ms)

    # -- the join phase completes --------------------------------------------------
    def can_complete_join(self, group: Group) -> bool:
        if group.is_state(GroupState.DEAD):
            return True
        return group.is_state(GroupState.PREPARING_REBALANCE) and group.all_members_joined()

    def on_initial_join_delay(self, op: InitialDelayedJoin) -> None:
        group = op.group
        now = op.completed_ms
        if (
            group.is_state(GroupState.PREPARING_REBALANCE)
            and group.new_member_added
            and op.remaining_ms > 0
        ):
            group.new_member_added = False
            delay = min(op.delay_ms, op.remaining_ms)
            again = InitialDelayedJoin(
                self, group, now + delay, op.delay_ms, max(0, op.remaining_ms - delay)
            )
            self.join_purgatory.try_complete_else_watch(again, [group.group_id], now)
            return
        self.on_complete_join(group, now)

    def on_complete_join(self, group: Group, now_ms: int) -> None:
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return  # unloaded or deleted meanwhile
        for member in group.not_yet_rejoined():
            log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
            self._remove_member(group, member, now_ms)
        group.pending_members.clear()
        if group.leader is None or not group.has(group.leader):
            group.leader = next(iter(group.members), None)
        group.generation += 1
        self.stats.rebalances += 1
        if not group.members:
            group.protocol = None
            group.transition_to(GroupState.EMPTY, now_ms)
            self._store_group_quietly(group, now_ms)
            log.info("group %s: generation %d is empty", group.group_id, group.generation)
            return
        group.protocol = group.select_protocol()
        group.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        log.info(
            "group %s: generation %d with %d member(s), protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol,
            group.leader,
        )
        for member in list(group.members.values()):
            answer = self._join_answer(group, member)
            callback, member.join_callback = member.join_callback, None
            member.is_new = False
            self._schedule_heartbeat(group, member, now_ms)
            if callback is not None:
                callback(answer)

    def _join_answer(
        self, group: Group, member: Member, *, with_members: bool = True
    ) -> m.JoinGroupResponse:
        members = []
        if with_members and group.is_leader(member.member_id):
            members = [
                m.JoinGroupResponseMember(
                    member_id=other.member_id,
                    group_instance_id=other.group_instance_id,
                    metadata=other.metadata_for(group.protocol),
                )
                for other in group.members.values()
            ]
        return m.JoinGroupResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            generation_id=group.generation,
            protocol_name=group.protocol,
            leader=group.leader or "",
            member_id=member.member_id,
            members=members,
        )

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
        status = self._status(group_id)
        if status is not ErrorCode.NONE:
            respond(_sync_answer(status))
            return
        group = self.groups.get(group_id)
        if group is None:
            respond(_sync_answer(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if group.is_state(GroupState.DEAD):
            respond(_sync_answer(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        fenced = self._fenced(group, member_id, group_instance_id)
        if fenced is not ErrorCode.NONE:
            respond(_sync_answer(fenced))
            return
        if generation != group.generation:
            respond(_sync_answer(ErrorCode.ILLEGAL_GENERATION))
            return
        member = group.members[member_id]
        if group.is_state(GroupState.EMPTY):
            respond(_sync_answer(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            respond(_sync_answer(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_state(GroupState.STABLE):
            self._schedule_heartbeat(group, member, now_ms)
            respond(_sync_answer(ErrorCode.NONE, member.assignment))
        else:  # CompletingRebalance
            if member.sync_callback is not None and member.sync_callback is not respond:
                old, member.sync_callback = member.sync_callback, None
                old(_sync_answer(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_callback = respond
            self._schedule_heartbeat(group, member, now_ms)
            if group.is_leader(member_id):
                full = {mid: assignments.get(mid, b"") for mid in group.members}
                self._store_assignment(group, full, now_ms)

    def _store_assignment(self, group: Group, assignment: dict[str, bytes], now_ms: int) -> None:
        generation = group.generation

        def stored(code: ErrorCode) -> None:
            if group.state is not GroupState.COMPLETING_REBALANCE or group.generation != (
                generation
            ):
                return  # a newer rebalance or an unload took over
            if code is not ErrorCode.NONE:
                self._fail_sync(group, append_error(code))
                self._maybe_prepare_rebalance(group, now_ms, f"storing the assignment: {code.name}")
                return
            for member_id, member in group.members.items():
                member.assignment = assignment.get(member_id, b"")
                callback, member.sync_callback = member.sync_callback, None
                if callback is not None:
                    callback(_sync_answer(ErrorCode.NONE, member.assignment))
            group.transition_to(GroupState.STABLE, now_ms)
            self._events(
                "group_stable",
                {
                    "group": group.group_id,
                    "generation": group.generation,
                    "members": len(group.members),
                },
            )

        self._write_group(group, assignment, now_ms, stored)

    def _fail_sync(self, group: Group, code: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            callback, member.sync_callback = member.sync_callback, None
            if callback is not None:
                callback(_sync_answer(code))

    def _fail_parked(self, group: Group, code: ErrorCode) -> None:
        for member in group.members.values():
            callback, member.join_callback = member.join_callback, None
            if callback is not None:
                callback(_join_error(code, member.member_id))
        self._fail_sync(group, code)

    # -- Heartbeat and LeaveGroup --------------------------------------------------
    def heartbeat(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        status = self._status(group_id)
        if status is not ErrorCode.NONE:
            return status
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        fenced = self._fenced(group, member_id, group_instance_id)
        if fenced is not ErrorCode.NONE:
            return fenced
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_heartbeat(group, group.members[member_id], now_ms)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove each (member id, instance id); a top-level error and one per member."""
        status = self._status(group_id)
        if status is not ErrorCode.NONE:
            return status, []
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in members]
        results = []
        for member_id, instance_id in members:
            if instance_id is not None and member_id == UNKNOWN_MEMBER:
                member_id = group.static_member_id(instance_id) or UNKNOWN_MEMBER
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.heartbeat_purgatory.check_and_complete((group_id, member_id), now_ms)
                self.join_purgatory.check_and_complete(group_id, now_ms)
                results.append(ErrorCode.NONE)
                continue
            fenced = self._fenced(group, member_id, instance_id)
            if fenced is not ErrorCode.NONE:
                results.append(fenced)
                continue
            member = group.members[member_id]
            log.info("group %s: member %s left", group_id, member_id)
            self._remove_member_and_update(group, member, now_ms, "member left")
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    # -- liveness --------------------------------------------------------------------
    def _schedule_heartbeat(
        self, group: Group, member: Member, now_ms: int, *, timeout_ms: int | None = None
    ) -> None:
        member.latest_heartbeat_ms = now_ms
        member.heartbeat_satisfied = True
        key = (group.group_id, member.member_id)
        self.heartbeat_purgatory.check_and_complete(key, now_ms)
        member.heartbeat_satisfied = False
        deadline = now_ms + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        op = DelayedHeartbeat(self, group, member, deadline)
        self.heartbeat_purgatory.try_complete_else_watch(op, [key], now_ms)

    def heartbeat_satisfied(self, member: Member) -> bool:
        if member.is_new:
            return member.heartbeat_satisfied
        return member.heartbeat_satisfied or member.awaiting_join or member.awaiting_sync

    def on_heartbeat_expired(self, group: Group, member: Member, now_ms: int) -> None:
        if group.members.get(member.member_id) is not member or group.is_state(GroupState.DEAD):
            return
        if self.heartbeat_satisfied(member):
            return
        log.info(
            "group %s: member %s expired (no heartbeat in %d ms)",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self.stats.expired_members += 1
        self._remove_member_and_update(group, member, now_ms, "session timeout")

    def on_pending_member_expired(self, group: Group, member_id: str, now_ms: int) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.join_purgatory.check_and_complete(group.group_id, now_ms)

    def _remove_member(self, group: Group, member: Member, now_ms: int) -> None:
        callback, member.join_callback = member.join_callback, None
        if callback is not None:
            callback(_join_error(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        sync, member.sync_callback = member.sync_callback, None
        if sync is not None:
            sync(_sync_answer(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        # Its heartbeat op is done with.
        member.heartbeat_satisfied = True
        member.is_new = False
        self.heartbeat_purgatory.check_and_complete((group.group_id, member.member_id), now_ms)

    def _remove_member_and_update(
        self, group: Group, member: Member, now_ms: int, reason: str
    ) -> None:
        self._remove_member(group, member, now_ms)
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now_ms, f"{member.member_id}: {reason}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group.group_id, now_ms)

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

        status = self._status(group_id)
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
            self._store_offsets(group, offsets, now_ms, respond)
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
        self._schedule_heartbeat(group, group.members[member_id], now_ms)
        self._store_offsets(group, offsets, now_ms, respond)

    def _store_offsets(
        self,
        group: Group,
        offsets: dict[tuple[str, int], ot.OffsetValue],
        now_ms: int,
        respond: Callable[[dict[tuple[str, int], ErrorCode]], None],
    ) -> None:
        results: dict[tuple[str, int], ErrorCode] = {}
        valid: dict[tuple[str, int], ot.OffsetValue] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > self.config.metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = value
        if not valid:
            respond(results)
            return
        records: Records = [
            (ot.offset_key(group.group_id, t, p), ot.encode_offset(v))
            for (t, p), v in valid.items()
        ]

        def stored(code: ErrorCode) -> None:
            code = append_error(code)
            if code is ErrorCode.NONE and self.groups.get(group.group_id) is group:
                group.offsets.update(valid)
                self.stats.commits += len(valid)
            results.update({tp: code for tp in valid})
            respond(results)

        self._append(self.partition_for(group.group_id), records, now_ms, stored)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, dict[tuple[str, int], ot.OffsetValue | None]]:
        """Committed offsets of `partitions` (None: all the group has); None: none."""
        status = self._status(group_id)
        if status is not ErrorCode.NONE:
            return status, {}
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(offsets)
        return ErrorCode.NONE, {tp: offsets.get(tp) for tp in partitions}

    def expire_offsets(self, now_ms: int) -> int:
        """KIP-211: drop the offsets of groups empty for `offsets.retention.minutes`
        (per commit for groups that only store offsets); remove groups left with none."""
        retention = self.config.offsets_retention_ms
        expired = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) not in self.owned:
                continue
            if not group.is_state(GroupState.EMPTY):
                continue
            if group.protocol_type:
                gone = list(group.offsets) if now_ms - group.state_timestamp_ms >= retention else []
            else:
                gone = [
                    tp
                    for tp, v in group.offsets.items()
                    if now_ms - v.commit_timestamp_ms >= retention
                ]
            records: Records = [(ot.offset_key(group.group_id, t, p), None) for t, p in gone]
            for tp in gone:
                del group.offsets[tp]
            expired += len(gone)
            if not group.offsets:
                group.transition_to(GroupState.DEAD, now_ms)
                del self.groups[group.group_id]
                records.append((ot.group_key(group.group_id), None))
            if records:
                self._append(self.partition_for(group.group_id), records, now_ms, lambda code: None)
        return expired

    # -- admin: list, describe, delete -----------------------------------------------
    def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[Group]]:
        wanted = {s.lower() for s in states}
        groups = [g for g in self.groups.values() if not wanted or g.state.value.lower() in wanted]
        code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE
        return code, groups

    def describe_group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        status = self._status(group_id)
        if status is not ErrorCode.NONE:
            return status, None
        return ErrorCode.NONE, self.groups.get(group_id)

    def delete_groups(
        self,
        group_ids: list[str],
        now_ms: int,
        respond: Callable[[dict[str, ErrorCode]], None],
    ) -> None:
        results: dict[str, ErrorCode] = {}
        writes: dict[int, Records] = {}
        for group_id in group_ids:
            status = self._status(group_id)
            group = self.groups.get(group_id)
            if status is not ErrorCode.NONE:
                results[group_id] = status
            elif group is None or group.is_state(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_state(GroupState.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                group.transition_to(GroupState.DEAD, now_ms)
                del self.groups[group_id]
                records = writes.setdefault(self.partition_for(group_id), [])
                records.extend((ot.offset_key(group_id, t, p), None) for t, p in group.offsets)
                records.append((ot.group_key(group_id), None))
                results[group_id] = ErrorCode.NONE
                self._events("group_deleted", {"group": group_id})
        pending = len(writes)
        if not pending:
            respond(results)
            return

        def written(code: ErrorCode) -> None:
            nonlocal pending
            pending -= 1
            if code is not ErrorCode.NONE:
                log.warning("deleting groups: tombstones not written: %s", code.name)
            if pending == 0:
                respond(results)

        for partition, records in writes.items():
            self._append(partition, records, now_ms, written)

    # -- persistence -------------------------------------------------------------------
    def _write_group(
        self,
        group: Group,
        assignment: dict[str, bytes],
        now_ms: int,
        done: Callable[[ErrorCode], None],
    ) -> None:
        value = ot.GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol,
            leader=group.leader,
            state_timestamp_ms=now_ms,
            members=tuple(
                ot.MemberValue(
                    member_id=mem.member_id,
                    group_instance_id=mem.group_instance_id,
                    client_id=mem.client_id,
                    client_host=mem.client_host,
                    rebalance_timeout_ms=mem.rebalance_timeout_ms,
                    session_timeout_ms=mem.session_timeout_ms,
                    subscription=mem.metadata_for(group.protocol),
                    assignment=assignment.get(mem.member_id, b""),
                )
                for mem in group.members.values()
            ),
        )
        records: Records = [(ot.group_key(group.group_id), ot.encode_group(value))]
        self._append(self.partition_for(group.group_id), records, now_ms, done)

    def _store_group_quietly(self, group: Group, now_ms: int) -> None:
        assignment = {mid: mem.assignment for mid, mem in group.members.items()}

        def done(code: ErrorCode) -> None:
            if code is not ErrorCode.NONE:
                log.warning("group %s: metadata not stored: %s", group.group_id, code.name)

        self._write_group(group, assignment, now_ms, done)

    # -- the shell's timer -------------------------------------------------------------
    def expire_due(self, now_ms: int) -> int:
        return self.join_purgatory.expire_due(now_ms) + self.heartbeat_purgatory.expire_due(now_ms)

    def next_deadline_ms(self) -> int | None:
        deadlines = [
            d
            for d in (
                self.join_purgatory.next_deadline_ms(),
                self.heartbeat_purgatory.next_deadline_ms(),
            )
            if d is not None
        ]
        return min(deadlines) if deadlines else None

    def counts_by_state(self) -> dict[str, int]:
        counts = {state.value: 0 for state in GroupState if state is not GroupState.DEAD}
        for group in self.groups.values():
            if group.state.value in counts:
                counts[group.state.value] += 1
        return counts

    def shutdown(self, now_ms: int) -> None:
        for partition in list(self.owned | set(self.loading)):
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
