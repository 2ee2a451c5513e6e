"""Failover with real processes (issue: Controller): ZooKeeper, 2 controllers, 3 brokers,
a topic with RF 3 and min.insync.replicas=2, and an acks=all producer running
throughout. Each fault must lose no acknowledged record, and consumption must go on
(records acknowledged after the fault are read back). The SIGKILL failovers are also run
over SASL_SSL by test_secure_replication.py (with a shorter `after_s`)."""

from __future__ import annotations

import signal
import time

import pytest

from tests.chaos.workload import run_under_fault
from tests.integration.helpers import create_topic, partition_state, wait_until
from tools.cluster.inspect import read_cluster

pytestmark = pytest.mark.integration

TOPIC = "chaos"
PARTITIONS = 3
SESSION_MS = 4_000


@pytest.fixture
def cluster(start_cluster):
    cluster = start_cluster(
        brokers=3,
        controllers=2,
        **{"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 3_000},
    )
    create_topic(cluster, TOPIC, PARTITIONS, 3, **{"min.insync.replicas": 2})
    return cluster


def assert_nothing_lost(outcome):
    assert outcome.acked, "nothing was acknowledged at all"
    assert outcome.lost() == [], f"acknowledged records lost: {outcome.lost()[:10]}"
    assert outcome.acked_after_fault > 0, "no record was acknowledged after the fault"


def wait_full_isr(cluster, timeout_s=30):
    def full():
        view = read_cluster(cluster.state.zookeeper_connect)
        parts = [p for p in view.partitions if p.topic == TOPIC]
        return all(len(p.isr) == 3 and p.leader >= 0 for p in parts)

    wait_until(full, timeout_s, 0.25)


def test_sigkill_of_the_leader(cluster, after_s: float = 6.0):
    leader = partition_state(cluster, TOPIC, 0).leader

    def fault():
        cluster.kill(f"broker-{leader}", signal.SIGKILL)
        # The controller notices when the session expires and elects from the ISR.
        wait_until(lambda: partition_state(cluster, TOPIC, 0).leader not in (leader, -1), 30)

    outcome = run_under_fault(cluster, TOPIC, PARTITIONS, fault, after_s=after_s)
    assert_nothing_lost(outcome)
    new = partition_state(cluster, TOPIC, 0)
    assert new.leader != leader and leader not in new.isr
    cluster.start(f"broker-{leader}")
    wait_full_isr(cluster)  # it returns, truncates by epoch, catches up, rejoins


def test_controlled_shutdown_with_sigterm(cluster):
    leader = partition_state(cluster, TOPIC, 0).leader

    def fault():
        cluster.stop(f"broker-{leader}")  # SIGTERM: controlled shutdown, then exit

    outcome = run_under_fault(cluster, TOPIC, PARTITIONS, fault)
    assert_nothing_lost(outcome)
    # Leaderships moved before it exited: no acks=all record failed for good.
    assert outcome.failed == {}
    log = (cluster.directory / f"broker-{leader}" / "broker.log").read_text()
    assert "controlled shutdown succeeded" in log
    cluster.start(f"broker-{leader}")
    wait_full_isr(cluster)


def test_sigkill_of_the_active_controller(cluster, after_s: float = 6.0):
    view = read_cluster(cluster.state.zookeeper_connect)
    active, epoch = view.controller_id, view.controller_epoch
    leader = partition_state(cluster, TOPIC, 0).leader

    def fault():
        cluster.kill(f"controller-{active}", signal.SIGKILL)

        def standby_took_over():
            v = read_cluster(cluster.state.zookeeper_connect)
            return v.controller_id not in (None, active) and v.controller_epoch > epoch

        wait_until(standby_took_over, 30)
        # The new controller must handle a broker failure too.
        cluster.kill(f"broker-{leader}", signal.SIGKILL)
        wait_until(lambda: partition_state(cluster, TOPIC, 0).leader not in (leader, -1), 30)

    outcome = run_under_fault(cluster, TOPIC, PARTITIONS, fault, after_s=after_s)
    assert_nothing_lost(outcome)
    cluster.start(f"broker-{leader}")
    wait_full_isr(cluster)


def test_sigstop_past_the_session_timeout_then_sigcont(cluster):
    leader = partition_state(cluster, TOPIC, 0).leader

    def fault():
        cluster.pause(f"broker-{leader}")
        time.sleep(SESSION_MS / 1000 + 2)  # its ZooKeeper session expires meanwhile
        wait_until(lambda: partition_state(cluster, TOPIC, 0).leader not in (leader, -1), 30)
        cluster.resume(f"broker-{leader}")

    outcome = run_under_fault(cluster, TOPIC, PARTITIONS, fault)
    assert_nothing_lost(outcome)
    # The paused broker finds its session gone, registers again, and rejoins every ISR.
    wait_until(lambda: leader in read_cluster(cluster.state.zookeeper_connect).brokers, 30)
    wait_full_isr(cluster)
