"""A consumer group's state on its coordinator: members, generation, committed offsets.

How it works (Kafka 2.8's `GroupMetadata`/`MemberMetadata`):

- A group moves through `Empty -> PreparingRebalance -> CompletingRebalance -> Stable`
  and back to `PreparingRebalance` whenever membership or subscriptions change; `Dead`
  once it is deleted or its coordinator stops leading its partition. `transition_to`
  refuses a move Kafka does not allow (a bug, not an input error).
- A member is identified by a member id the coordinator hands out; a static member also
  has a `group_instance_id` (KIP-345) that survives restarts: a rejoin with the same
  instance id replaces the old member id. Members joining for the first time without an
  id are only *pending* (KIP-394) until they rejoin with the id they were given.
- During a rebalance each member parks its JoinGroup answer (`join_callback`) and, after
  the join phase, its SyncGroup answer (`sync_callback`); the coordinator calls them.
  `pending_sync` holds the members of the generation that have not sent SyncGroup yet
  (KAFKA-12890: they are removed if they do not within the rebalance timeout).
- `offsets` are the committed offsets, `(topic, partition) -> OffsetValue`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.core.group.offsets_topic import OffsetValue
from client.protocol.consumer_protocol import ConsumerProtocolError, decode_subscription

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.DEAD: {
        GroupState.STABLE,
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.EMPTY,
        GroupState.DEAD,
    },
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {
        GroupState.STABLE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.EMPTY,
    },
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
}


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (assignor name, subscription bytes), preferred first
    assignment: bytes = b""
    join_callback: Callable[[Any], None] | None = None
    sync_callback: Callable[[Any], None] | None = None
    latest_heartbeat_ms: int = -1
    is_new: bool = False
    heartbeat_satisfied: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among `candidates`."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_sync: set[str] = field(default_factory=set)  # not yet synced this generation
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    new_member_added: bool = False

    # -- state ---------------------------------------------------------------------
    def is_state(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    # -- members -------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader == member_id

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether a member of this consumer group subscribes to `topic` (OffsetDelete
        refuses its partitions then). As Kafka's `isSubscribedToTopic`: only a group of
        protocol type "consumer" with members and a chosen protocol is known; any other,
        or one whose subscriptions do not parse, counts as subscribed."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or not self.members or not self.protocol:
            return True
        try:
            return any(
                topic in decode_subscription(member.metadata_for(self.protocol)).topics
                for member in self.members.values()
            )
        except ConsumerProtocolError:
            return True

    def add(self, member: Member, callback: Callable[[Any], None] | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id
        member.join_callback = callback
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.pending_sync.discard(member_id)
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader == member_id:
            self.leader = next(
                (m.member_id for m in self.members.values() if m.awaiting_join),
                next(iter(self.members), None),
            )
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        # Fence the old incarnation's parked answers: it is gone.
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:  # the new incarnation still owes its SyncGroup
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader == old_id:
            self.leader = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -----------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # Most votes wins; ties go to the name first in sort order (deterministic).
        return max(sorted(votes), key=lambda name: votes[name])
