"""Rack-aware replica assignment (Kafka 2.8's AdminUtils): replicas on distinct brokers
and as many racks as possible, leaders spread evenly, reproducible for a fixed start."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.core.assignment import AssignmentError
from broker.core.rack_assignment import (
    MIXED_RACKS,
    assign_replicas_rack_aware,
    choose_assignment,
    rack_alternated_brokers,
)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[int, str], int, int, int]:
    """(broker -> rack, partitions, replication factor, start index)."""
    ids = draw(st.lists(st.integers(0, 50), min_size=1, max_size=12, unique=True))
    racks = {b: draw(st.sampled_from("abcde")) for b in ids}
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 40))
    start = draw(st.integers(0, len(ids) - 1))
    return racks, partitions, rf, start


@given(clusters())
def test_replicas_are_distinct_brokers_on_as_many_racks_as_possible(
    case: tuple[dict[int, str], int, int, int],
) -> None:
    racks, partitions, rf, _ = case
    assignment = choose_assignment(partitions, rf, racks)
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(racks)
        assert len({racks[b] for b in replicas}) == min(rf, len(set(racks.values())))


@given(clusters(), st.integers(1, 4))
def test_leaders_spread_evenly(case: tuple[dict[int, str], int, int, int], rounds: int) -> None:
    racks, _, rf, _ = case
    assignment = choose_assignment(rounds * len(racks), rf, racks)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b, 0) for b in racks]
    assert max(counts) - min(counts) <= 1


@given(clusters())
def test_deterministic_for_a_fixed_start(case: tuple[dict[int, str], int, int, int]) -> None:
    racks, partitions, rf, start = case
    once = assign_replicas_rack_aware(partitions, rf, racks, start_index=start)
    again = assign_replicas_rack_aware(
        partitions, rf, dict(reversed(racks.items())), start_index=start
    )
    assert once == again


def test_kafka_example() -> None:
    # Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert choose_assignment(7, 3, racks, start_index=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_two_brokers_per_rack_never_put_a_partition_in_one_rack() -> None:
    racks = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
    for replicas in choose_assignment(12, 3, racks).values():
        assert {racks[b] for b in replicas} == {"a", "b", "c"}


def test_some_brokers_without_a_rack_are_refused_unless_rack_awareness_is_off() -> None:
    brokers = {1: "a", 2: None, 3: "b"}
    with pytest.raises(AssignmentError, match=MIXED_RACKS):
        choose_assignment(3, 2, brokers)
    assignment = choose_assignment(3, 2, brokers, rack_aware=False)
    assert all(len(set(r)) == 2 for r in assignment.values())


def test_no_racks_is_the_rack_unaware_algorithm() -> None:
    brokers: dict[int, str | None] = {1: None, 2: None, 3: None}
    assert choose_assignment(6, 2, brokers, start_index=1) == choose_assignment(
        6, 2, {1: "x", 2: "y", 3: "z"}, start_index=1, rack_aware=False
    )


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(AssignmentError):
        choose_assignment(0, 1, {1: "a"})
    with pytest.raises(AssignmentError):
        choose_assignment(1, 0, {1: "a"})
    with pytest.raises(AssignmentError):
        choose_assignment(1, 2, {1: "a"})
