"""The partition assignors (client/consumer/group/assignors.py): seed 002's range example, the
round-robin property, and hypothesis properties of every assignor (each subscribed
partition exactly once, only to a subscriber) and of the sticky one (balanced, and no
partition moves away from a member that stayed unless balance needs it)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

from client.consumer.group.assignors import (
    ASSIGNORS,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for,
)
from client.protocol.consumer_protocol import (
    StickyUserData,
    Subscription,
    encode_sticky_user_data,
)
from client.protocol.types import TopicPartition


def tps(topic: str, *numbers: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(topic, n) for n in numbers)


def parts(result) -> dict[str, tuple[TopicPartition, ...]]:
    return {member: a.partitions for member, a in result.items()}


# --- range ---------------------------------------------------------------------------------


def test_seed_002_range_example_10_partitions_3_consumers_4_3_3():
    subscriptions = {c: Subscription(["test"]) for c in ("C2", "C0", "C1")}
    result = parts(RangeAssignor().assign({"test": 10}, subscriptions))
    assert result == {
        "C0": tps("test", 0, 1, 2, 3),
        "C1": tps("test", 4, 5, 6),
        "C2": tps("test", 7, 8, 9),
    }


def test_range_gives_the_first_member_the_extra_partition_of_every_topic():
    subscriptions = {c: Subscription(["a", "b"]) for c in ("C0", "C1")}
    result = parts(RangeAssignor().assign({"a": 3, "b": 3}, subscriptions))
    assert result == {"C0": tps("a", 0, 1) + tps("b", 0, 1), "C1": tps("a", 2) + tps("b", 2)}


def test_range_orders_static_members_by_instance_id_first():
    subscriptions = {
        "m-a": Subscription(["t"], group_instance_id="z"),
        "m-b": Subscription(["t"], group_instance_id="y"),
        "m-0": Subscription(["t"]),
    }
    result = parts(RangeAssignor().assign({"t": 3}, subscriptions))
    assert result == {"m-b": tps("t", 0), "m-a": tps("t", 1), "m-0": tps("t", 2)}


def test_missing_topics_and_members_without_partitions():
    subscriptions = {"C0": Subscription(["t", "ghost"]), "C1": Subscription(["t"])}
    for assignor in ASSIGNORS.values():
        result = parts(assignor.assign({"t": 1}, subscriptions))
        assert sorted(result) == ["C0", "C1"]
        assert sorted(result["C0"] + result["C1"]) == [TopicPartition("t", 0)]


# --- round robin -----------------------------------------------------------------------------


def test_round_robin_deals_in_a_circle():
    subscriptions = {c: Subscription(["test"]) for c in ("C0", "C1", "C2")}
    result = parts(RoundRobinAssignor().assign({"test": 10}, subscriptions))
    assert result == {
        "C0": tps("test", 0, 3, 6, 9),
        "C1": tps("test", 1, 4, 7),
        "C2": tps("test", 2, 5, 8),
    }


def test_round_robin_skips_members_not_subscribed_to_the_topic():
    subscriptions = {"C0": Subscription(["a"]), "C1": Subscription(["a", "b"])}
    result = parts(RoundRobinAssignor().assign({"a": 2, "b": 2}, subscriptions))
    assert result == {"C0": tps("a", 0), "C1": tps("a", 1) + tps("b", 0, 1)}


@given(
    st.dictionaries(st.sampled_from("abcde"), st.integers(1, 9), min_size=1),
    st.integers(1, 7),
)
def test_round_robin_no_member_is_more_than_one_partition_ahead(metadata, members):
    subscriptions = {f"m{i}": Subscription(sorted(metadata)) for i in range(members)}
    counts = [
        len(a.partitions) for a in RoundRobinAssignor().assign(metadata, subscriptions).values()
    ]
    assert max(counts) - min(counts) <= 1


# --- every assignor ----------------------------------------------------------------------------

TOPICS = ["a", "b", "c", "d"]


@st.composite
def groups(draw, owned: bool = True):
    """(metadata, subscriptions): some topics (one maybe unsubscribed), members with
    random subscriptions (maybe naming a topic that does not exist) and, for the sticky
    assignor, random (possibly conflicting and stale) claims."""
    metadata = draw(st.dictionaries(st.sampled_from(TOPICS), st.integers(1, 8), min_size=1))
    names = draw(st.lists(st.text("xyz0123", min_size=1, max_size=4), min_size=1, max_size=6))
    subscriptions = {}
    for name in dict.fromkeys(names):
        topics = draw(st.lists(st.sampled_from([*TOPICS, "ghost"]), min_size=1, unique=True))
        claims = draw(
            st.lists(st.builds(TopicPartition, st.sampled_from(TOPICS), st.integers(0, 9)))
            if owned
            else st.just([])
        )
        user_data = None
        if draw(st.booleans()):
            generation = draw(st.integers(-1, 3))
            user_data = encode_sticky_user_data(StickyUserData(claims, generation))
            claims = []
        instance = draw(st.none() | st.sampled_from(["i1", "i2", "i3"]))
        subscriptions[name] = Subscription(topics, user_data, claims, group_instance_id=instance)
    return metadata, subscriptions


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(max_examples=200, deadline=None)
@given(group=groups())
def test_every_subscribed_partition_is_assigned_exactly_once_to_a_subscriber(name, group):
    metadata, subscriptions = group
    result = assignor_for(name).assign(metadata, subscriptions)
    assert set(result) == set(subscriptions)
    given_out = [tp for a in result.values() for tp in a.partitions]
    assert len(given_out) == len(set(given_out)), "a partition went to two members"
    wanted = {
        TopicPartition(t, p)
        for s in subscriptions.values()
        for t in s.topics
        if t in metadata
        for p in range(metadata[t])
    }
    assert set(given_out) == wanted
    for member, assignment in result.items():
        for tp in assignment.partitions:
            assert tp.topic in subscriptions[member].topics


# --- sticky --------------------------------------------------------------------------------


def _counts(result) -> dict[str, int]:
    return {m: len(a.partitions) for m, a in result.items()}


@settings(max_examples=200, deadline=None)
@given(group=groups())
def test_sticky_is_balanced(group):
    """No partition can move to another subscriber of its topic that has at least two
    fewer partitions; so members with the same subscriptions differ by at most one."""
    metadata, subscriptions = group
    result = StickyAssignor().assign(metadata, subscriptions)
    counts = _counts(result)
    for member, assignment in result.items():
        for tp in assignment.partitions:
            for other, subscription in subscriptions.items():
                if tp.topic in subscription.topics:
                    assert counts[other] >= counts[member] - 1, (tp, member, other, counts)
    by_topics: dict[frozenset, list[int]] = {}
    for member, subscription in subscriptions.items():
        key = frozenset(t for t in subscription.topics if t in metadata)
        by_topics.setdefault(key, []).append(counts[member])
    for same in by_topics.values():
        assert max(same) - min(same) <= 1


def _minimal_loss(old: dict[str, int], members: int, total: int) -> int:
    """The fewest partitions the members in `old` (count each had) must give up so that
    `members` members hold `total` partitions within one of each other: the ceilings go to
    those that had the most."""
    floor, ceilings = divmod(total, members)
    loss = 0
    for i, had in enumerate(sorted(old.values(), reverse=True)):
        loss += max(0, had - (floor + 1 if i < ceilings else floor))
    return loss


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(TOPICS), st.integers(1, 12), min_size=1),
    st.integers(1, 6),
    st.data(),
    st.booleans(),
)
def test_sticky_moves_no_partition_whose_owner_stayed_unless_balance_needs_it(
    metadata, first_size, data, eager
):
    """From a balanced assignment, members leave and join (same subscriptions): each
    member that stayed keeps everything it had, except what balance requires it to give
    up, and the total moved is the least any balanced assignment allows. Members report
    what they had as owned partitions, or (eager) as sticky user data."""
    topics = sorted(metadata)
    first = [f"m{i}" for i in range(first_size)]
    before = StickyAssignor().assign(metadata, {m: Subscription(topics) for m in first})
    leaving = data.draw(st.sets(st.sampled_from(first), max_size=first_size - 1))
    joining = [f"n{i}" for i in range(data.draw(st.integers(0, 3)))]
    assume(leaving or joining)
    stayed = [m for m in first if m not in leaving]
    note(f"stayed {stayed}, joining {joining}")

    def subscription(member: str) -> Subscription:
        had = before[member].partitions if member in before else ()
        if eager:
            return Subscription(topics, encode_sticky_user_data(StickyUserData(had, 3)))
        return Subscription(topics, None, had)

    after = StickyAssignor().assign(metadata, {m: subscription(m) for m in stayed + joining})
    counts = _counts(after)
    assert max(counts.values()) - min(counts.values()) <= 1
    total = sum(metadata.values())
    floor = total // len(counts)
    lost = 0
    for member in stayed:
        old, new = set(before[member].partitions), set(after[member].partitions)
        assert old <= new or new <= old, f"{member} gave up partitions and got others"
        if len(old) <= floor:
            assert old <= new, f"{member} had no more than its fair share but lost some"
        lost += len(old - new)
    assert lost == _minimal_loss({m: len(before[m].partitions) for m in stayed}, len(counts), total)


def test_sticky_keeps_owners_when_a_member_joins():
    topics = ["t"]
    before = {"m0": tps("t", 0, 1, 2), "m1": tps("t", 3, 4, 5)}
    subscriptions = {m: Subscription(topics, None, had) for m, had in before.items()}
    subscriptions["m2"] = Subscription(topics)
    result = parts(StickyAssignor().assign({"t": 6}, subscriptions))
    assert set(result["m0"]) < set(before["m0"]) and set(result["m1"]) < set(before["m1"])
    assert len(result["m2"]) == 2


def test_sticky_drops_partitions_of_a_topic_the_owner_no_longer_subscribes_to():
    subscriptions = {
        "m0": Subscription(["b"], None, tps("a", 0, 1)),
        "m1": Subscription(["a", "b"]),
    }
    result = parts(StickyAssignor().assign({"a": 2, "b": 2}, subscriptions))
    assert set(result["m1"]) >= set(tps("a", 0, 1))


def test_sticky_generation_conflicts():
    """The newer generation's claim wins; two claims of one generation cancel out (the
    partition is handed out as if unowned)."""

    def member(claims, generation):
        return Subscription(["t"], encode_sticky_user_data(StickyUserData(claims, generation)))

    newer_wins = StickyAssignor().assign(
        {"t": 2},
        {"old": member(tps("t", 0, 1), 4), "new": member(tps("t", 0), 5)},
    )
    assert newer_wins["new"].partitions == tps("t", 0)
    assert newer_wins["old"].partitions == tps("t", 1)
    cancelled = StickyAssignor().assign(
        {"t": 4},
        {"a": member(tps("t", 0, 1, 2), 5), "b": member(tps("t", 2), 5)},
    )
    # t-2 is nobody's: 'b' (least loaded) gets it with t-3; 'a' keeps t-0 and t-1.
    assert cancelled["a"].partitions == tps("t", 0, 1)
    assert cancelled["b"].partitions == tps("t", 2, 3)


def test_sticky_user_data_names_the_previous_assignment_and_generation():
    data = StickyAssignor().subscription_user_data(tps("t", 1), 7)
    assert data == encode_sticky_user_data(StickyUserData(tps("t", 1), 7))
    assert RangeAssignor().subscription_user_data(tps("t", 1), 7) is None


def test_unknown_assignor_names_are_refused():
    with pytest.raises(ValueError, match="unknown partition assignment strategy 'fair'"):
        assignor_for("fair")
    assert assignor_for("sticky").name == "sticky"
