"""The group membership state machine: joins, rebalances, syncs and member liveness
(the protocol half of Kafka 2.8's `GroupCoordinator`), sans-IO.

How it works: `coordinator.py` checks each request (ownership, known group and member,
generation, fencing) and hands the group to this class, which moves it through its states
(`group.py`) and answers the members' parked callbacks:

- Rebalance (eager protocol): a JoinGroup parks its answer on the member; the group goes
  to PreparingRebalance and a `DelayedJoin` waits until every member has rejoined or the
  rebalance timeout passes (members that did not rejoin are removed). Then a new
  generation starts: the protocol is chosen by vote, the leader's answer carries every
  member's subscription, and the group waits in CompletingRebalance for the leader's
  SyncGroup, whose assignment is written to the partition (acks=all,
  `metadata_manager.py`) before every member gets its share and the group is Stable. An
  empty group's first rebalance waits `group.initial.rebalance.delay.ms` for more
  members (`InitialDelayedJoin`). Dynamic members that did not rejoin in time are
  removed when the join phase ends; static ones stay, their session decides (Kafka 2.8).
  Every member must then send SyncGroup within the rebalance timeout (`DelayedSync`,
  KAFKA-12890), or it is removed and the group rebalances.
- Liveness: each member has a `DelayedHeartbeat` for its session timeout; a heartbeat,
  commit or Stable sync completes it and schedules the next (`schedule_heartbeat`). A
  member waiting for its JoinGroup or SyncGroup answer counts as alive, so every such
  answer re-arms the member's session as it goes out (Kafka's onCompleteJoin and
  propagateAssignment): the end of a join phase re-arms every member, and a member that
  falls silent after any answer is expired one session later, removed, and the group
  rebalances (a parked SyncGroup then gets REBALANCE_IN_PROGRESS).
- KIP-394: a first join without a member id gets MEMBER_ID_REQUIRED and an id, and is
  only *pending* (a `DelayedPendingMember` forgets it after its session timeout) until
  it rejoins with it. KIP-345: a static member (`group_instance_id`) that comes back
  gets a new member id and, if the group is Stable, its old assignment without a
  rebalance; the old id is fenced (FENCED_INSTANCE_ID).

The delayed operations (`delayed.py`) call back `can_complete_join`, `on_complete_join`,
`on_initial_join_delay`, `all_synced`, `on_sync_expired`, `heartbeat_satisfied`,
`on_heartbeat_expired` and `on_pending_member_expired`; both purgatories live here (the
join purgatory holds the `DelayedSync`s too).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker.core.group.config import CoordinatorStats, GroupConfig
from broker.core.group.delayed import (
    DelayedHeartbeat,
    DelayedJoin,
    DelayedPendingMember,
    DelayedSync,
    InitialDelayedJoin,
    sync_key,
)
from broker.core.group.group import Group, GroupState, Member
from broker.core.group.metadata_manager import GroupMetadataManager, append_error
from broker.core.purgatory import Purgatory
from client.protocol import messages as m
from client.protocol.errors import ErrorCode

__all__ = [
    "NEW_MEMBER_JOIN_TIMEOUT_MS",
    "NO_GENERATION",
    "UNKNOWN_MEMBER",
    "GroupMembership",
    "JoinCallback",
    "JoinRequest",
    "SyncCallback",
    "join_error",
    "sync_answer",
]

log = logging.getLogger(__name__)

UNKNOWN_MEMBER = ""
NO_GENERATION = -1
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member that never rejoins goes.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


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
    supports_skip_assignment: bool = False  # KIP-814 (Kafka JoinGroup v9+)


JoinCallback = Callable[[m.JoinGroupResponse], None]
SyncCallback = Callable[[m.SyncGroupResponse], None]


def join_error(code: ErrorCode, member_id: str = UNKNOWN_MEMBER) -> m.JoinGroupResponse:
    return m.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=code,
        generation_id=NO_GENERATION,
        protocol_name=None,
        leader="",
        member_id=member_id,
        members=[],
    )


def sync_answer(code: ErrorCode, assignment: bytes = b"") -> m.SyncGroupResponse:
    return m.SyncGroupResponse(throttle_time_ms=0, error_code=code, assignment=assignment)


def join_answer(
    group: Group,
    member: Member,
    *,
    with_members: bool = True,
    leader: str | None = None,
    skip_assignment: bool = False,
) -> m.JoinGroupResponse:
    """The JoinGroup answer to `member` in `group`'s current generation: with every
    member's metadata if it leads (and `with_members`); `leader` names another leader
    than the group's (the old id a pre-KIP-814 static leader is told on its return)."""
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
        leader=(group.leader if leader is None else leader) or "",
        member_id=member.member_id,
        members=members,
        skip_assignment=skip_assignment,
    )


class GroupMembership:
    """Members joining, rebalancing, syncing and expiring, group by group."""

    def __init__(
        self,
        config: GroupConfig,
        metadata: GroupMetadataManager,
        stats: CoordinatorStats,
        events: Callable[[str, dict], None],
        wake_at: Callable[[int], None] | None,
    ) -> None:
        self.config = config
        self._metadata = metadata
        self._stats = stats
        self._events = events
        self.join_purgatory = Purgatory("Rebalance", wake_at)
        self.heartbeat_purgatory = Purgatory("Heartbeat", wake_at)

    # -- JoinGroup -----------------------------------------------------------------
    def join(self, group: Group, request: JoinRequest, now_ms: int, respond: JoinCallback) -> None:
        """A JoinGroup the coordinator checked (the group exists, accepts the protocol)."""
        if request.member_id == UNKNOWN_MEMBER:
            self._join_unknown(group, request, now_ms, respond)
        else:
            self._join_known(group, request, now_ms, respond)

    def _join_unknown(
        self, group: Group, request: JoinRequest, now_ms: int, respond: JoinCallback
    ) -> None:
        new_id = f"{request.client_id or 'member'}-{uuid.uuid4()}"
        instance = request.group_instance_id
        if instance is not None:
            old_id = group.static_member_id(instance)
            if old_id is not None:
                self._rejoin_static(group, instance, old_id, new_id, request, now_ms, respond)
            else:
                self._add_member_and_rebalance(group, new_id, request, now_ms, respond)
            return
        # KIP-394: hand out an id; the member becomes real when it rejoins with it.
        group.pending_members.add(new_id)
        op = DelayedPendingMember(self, group, new_id, now_ms + request.session_timeout_ms)
        self.heartbeat_purgatory.try_complete_else_watch(op, [(group.group_id, new_id)], now_ms)
        respond(join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))

    def _join_known(
        self, group: Group, request: JoinRequest, now_ms: int, respond: JoinCallback
    ) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, request, now_ms, respond)
            return
        fenced = self.fenced(group, member_id, request.group_instance_id)
        if fenced is not ErrorCode.NONE:
            respond(join_error(fenced, member_id))
            return
        member = group.members[member_id]
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request, now_ms, respond)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # A retried join of this generation: answer as the join phase did.
                respond(join_answer(group, member))
            else:
                self._update_member_and_rebalance(group, member, request, now_ms, respond)
        else:  # Stable or Empty
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, now_ms, respond)
            else:
                # A follower rejoining a stable group learns the current generation.
                respond(join_answer(group, member, with_members=False))

    def fenced(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        """FENCED_INSTANCE_ID (another member holds the instance id), UNKNOWN_MEMBER_ID,
        or NONE."""
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
        instance_id: str,
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
            callback(join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        if old.sync_callback is not None:
            callback, old.sync_callback = old.sync_callback, None
            callback(sync_answer(ErrorCode.FENCED_INSTANCE_ID))
        leader_before = group.leader
        member = group.replace_static_member(instance_id, old_id, new_id)
        # The old id's session wait ends without effect; the new id gets a session.
        self.heartbeat_purgatory.check_and_complete((group.group_id, old_id), now_ms)
        member.client_id, member.client_host = request.client_id, request.client_host
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.schedule_heartbeat(group, member, now_ms)
        if group.is_state(GroupState.STABLE) and member.matches(request.protocols):
            # KIP-345: a returning static member keeps its assignment, no rebalance. A
            # returning leader must not reassign (its SyncGroup would not be propagated in
            # a stable group): KIP-814 clients are told they lead with skip_assignment;
            # older ones are told the old leader id, so they do not think they lead.
            self._metadata.store_group_quietly(group, now_ms)
            skip = request.supports_skip_assignment and group.is_leader(new_id)
            respond(
                join_answer(
                    group,
                    member,
                    with_members=skip,
                    leader=None if request.supports_skip_assignment else leader_before,
                    skip_assignment=skip,
                )
            )
        else:
            # In CompletingRebalance too (as Kafka): the leader may be assigning to the old
            # id already, so the generation is redone with the new one.
            member.protocols = list(request.protocols)
            member.join_callback = respond
            self.maybe_prepare_rebalance(group, now_ms, f"static member {new_id} rejoined")
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
        self.schedule_heartbeat(group, member, now_ms, timeout_ms=NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.maybe_prepare_rebalance(group, now_ms, f"member {member_id} joined")
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
            old(join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_callback = respond
        self.maybe_prepare_rebalance(group, now_ms, f"member {member.member_id} rejoined")
        self.join_purgatory.check_and_complete(group.group_id, now_ms)

    def maybe_prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, now_ms, reason)

    def _prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._fail_sync(group, ErrorCode.REBALANCE_IN_PROGRESS, now_ms)
        group.pending_sync.clear()
        self.join_purgatory.check_and_complete(sync_key(group.group_id), now_ms)
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
            if member.group_instance_id is None:  # static members stay: their session decides
                log.info(
                    "group %s: member %s did not rejoin in time", group.group_id, member.member_id
                )
                self._remove_member(group, member, now_ms)
        if group.members and not _elect_joined_leader(group):
            # Only static members that have not rejoined: wait for them (or their expiry).
            log.info("group %s: no member rejoined; waiting again", group.group_id)
            again = DelayedJoin(self, group, now_ms + group.max_rebalance_timeout_ms())
            self.join_purgatory.try_complete_else_watch(again, [group.group_id], now_ms)
            return
        group.pending_members.clear()
        group.generation += 1
        self._stats.rebalances += 1
        if not group.members:
            group.protocol = None
            group.transition_to(GroupState.EMPTY, now_ms)
            self._metadata.store_group_quietly(group, now_ms)
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
        group.pending_sync = set(group.members)
        for member in list(group.members.values()):
            answer = join_answer(group, member)
            callback, member.join_callback = member.join_callback, None
            member.is_new = False
            self.schedule_heartbeat(group, member, now_ms)  # every member's session restarts
            if callback is not None:
                callback(answer)
        sync_wait = DelayedSync(
            self, group, group.generation, now_ms + group.max_rebalance_timeout_ms()
        )
        self.join_purgatory.try_complete_else_watch(sync_wait, [sync_key(group.group_id)], now_ms)

    # -- SyncGroup -----------------------------------------------------------------
    def sync(
        self,
        group: Group,
        member: Member,
        assignments: dict[str, bytes],
        now_ms: int,
        respond: SyncCallback,
    ) -> None:
        """A SyncGroup the coordinator checked (a member of the current generation)."""
        if group.is_state(GroupState.EMPTY):
            respond(sync_answer(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            respond(sync_answer(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_state(GroupState.STABLE):
            self._synced(group, member, now_ms)
            self.schedule_heartbeat(group, member, now_ms)
            respond(sync_answer(ErrorCode.NONE, member.assignment))
        else:  # CompletingRebalance: parked (alive meanwhile) until the assignment is stored
            if member.sync_callback is not None and member.sync_callback is not respond:
                old, member.sync_callback = member.sync_callback, None
                old(sync_answer(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_callback = respond
            self._synced(group, member, now_ms)
            if group.is_leader(member.member_id):
                full = {mid: assignments.get(mid, b"") for mid in group.members}
                self._store_assignment(group, full, now_ms)

    def _synced(self, group: Group, member: Member, now_ms: int) -> None:
        group.pending_sync.discard(member.member_id)
        self.join_purgatory.check_and_complete(sync_key(group.group_id), now_ms)

    def _store_assignment(self, group: Group, assignment: dict[str, bytes], now_ms: int) -> None:
        generation = group.generation

        def stored(code: ErrorCode, now_ms: int) -> None:
            if group.state is not GroupState.COMPLETING_REBALANCE or group.generation != (
                generation
            ):
                return  # a newer rebalance or an unload took over
            if code is not ErrorCode.NONE:
                self._fail_sync(group, append_error(code), now_ms)
                self.maybe_prepare_rebalance(group, now_ms, f"storing the assignment: {code.name}")
                return
            for member_id, member in list(group.members.items()):
                member.assignment = assignment.get(member_id, b"")
                callback, member.sync_callback = member.sync_callback, None
                if callback is not None:
                    # Its session restarts with the answer (Kafka's propagateAssignment).
                    self.schedule_heartbeat(group, member, now_ms)
                    callback(sync_answer(ErrorCode.NONE, member.assignment))
            group.transition_to(GroupState.STABLE, now_ms)
            self._events(
                "group_stable",
                {
                    "group": group.group_id,
                    "generation": group.generation,
                    "members": len(group.members),
                },
            )

        self._metadata.store_group(group, assignment, now_ms, stored)

    def _fail_sync(self, group: Group, code: ErrorCode, rearm_ms: int | None) -> None:
        """Answer every parked SyncGroup with `code`; each answered member's session
        restarts at `rearm_ms` (None: the group is going away)."""
        for member in list(group.members.values()):
            member.assignment = b""
            callback, member.sync_callback = member.sync_callback, None
            if callback is not None:
                if rearm_ms is not None:
                    self.schedule_heartbeat(group, member, rearm_ms)
                callback(sync_answer(code))

    # -- loading and unloading -------------------------------------------------------
    def group_loaded(self, group: Group, now_ms: int) -> None:
        """A group read from its partition: each member gets a fresh session."""
        for member in group.members.values():
            self.schedule_heartbeat(group, member, now_ms)

    def group_unloaded(self, group: Group, now_ms: int) -> None:
        """Another broker coordinates `group` now: parked answers get NOT_COORDINATOR."""
        for member in group.members.values():
            callback, member.join_callback = member.join_callback, None
            if callback is not None:
                callback(join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
        self._fail_sync(group, ErrorCode.NOT_COORDINATOR, None)
        group.transition_to(GroupState.DEAD, now_ms)
        self.join_purgatory.check_and_complete(group.group_id, now_ms)
        self.join_purgatory.check_and_complete(sync_key(group.group_id), now_ms)
        for member_id in group.members:  # their session waits end with the group
            self.heartbeat_purgatory.check_and_complete((group.group_id, member_id), now_ms)

    # -- liveness --------------------------------------------------------------------
    def schedule_heartbeat(
        self, group: Group, member: Member, now_ms: int, *, timeout_ms: int | None = None
    ) -> None:
        """Complete `member`'s heartbeat wait and start the next one."""
        member.latest_heartbeat_ms = now_ms
        member.heartbeat_satisfied = True
        key = (group.group_id, member.member_id)
        self.heartbeat_purgatory.check_and_complete(key, now_ms)
        member.heartbeat_satisfied = False
        deadline = now_ms + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        op = DelayedHeartbeat(self, group, member.member_id, deadline)
        self.heartbeat_purgatory.try_complete_else_watch(op, [key], now_ms)

    def heartbeat_satisfied(self, group: Group, member_id: str) -> bool:
        """Whether `member_id`'s session wait is over: it heartbeated, waits for an
        answer (alive meanwhile), or is no longer in the group (nothing to expire)."""
        member = group.members.get(member_id)
        if member is None or group.is_state(GroupState.DEAD):
            return True
        if member.is_new:  # a new member may be expired while its join waits
            return member.heartbeat_satisfied
        return member.heartbeat_satisfied or member.awaiting_join or member.awaiting_sync

    def on_heartbeat_expired(self, group: Group, member_id: str, now_ms: int) -> None:
        if self.heartbeat_satisfied(group, member_id):
            return
        member = group.members[member_id]
        log.info(
            "group %s: member %s expired (no heartbeat in %d ms)",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self._stats.expired_members += 1
        self.remove_member_and_update(group, member, now_ms, "session timeout")

    def on_pending_member_expired(self, group: Group, member_id: str, now_ms: int) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.join_purgatory.check_and_complete(group.group_id, now_ms)

    def remove_pending_member(self, group: Group, member_id: str, now_ms: int) -> None:
        """A pending member (KIP-394) left before it joined."""
        group.pending_members.discard(member_id)
        self.heartbeat_purgatory.check_and_complete((group.group_id, member_id), now_ms)
        self.join_purgatory.check_and_complete(group.group_id, now_ms)

    def _remove_member(self, group: Group, member: Member, now_ms: int) -> None:
        callback, member.join_callback = member.join_callback, None
        if callback is not None:
            callback(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        sync, member.sync_callback = member.sync_callback, None
        if sync is not None:
            sync(sync_answer(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        # Its session wait is done with (its id is no longer in the group).
        self.heartbeat_purgatory.check_and_complete((group.group_id, member.member_id), now_ms)

    def remove_member_and_update(
        self, group: Group, member: Member, now_ms: int, reason: str
    ) -> None:
        """Remove `member` (left, or expired) and rebalance what is left."""
        self._remove_member(group, member, now_ms)
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, now_ms, f"{member.member_id}: {reason}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group.group_id, now_ms)

    # -- the sync wait (KAFKA-12890) ----------------------------------------------------
    def all_synced(self, group: Group, generation: int) -> bool:
        """Whether `generation`'s sync wait is over (everyone synced, or it is past)."""
        return (
            group.generation != generation
            or not group.is_state(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            or not group.pending_sync
        )

    def on_sync_expired(self, group: Group, generation: int, now_ms: int) -> None:
        if self.all_synced(group, generation):
            return
        missing = sorted(group.pending_sync)
        log.info("group %s: %s sent no SyncGroup in time", group.group_id, ", ".join(missing))
        for member_id in missing:
            self._remove_member(group, group.members[member_id], now_ms)
        self._prepare_rebalance(group, now_ms, f"no SyncGroup from {', '.join(missing)}")

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


def _elect_joined_leader(group: Group) -> bool:
    """Keep the leader if it rejoined, else make one that did the leader (Kafka's
    maybeElectNewJoinedLeader); False if no member rejoined."""
    leader = group.members.get(group.leader) if group.leader is not None else None
    if leader is not None and leader.awaiting_join:
        return True
    joined = next((m for m in group.members.values() if m.awaiting_join), None)
    if joined is None:
        return False
    group.leader = joined.member_id
    return True
