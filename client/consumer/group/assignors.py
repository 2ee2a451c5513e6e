"""Partition assignors: how a group's leader splits the subscribed partitions among members.

Every assignor has a `name` (the JoinGroup protocol name: "range", "roundrobin",
"sticky", as Kafka's) and `assign(metadata, subscriptions) -> {member_id: Assignment}`:
`metadata` maps each existing topic to its partition count, `subscriptions` maps member
ids to their decoded `Subscription`s. Every member gets an entry (maybe empty); topics
missing from `metadata` are skipped; a partition only goes to a member subscribed to its
topic. `subscription_user_data(previous, generation)` is what a member puts in its
subscription's user data (only the sticky assignor uses it). They are pure functions of
their arguments (deterministic, no I/O), ordering members as Kafka's `MemberInfo` does:
static members (with a group.instance.id) first, by instance id, then the others by
member id, so a static member that rejoins under a new member id keeps its place.

- range (Kafka's RangeAssignor, seed 002): per topic, the partitions in order and its
  subscribers in order; each member gets `n // c` consecutive partitions and the first
  `n % c` members one more (10 partitions, 3 members: 4/3/3).
- roundrobin (Kafka's RoundRobinAssignor): all subscribed topic-partitions sorted, dealt
  to the members in a circle, skipping a member not subscribed to the partition's topic.
- sticky (Kafka's StickyAssignor goals, a simpler algorithm): balanced (no partition can
  move to another member subscribed to its topic that has at least two fewer
  partitions, so members with the same subscriptions differ by at most one) with
  minimal movement: a partition stays with its previous owner when that owner is still a
  member and still subscribed, unless balance needs it elsewhere. The previous owner is
  a member's `owned_partitions`, or (eager members, which revoke everything before
  joining, as Kafka's eager StickyAssignor) the previous assignment in its user data,
  with the generation it was assigned in: the highest generation's claim wins and two
  claims in the same generation cancel (the partition is treated as unowned).
  Steps: keep valid claims; hand unowned partitions, the most constrained first, to the
  least loaded eligible member; then while some member has two more partitions than an
  eligible member of one of its partitions, move one over (from the most loaded first,
  preferring partitions it did not own before). No partition moves twice, so with equal
  subscriptions the number of moved partitions is the fewest balance allows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from client.protocol.consumer_protocol import (
    NO_GENERATION,
    Assignment,
    ConsumerProtocolError,
    StickyUserData,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from client.protocol.types import TopicPartition


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, metadata: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]: ...

    def subscription_user_data(
        self, previous: Iterable[TopicPartition], generation: int
    ) -> bytes | None: ...


def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in Kafka's MemberInfo order: static members by instance id, then the
    dynamic ones by member id."""

    def key(member_id: str) -> tuple[int, str, str]:
        instance = subscriptions[member_id].group_instance_id
        return (0, instance, member_id) if instance is not None else (1, "", member_id)

    return sorted(subscriptions, key=key)


def _subscribers(
    metadata: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> dict[str, list[str]]:
    """Existing topic -> its subscribers, in member order."""
    out: dict[str, list[str]] = {}
    for member in member_order(subscriptions):
        for topic in dict.fromkeys(subscriptions[member].topics):
            if topic in metadata:
                out.setdefault(topic, []).append(member)
    return out


def _as_assignments(
    subscriptions: Mapping[str, Subscription], owned: Mapping[str, Iterable[TopicPartition]]
) -> dict[str, Assignment]:
    return {m: Assignment(tuple(sorted(owned.get(m, ())))) for m in subscriptions}


class _NoUserData:
    def subscription_user_data(
        self, previous: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        return None


class RangeAssignor(_NoUserData):
    name = "range"

    def assign(
        self, metadata: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic, members in sorted(_subscribers(metadata, subscriptions).items()):
            count = metadata[topic]
            per_member, extra = divmod(count, len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                owned[member] += [TopicPartition(topic, p) for p in range(start, start + length)]
        return _as_assignments(subscriptions, owned)


class RoundRobinAssignor(_NoUserData):
    name = "roundrobin"

    def assign(
        self, metadata: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = member_order(subscriptions)
        topics_of = {m: set(subscriptions[m].topics) for m in members}
        subscribed = _subscribers(metadata, subscriptions)
        turn = 0
        for topic in sorted(subscribed):
            for partition in range(metadata[topic]):
                while topic not in topics_of[members[turn % len(members)]]:
                    turn += 1
                owned[members[turn % len(members)]].append(TopicPartition(topic, partition))
                turn += 1
        return _as_assignments(subscriptions, owned)


class StickyAssignor:
    name = "sticky"

    def subscription_user_data(
        self, previous: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        return encode_sticky_user_data(StickyUserData(tuple(previous), generation))

    def assign(
        self, metadata: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        order = member_order(subscriptions)
        rank = {m: i for i, m in enumerate(order)}
        subscribed = _subscribers(metadata, subscriptions)
        eligible: dict[TopicPartition, list[str]] = {
            TopicPartition(topic, p): members
            for topic, members in subscribed.items()
            for p in range(metadata[topic])
        }
        owned: dict[str, set[TopicPartition]] = {m: set() for m in order}
        owner: dict[TopicPartition, str] = {}
        for tp, member in _previous_owners(subscriptions).items():
            if member in eligible.get(tp, ()):
                owned[member].add(tp)
                owner[tp] = member
        kept = {m: frozenset(parts) for m, parts in owned.items()}

        # Unowned partitions, the most constrained first, to the least loaded member.
        for tp in sorted(
            (tp for tp in eligible if tp not in owner), key=lambda tp: (len(eligible[tp]), tp)
        ):
            member = min(eligible[tp], key=lambda m: (len(owned[m]), rank[m]))
            owned[member].add(tp)
            owner[tp] = member

        # Balance: move from the most loaded to a much less loaded eligible member.
        while (move := _find_move(order, rank, owned, eligible, kept)) is not None:
            tp, source, target = move
            owned[source].remove(tp)
            owned[target].add(tp)
        return _as_assignments(subscriptions, owned)


def _previous_owners(subscriptions: Mapping[str, Subscription]) -> dict[TopicPartition, str]:
    """Each claimed partition's owner: the claim of the highest generation; two claims in
    that same generation cancel out."""
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member, subscription in subscriptions.items():
        partitions, generation = _claim(subscription)
        for tp in set(partitions):
            current = best.get(tp)
            if current is None or generation > current[0]:
                best[tp] = (generation, [member])
            elif generation == current[0]:
                current[1].append(member)
    return {tp: members[0] for tp, (_, members) in best.items() if len(members) == 1}


def _claim(subscription: Subscription) -> tuple[Sequence[TopicPartition], int]:
    """What a member says it had, and in which generation: owned_partitions, else the
    previous assignment in sticky user data; generation from the user data if any."""
    data = StickyUserData()
    if subscription.user_data:
        try:
            data = decode_sticky_user_data(subscription.user_data)
        except ConsumerProtocolError:
            data = StickyUserData()  # another assignor's user data: no claim from it
    partitions = subscription.owned_partitions or data.previous_assignment
    return partitions, data.generation if data.generation >= 0 else NO_GENERATION


def _find_move(
    order: list[str],
    rank: Mapping[str, int],
    owned: Mapping[str, set[TopicPartition]],
    eligible: Mapping[TopicPartition, list[str]],
    kept: Mapping[str, frozenset[TopicPartition]],
) -> tuple[TopicPartition, str, str] | None:
    """A partition to move from a member to an eligible one with two fewer partitions,
    from the most loaded member first; None when balanced."""
    by_load = sorted(order, key=lambda m: (-len(owned[m]), rank[m]))
    lightest = len(owned[by_load[-1]])
    for source in by_load:
        load = len(owned[source])
        if load - lightest < 2:
            return None
        # Partitions it did not own before move first.
        candidates = sorted(owned[source], key=lambda tp: (tp in kept[source], tp))
        for tp in candidates:
            targets = [m for m in eligible[tp] if len(owned[m]) <= load - 2]
            if targets:
                target = min(targets, key=lambda m: (len(owned[m]), rank[m]))
                return tp, source, target
    return None


ASSIGNORS: dict[str, PartitionAssignor] = {
    a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor())
}


def assignor_for(name_or_assignor: str | PartitionAssignor) -> PartitionAssignor:
    """The assignor of that name (or the object itself); `ValueError` for unknown names."""
    if not isinstance(name_or_assignor, str):
        return name_or_assignor
    try:
        return ASSIGNORS[name_or_assignor]
    except KeyError:
        known = ", ".join(sorted(ASSIGNORS))
        raise ValueError(
            f"unknown partition assignment strategy {name_or_assignor!r} (known: {known})"
        ) from None
