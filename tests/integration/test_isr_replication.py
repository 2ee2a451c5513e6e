"""Replication with real processes (issue: Replication): a stalled follower leaves the
ISR within replica.lag.time.max.ms plus one check period and rejoins when it resumes;
with two followers stalled, acks=all is refused with NOT_ENOUGH_REPLICAS while acks=1
still works. The ZooKeeper session timeout is set well above the lag time so that it is
the *leader* that shrinks the ISR (the leader epoch does not change), not the controller
declaring the broker dead."""

from __future__ import annotations

import time

import pytest

from client.protocol.errors import ErrorCode
from tests.integration.helpers import create_topic, partition_state, produce, wait_until

pytestmark = pytest.mark.integration

LAG_MS = 2_000
CHECK_PERIOD_MS = LAG_MS // 2
SCHEDULING_SLACK_S = 3.0  # process wake-ups and a ZooKeeper write on a loaded 2-core box


def test_isr_shrinks_on_a_stalled_follower_and_min_isr_guards_acks_all(start_cluster):
    cluster = start_cluster(
        brokers=3,
        controllers=1,
        **{"replica.lag.time.max.ms": LAG_MS, "zookeeper.session.timeout.ms": 20_000},
    )
    create_topic(cluster, "replicated", 1, 3, **{"min.insync.replicas": 2})
    state = partition_state(cluster, "replicated", 0)
    leader = state.leader
    followers = [r for r in state.replicas if r != leader]
    epoch = state.leader_epoch
    assert produce(cluster, leader, "replicated", 0, [b"before"])[0] == ErrorCode.NONE

    # One follower stops: it must leave the ISR within the lag time plus a check period.
    stalled = followers[0]
    cluster.pause(f"broker-{stalled}")
    paused_at = time.monotonic()
    assert produce(cluster, leader, "replicated", 0, [b"while one is stalled"], acks=1)[0] == 0
    shrunk = wait_until(
        lambda: (s := partition_state(cluster, "replicated", 0)) and stalled not in s.isr and s,
        LAG_MS / 1000 + CHECK_PERIOD_MS / 1000 + SCHEDULING_SLACK_S,
    )
    took = time.monotonic() - paused_at
    assert shrunk.leader == leader and shrunk.leader_epoch == epoch  # the leader did it
    assert took >= LAG_MS / 1000 * 0.9
    # ISR {leader, other follower} still satisfies min.insync.replicas=2.
    assert produce(cluster, leader, "replicated", 0, [b"acks all, isr 2"])[0] == ErrorCode.NONE

    cluster.resume(f"broker-{stalled}")
    wait_until(lambda: len(partition_state(cluster, "replicated", 0).isr) == 3, 15)

    # Two followers stop: acks=all is refused before appending; acks=1 is fine.
    for follower in followers:
        cluster.pause(f"broker-{follower}")
    assert produce(cluster, leader, "replicated", 0, [b"nudge"], acks=1)[0] == ErrorCode.NONE
    wait_until(lambda: partition_state(cluster, "replicated", 0).isr == (leader,), 15)
    code, _ = produce(cluster, leader, "replicated", 0, [b"refused"])
    assert code == ErrorCode.NOT_ENOUGH_REPLICAS
    code, offset = produce(cluster, leader, "replicated", 0, [b"acks one"], acks=1)
    assert code == ErrorCode.NONE and offset >= 0
    for follower in followers:
        cluster.resume(f"broker-{follower}")
    wait_until(lambda: len(partition_state(cluster, "replicated", 0).isr) == 3, 20)
