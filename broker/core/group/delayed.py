"""The group coordinator's delayed operations (Kafka's DelayedJoin, InitialDelayedJoin,
DelayedSync, DelayedHeartbeat), held in ordinary `Purgatory`s.

How it works: each operation only knows how to ask the membership state machine
(`membership.py`, described here by the `Membership` protocol so that this module needs
nothing from it) whether it may complete and what to do when it does; the state machine
owns every decision.

- `DelayedJoin` (key: the group) waits for every member to rejoin, at most the group's
  rebalance timeout, then the join phase completes.
- `InitialDelayedJoin` is the first rebalance of an empty group: it always waits
  `group.initial.rebalance.delay.ms`, and again (up to the rebalance timeout) while new
  members keep arriving, so a group starting with many consumers rebalances once.
- `DelayedSync` (key: `sync_key(group)`) waits, at most the group's rebalance timeout
  after a join phase, for every member of the new generation to send SyncGroup
  (KAFKA-12890); those that did not are then removed.
- `DelayedHeartbeat` (key: (group, member id)) expires a member whose heartbeat did not
  come within its session timeout; a heartbeat completes it and schedules the next one.
  It names the member by the id it was armed for: once that id has left the group (the
  member left, was removed, or a restarted static member took a new id) it completes
  without effect.
- `DelayedPendingMember` (key: (group, member)) forgets a KIP-394 pending member that did
  not rejoin within its session timeout.
"""

from __future__ import annotations

from typing import Protocol

from broker.core.group.group import Group
from broker.core.purgatory import DelayedOperation

__all__ = [
    "DelayedHeartbeat",
    "DelayedJoin",
    "DelayedPendingMember",
    "DelayedSync",
    "InitialDelayedJoin",
    "Membership",
    "sync_key",
]


def sync_key(group_id: str) -> tuple[str, str]:
    """The key a group's `DelayedSync` waits under (its `DelayedJoin`'s is the group id)."""
    return ("sync", group_id)


class Membership(Protocol):
    """What the delayed operations ask and tell (`membership.GroupMembership`)."""

    def can_complete_join(self, group: Group) -> bool: ...

    def on_complete_join(self, group: Group, now_ms: int) -> None: ...

    def on_initial_join_delay(self, op: InitialDelayedJoin) -> None: ...

    def all_synced(self, group: Group, generation: int) -> bool: ...

    def on_sync_expired(self, group: Group, generation: int, now_ms: int) -> None: ...

    def heartbeat_satisfied(self, group: Group, member_id: str) -> bool: ...

    def on_heartbeat_expired(self, group: Group, member_id: str, now_ms: int) -> None: ...

    def on_pending_member_expired(self, group: Group, member_id: str, now_ms: int) -> None: ...


class DelayedJoin(DelayedOperation):
    __slots__ = ("membership", "group")

    def __init__(self, membership: Membership, group: Group, deadline_ms: int):
        super().__init__(deadline_ms)
        self.membership = membership
        self.group = group

    def try_complete(self, now_ms: int) -> bool:
        return self.membership.can_complete_join(self.group)

    def on_complete(self) -> None:
        self.membership.on_complete_join(self.group, self.completed_ms)


class InitialDelayedJoin(DelayedJoin):
    __slots__ = ("delay_ms", "remaining_ms")

    def __init__(
        self,
        membership: Membership,
        group: Group,
        deadline_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ):
        super().__init__(membership, group, deadline_ms)
        self.delay_ms = delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self, now_ms: int) -> bool:
        return False  # waits out its delay

    def on_complete(self) -> None:
        self.membership.on_initial_join_delay(self)


class DelayedSync(DelayedOperation):
    __slots__ = ("membership", "group", "generation")

    def __init__(self, membership: Membership, group: Group, generation: int, deadline_ms: int):
        super().__init__(deadline_ms)
        self.membership = membership
        self.group = group
        self.generation = generation

    def try_complete(self, now_ms: int) -> bool:
        return self.membership.all_synced(self.group, self.generation)

    def on_complete(self) -> None:
        if self.expired:
            self.membership.on_sync_expired(self.group, self.generation, self.completed_ms)


class DelayedHeartbeat(DelayedOperation):
    __slots__ = ("membership", "group", "member_id")

    def __init__(self, membership: Membership, group: Group, member_id: str, deadline_ms: int):
        super().__init__(deadline_ms)
        self.membership = membership
        self.group = group
        self.member_id = member_id

    def try_complete(self, now_ms: int) -> bool:
        return self.membership.heartbeat_satisfied(self.group, self.member_id)

    def on_complete(self) -> None:
        if self.expired:
            self.membership.on_heartbeat_expired(self.group, self.member_id, self.completed_ms)


class DelayedPendingMember(DelayedOperation):
    """A KIP-394 pending member (given an id, not yet rejoined) forgotten after its
    session timeout."""

    __slots__ = ("membership", "group", "member_id")

    def __init__(
        self, membership: Membership, group: Group, member_id: str, deadline_ms: int
    ) -> None:
        super().__init__(deadline_ms)
        self.membership = membership
        self.group = group
        self.member_id = member_id

    def try_complete(self, now_ms: int) -> bool:
        return self.member_id not in self.group.pending_members

    def on_complete(self) -> None:
        if self.expired:
            self.membership.on_pending_member_expired(self.group, self.member_id, self.completed_ms)
