"""Kafka's replication matrix (tests/kafkatest/tests/core/replication_test.py) on real
processes: {clean_shutdown, hard_shutdown, clean_bounce, hard_bounce} x {the leader of
partition 0, the active controller}. Each cell runs an acks=all verifiable producer and a
verifiable consumer against a fresh topic (3 partitions, RF 3, min.insync.replicas=2) on
one shared cluster, injects the fault once, restores the cluster and checks: no
acknowledged record lost, none read at another offset, the replicas identical below
their common end. Duplicates (retries without idempotence) are reported, not failed.

A shutdown stops the process and leaves it stopped while traffic goes on; a bounce stops
it and starts it again at once. Clean is SIGTERM (a broker's controlled shutdown), hard
is SIGKILL.
"""

from __future__ import annotations

import signal

import pytest

from tests.chaos.checker import Summary
from tests.chaos.conftest import record_summary
from tests.chaos.scenario import make_topic, run_with_faults, wait_for_leaders

pytestmark = pytest.mark.integration

FAILURE_MODES = ["clean_shutdown", "hard_shutdown", "clean_bounce", "hard_bounce"]
TARGETS = ["leader", "controller"]
SUMMARY = Summary("replication matrix (acks=all, RF 3, min ISR 2)")


def target_process(cluster, topic: str, target: str) -> str:
    if target == "leader":
        return f"broker-{cluster.partition(topic, 0).leader}"
    return f"controller-{cluster.view().controller_id}"


def inject(cluster, name: str, mode: str) -> None:
    if mode.startswith("clean"):
        cluster.stop(name)  # SIGTERM, wait for the exit
    else:
        cluster.kill(name, signal.SIGKILL)
    if mode.endswith("bounce"):
        cluster.start(name)


@pytest.fixture(scope="module", autouse=True)
def _print_summary():
    yield
    if SUMMARY.rows:
        record_summary(SUMMARY)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mode", FAILURE_MODES)
def test_replication_matrix_cell(shared_chaos_cluster, mode, target):
    cluster = shared_chaos_cluster
    topic = make_topic(cluster, f"matrix-{mode}-{target}")

    def fault(window):
        name = target_process(cluster, topic, target)
        window.begin()
        inject(cluster, name, mode)
        wait_for_leaders(cluster, topic)  # the window ends when the outage does
        SUMMARY.faults[f"{mode}:{target}"] += 1

    verdict = run_with_faults(cluster, topic, fault, before_s=2.0, after_s=3.0)
    SUMMARY.add(f"{mode} x {target}", verdict)
    assert verdict.acked > 0, "nothing was acknowledged"
    assert not verdict.lost, verdict.problems()
    assert not verdict.offset_disagreements, verdict.problems()
    assert not verdict.divergent, verdict.problems()
