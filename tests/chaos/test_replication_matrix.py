"""Kafka's replication matrix (tests/kafkatest/tests/core/replication_test.py) on real
processes: {clean_shutdown, hard_shutdown, clean_bounce, hard_bounce} x {the leader of
partition 0, the active controller}. Each cell runs an acks=all verifiable producer and a
verifiable consumer against a fresh topic (3 partitions, RF 3, min.insync.replicas=2) on
one shared cluster, injects the fault once, restores the cluster and checks: no
acknowledged record lost, none read at another offset, the replicas identical below
their common end. Duplicates (retries without idempotence) are reported, not failed.

A shutdown stops the process and leaves it stopped while traffic goes on; a bounce stops
it and starts it again at once. Clean is SIGTERM (a broker's controlled shutdown), hard
is SIGKILL. One more cell cuts the link between the leader and a follower through the
link proxy (a network partition between two brokers).

`make test` runs each of the eight cells once: the four of `OVER_SASL_SSL` on the secure
chaos cluster (test_secure_replication.py, every listener SASL_SSL), the other four here;
`make chaos` (the long form) runs all eight here too.
"""

from __future__ import annotations

import signal

import pytest

from tests.chaos.checker import Summary
from tests.chaos.conftest import CHAOS_MINUTES, record_summary
from tests.chaos.scenario import make_topic, run_with_faults, wait_for_leaders
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

FAILURE_MODES = ["clean_shutdown", "hard_shutdown", "clean_bounce", "hard_bounce"]
TARGETS = ["leader", "controller"]
SUMMARY = Summary("replication matrix (acks=all, RF 3, min ISR 2)")
# One cell of each failure mode, run over SASL_SSL by test_secure_replication.py.
OVER_SASL_SSL = [
    ("clean_shutdown", "leader"),
    ("hard_shutdown", "controller"),
    ("clean_bounce", "controller"),
    ("hard_bounce", "leader"),
]
PLAINTEXT_CELLS = [
    (mode, target)
    for mode in FAILURE_MODES
    for target in TARGETS
    if CHAOS_MINUTES > 0 or (mode, target) not in OVER_SASL_SSL
]


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


@pytest.mark.parametrize(("mode", "target"), PLAINTEXT_CELLS)
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


def test_cut_link_drops_the_follower_from_the_isr_until_healed(shared_chaos_cluster):
    """The link proxy really partitions replication: with the link between the leader of
    partition 0 and one follower cut, that follower leaves the ISR (acks=all goes on
    with the other two); healed, it catches up and rejoins, and nothing is lost."""
    cluster = shared_chaos_cluster
    topic = make_topic(cluster, "matrix-cut-link")
    seen: dict[str, object] = {}

    def fault(window):
        state = cluster.partition(topic, 0)
        follower = next(b for b in state.replicas if b != state.leader)
        window.begin()
        cluster.proxy.cut(state.leader, follower)
        wait_until(lambda: follower not in cluster.partition(topic, 0).isr, 30, 0.2)
        seen["isr during the cut"] = cluster.partition(topic, 0).isr
        cluster.proxy.heal(state.leader, follower)
        SUMMARY.faults["cut_link:leader-follower"] += 1

    verdict = run_with_faults(cluster, topic, fault, before_s=2.0, after_s=2.0)
    SUMMARY.add("cut link leader-follower", verdict)
    assert len(seen["isr during the cut"]) == 2
    assert verdict.acked > 0 and not verdict.lost, verdict.problems()
    assert not verdict.offset_disagreements and not verdict.divergent, verdict.problems()
