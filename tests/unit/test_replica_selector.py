"""KIP-392's rack-aware replica selector (Kafka's RackAwareReplicaSelector), as a pure
function: examples from Kafka's own test, then properties over any replica set."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.core.replica_selector import (
    RACK_AWARE,
    ReplicaView,
    parse_selector,
    select_rack_aware,
)

LEADER = ReplicaView(1, "rack-a", 10, 0)


def test_the_leader_serves_a_client_in_its_rack_even_if_a_follower_is_further_ahead() -> None:
    followers = [ReplicaView(2, "rack-a", 20, 0), ReplicaView(3, "rack-b", 10, 0)]
    assert select_rack_aware("rack-a", LEADER, followers) == LEADER


def test_the_most_caught_up_replica_of_the_clients_rack_is_chosen() -> None:
    followers = [
        ReplicaView(2, "rack-b", 8, 0),
        ReplicaView(3, "rack-b", 10, 0),
        ReplicaView(4, "rack-c", 10, 0),
    ]
    assert select_rack_aware("rack-b", LEADER, followers).broker_id == 3


def test_equal_log_ends_prefer_the_replica_caught_up_most_recently() -> None:
    followers = [ReplicaView(2, "rack-b", 10, 500), ReplicaView(3, "rack-b", 10, 20)]
    assert select_rack_aware("rack-b", LEADER, followers).broker_id == 3


def test_no_rack_or_no_replica_in_the_rack_means_the_leader() -> None:
    followers = [ReplicaView(2, "rack-b", 10, 0)]
    assert select_rack_aware("", LEADER, followers) == LEADER
    assert select_rack_aware("rack-z", LEADER, followers) == LEADER
    assert select_rack_aware("rack-b", LEADER, []) == LEADER


def test_replica_selector_class_accepts_kafkas_names_and_refuses_others() -> None:
    assert parse_selector("") is None
    assert parse_selector("org.apache.kafka.common.replica.LeaderSelector") is None
    assert parse_selector("org.apache.kafka.common.replica.RackAwareReplicaSelector") == RACK_AWARE
    assert parse_selector(" rack-aware ") == RACK_AWARE
    with pytest.raises(ValueError, match="unknown replica selector"):
        parse_selector("com.example.MySelector")


racks = st.sampled_from(["a", "b", "c", None])
replicas = st.lists(
    st.builds(
        ReplicaView,
        st.integers(2, 20),
        racks,
        st.integers(0, 100),
        st.integers(0, 60_000),
    ),
    max_size=6,
    unique_by=lambda r: r.broker_id,
)


@given(
    client_rack=st.sampled_from(["", "a", "b", "c"]),
    leader=st.builds(ReplicaView, st.just(1), racks, st.integers(0, 100), st.just(0)),
    followers=replicas,
)
def test_the_choice_is_in_the_clients_rack_or_the_leader(
    client_rack: str, leader: ReplicaView, followers: list[ReplicaView]
) -> None:
    chosen = select_rack_aware(client_rack, leader, followers)
    same_rack = [f for f in followers if client_rack and f.rack == client_rack]
    if not client_rack or leader.rack == client_rack or not same_rack:
        assert chosen == leader
    else:
        assert chosen in same_rack
        # None of its rack is further ahead.
        assert chosen.log_end_offset == max(f.log_end_offset for f in same_rack)
    # The order the replicas come in does not matter.
    assert select_rack_aware(client_rack, leader, list(reversed(followers))) == chosen
