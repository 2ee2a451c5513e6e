"""Leader election strategies (seed 001): who may lead, and the ISR that comes with it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.core.election import (
    controlled_shutdown_leader,
    elect_for_controlled_shutdown,
    elect_for_reassignment,
    elect_offline,
    elect_preferred,
    offline_partition_leader,
    preferred_replica_leader,
    reassignment_leader,
)


# -- offline partition ---------------------------------------------------------------------
def test_offline_picks_the_first_live_isr_member_in_assignment_order():
    assert offline_partition_leader([3, 1, 2], isr=[1, 2], live={1, 2}, unclean_enabled=False) == 1
    assert offline_partition_leader([3, 2, 1], isr=[1, 2], live={1, 2}, unclean_enabled=False) == 2


def test_offline_without_live_isr_member_gives_no_leader_unless_unclean_is_enabled():
    assert offline_partition_leader([1, 2, 3], isr=[1], live={2, 3}, unclean_enabled=False) is None
    assert offline_partition_leader([1, 2, 3], isr=[1], live={3, 2}, unclean_enabled=True) == 2


def test_offline_clean_election_keeps_the_live_isr_members():
    election = elect_offline([1, 2, 3], isr=[1, 2, 3], live={2, 3}, unclean_enabled=False)
    assert (election.leader, election.isr, election.unclean) == (2, (2, 3), False)


def test_offline_unclean_election_restarts_the_isr_at_the_new_leader():
    election = elect_offline([1, 2, 3], isr=[1], live={3}, unclean_enabled=True)
    assert (election.leader, election.isr, election.unclean) == (3, (3,), True)


def test_offline_with_nobody_alive_is_none_even_if_unclean():
    assert elect_offline([1, 2], isr=[1, 2], live=set(), unclean_enabled=True) is None


# -- reassignment, preferred, controlled shutdown ---------------------------------------------
def test_reassignment_leader_comes_from_the_target_replicas():
    assert reassignment_leader([4, 2], isr=[1, 2, 4], live={1, 2, 4}) == 4
    assert reassignment_leader([4, 2], isr=[1, 2], live={1, 2, 4}) == 2
    assert reassignment_leader([4], isr=[1, 2], live={1, 2, 4}) is None
    election = elect_for_reassignment([4, 2], isr=[1, 2, 4], live={1, 2, 4})
    assert election.isr == (1, 2, 4)  # the ISR is left to the phase that removes replicas


def test_preferred_is_only_the_first_replica():
    assert preferred_replica_leader([1, 2], isr=[1, 2], live={1, 2}) == 1
    assert preferred_replica_leader([1, 2], isr=[2], live={1, 2}) is None  # not in ISR
    assert preferred_replica_leader([1, 2], isr=[1, 2], live={2}) is None  # not alive
    assert preferred_replica_leader([], isr=[], live={1}) is None
    assert elect_preferred([1, 2], isr=[2, 1], live={1, 2}).isr == (2, 1)


def test_controlled_shutdown_skips_shutting_down_brokers():
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, shutting_down={1}) == 2
    assert controlled_shutdown_leader([1, 2, 3], [1, 3], {1, 2, 3}, shutting_down={1}) == 3
    assert controlled_shutdown_leader([1, 2], [1], {1, 2}, shutting_down={1}) is None
    election = elect_for_controlled_shutdown([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 3})
    assert (election.leader, election.isr) == (2, (2,))


# -- properties -------------------------------------------------------------------------------
@st.composite
def partitions(draw):
    brokers = list(range(1, 7))
    assignment = draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=5, unique=True))
    isr = draw(st.lists(st.sampled_from(assignment), min_size=1, unique=True))
    live = draw(st.sets(st.sampled_from(brokers)))
    return assignment, isr, live


@given(partitions(), st.booleans())
def test_a_new_leader_is_alive_and_in_the_isr_unless_the_election_was_unclean(case, unclean):
    assignment, isr, live = case
    election = elect_offline(assignment, isr, live, unclean)
    live_isr = [r for r in assignment if r in live and r in isr]
    if election is None:
        assert not live_isr and (not unclean or not live.intersection(assignment))
        return
    assert election.leader in live and election.leader in election.isr
    assert set(election.isr) <= live
    if live_isr:
        assert not election.unclean
        assert election.leader == live_isr[0]  # first qualifying in assignment order
        assert set(election.isr) == set(isr) & live
    else:
        assert unclean and election.unclean and election.isr == (election.leader,)
        assert election.leader == next(r for r in assignment if r in live)


@given(partitions(), st.sets(st.integers(1, 6)))
def test_controlled_shutdown_never_picks_or_keeps_a_shutting_down_broker(case, shutting_down):
    assignment, isr, live = case
    election = elect_for_controlled_shutdown(assignment, isr, live, shutting_down)
    if election is None:
        assert not [r for r in isr if r in live and r not in shutting_down and r in assignment]
        return
    assert election.leader in live and election.leader in isr
    assert election.leader not in shutting_down
    assert not shutting_down.intersection(election.isr)
