"""The scrubber's sans-IO repair planner over a model cluster (issue 17).

Property: whatever batches are damaged on whichever replica, as long as every damaged
batch has a good copy on some ISR replica, running each broker's `plan_repair` over and
over (followers refetch from the leader, leaders step down to the next ISR member, as
the controller's `step_down_elections` rotates) restores every replica; a plan never
removes or replaces a batch that is good on that replica (so the only good copy of a
batch is never lost), a leader never refetches, and nothing is ever truncated. Without
a good copy anywhere in the ISR the damage stays reported, never "repaired" with bad
bytes."""

from __future__ import annotations

from hypothesis import given, note, settings
from hypothesis import strategies as st

from broker.core.scrub import (
    BatchSpan,
    CorruptRange,
    Drop,
    Refetch,
    ReplicaView,
    SpliceError,
    StepDown,
    Unrepairable,
    Wait,
    merge_ranges,
    next_scrub_target,
    plan_repair,
    restart_pass,
    splice_segment,
)
from client.protocol.types import TopicPartition

BATCHES = 12
SEGMENT = 4  # batches per segment


@st.composite
def clusters(draw):
    n = draw(st.integers(2, 4))
    brokers = list(range(1, n + 1))
    isr = draw(st.lists(st.sampled_from(brokers), min_size=1, unique=True))
    leader = draw(st.sampled_from(isr))
    damaged = {
        b: set(draw(st.lists(st.integers(0, BATCHES - 1), max_size=5, unique=True)))
        for b in brokers
    }
    return brokers, sorted(isr, key=brokers.index), leader, damaged


def ranges_of(damaged: set[int]) -> list[CorruptRange]:
    return merge_ranges(CorruptRange(i, i, (i // SEGMENT) * SEGMENT) for i in damaged)


def step_down(brokers, isr, leader):
    """The controller's rule (controller/core/decisions.py step_down_elections)."""
    start = brokers.index(leader)
    rotation = brokers[start + 1 :] + brokers[:start]
    return next((b for b in rotation if b in isr), leader)


def run_model(brokers, isr, leader, damaged, rounds):
    """Each round every broker plans once; a round is one repair interval, and the
    grace is one round of leadership."""
    damaged = {b: set(d) for b, d in damaged.items()}
    hw = BATCHES
    led_since = 0
    for now in range(rounds):
        for b in brokers:
            leading = now - led_since if b == leader else 0
            view = ReplicaView(b, leader, tuple(isr) if b == leader else (), hw, 0, leading, 1)
            plan = plan_repair(view, ranges_of(damaged[b]))
            note(f"broker {b} (leader {leader}) damaged {sorted(damaged[b])}: {plan}")
            if plan is None:
                continue
            assert not isinstance(plan, Drop)
            if isinstance(plan, Wait):
                assert b == leader and leading < 1
                continue
            if isinstance(plan, Refetch):
                assert b != leader and plan.leader == leader
                for r in plan.ranges:
                    wanted = set(range(r.first_offset, r.last_offset + 1))
                    assert wanted <= damaged[b], "a plan must never replace a good batch"
                    if not wanted & damaged[leader]:  # the splice refuses damaged bytes
                        damaged[b] -= wanted
            elif isinstance(plan, StepDown):
                assert b == leader and set(plan.candidates) == set(isr) - {b}
                leader, led_since = step_down(brokers, isr, leader), now + 1
            else:
                assert isinstance(plan, Unrepairable) and isr == [b] and b == leader
        if not any(damaged[b] for b in isr):
            break
    return leader, damaged


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_every_replica_with_a_good_isr_copy_is_restored(cluster):
    brokers, isr, leader, damaged = cluster
    repairable = all(any(i not in damaged[b] for b in isr) for i in range(BATCHES))
    rounds = 3 * len(brokers) + 2
    _, after = run_model(brokers, isr, leader, damaged, rounds)
    for b in isr:
        assert after[b] <= damaged[b]  # damage only ever shrinks
    if repairable:
        # Every ISR replica converges (out-of-ISR replicas too: they fetch from leaders).
        assert all(not after[b] for b in brokers), after
    else:
        lost = {i for i in range(BATCHES) if all(i in damaged[b] for b in isr)}
        assert all(lost <= after[b] for b in isr)  # reported, never "repaired"


def test_planner_cases():
    r = CorruptRange(5, 5, 4)
    follower = ReplicaView(2, 1, (), 10, 0)
    assert plan_repair(follower, []) is None
    assert plan_repair(follower, [r]) == Refetch(1, (r,))
    above_hw = CorruptRange(12, 12, 12)
    assert plan_repair(follower, [r, above_hw]) == Refetch(1, (r,), (above_hw,))
    assert isinstance(plan_repair(follower, [above_hw]), Wait)
    assert isinstance(plan_repair(ReplicaView(2, -1, (), 10, 0), [r]), Wait)
    assert plan_repair(ReplicaView(1, 1, (1, 2, 3), 10, 0), [r]) == StepDown((2, 3))
    assert isinstance(plan_repair(ReplicaView(1, 1, (1, 2), 10, 0, 5, 10), [r]), Wait)
    assert isinstance(plan_repair(ReplicaView(1, 1, (1,), 10, 0), [r]), Unrepairable)
    assert plan_repair(ReplicaView(2, 1, (), 10, 6), [r]) == Drop((r,))


def test_scheduling_round_robin_resume_and_new_pass():
    a, b = TopicPartition("a", 0), TopicPartition("b", 0)
    from broker.core.scrub import SegmentSpan

    spans = {a: [SegmentSpan(0, 10, 100), SegmentSpan(10, 20, 100)], b: [SegmentSpan(0, 5, 50)]}
    assert next_scrub_target(spans, {}, {}) == (a, 0, 0)
    assert next_scrub_target(spans, {a: 7}, {}, last=a) == (b, 0, 0)
    assert next_scrub_target(spans, {a: 7, b: 5}, {}, last=b) == (a, 0, 7)  # resumes mid-way
    assert next_scrub_target(spans, {a: 12, b: 5}, {a: 15}, last=b) == (a, 10, 15)
    assert next_scrub_target(spans, {a: 20, b: 5}, {}) is None
    assert restart_pass({a: 20, b: 5}, {a: 3}) == {a: 3, b: 0}


def test_splice_takes_fetched_batches_only_inside_the_ranges():
    own = [BatchSpan(0, 1), BatchSpan(2, 2), BatchSpan(5, 6)]  # 3..4 unreadable
    ranges = [CorruptRange(2, 2, 0), CorruptRange(3, 4, 0)]
    fetched = [BatchSpan(2, 2), BatchSpan(3, 3), BatchSpan(4, 4)]
    assert splice_segment(own, ranges, fetched) == [
        ("own", 0),
        ("fetched", 0),
        ("fetched", 1),
        ("fetched", 2),
        ("own", 2),
    ]
    for bad in ([BatchSpan(1, 2)], [BatchSpan(2, 2), BatchSpan(3, 3)], [BatchSpan(7, 7)]):
        try:
            splice_segment(own, ranges, bad)
        except SpliceError:
            continue
        raise AssertionError(f"{bad} accepted")
