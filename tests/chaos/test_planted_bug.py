"""The checker can fail: a planted bug must be caught.

The scenario (the reason min.insync.replicas exists): a topic with RF 3,
min.insync.replicas=2 and unclean leader election allowed; an acks=all producer and a
consumer run while both followers of partition 0 are frozen (SIGSTOP) until the ISR has
shrunk to the leader alone; then the leader dies (SIGKILL) and the followers wake up, so
the controller must elect one of them uncleanly.

- Without the bug the leader refuses acks=all writes while its ISR is below 2
  (NOT_ENOUGH_REPLICAS), so no record is acknowledged while the leader is alone, and
  none acknowledged then is lost.
- With the bug planted in the brokers (`skip_min_isr`: every topic behaves as if
  min.insync.replicas were 1) the leader acknowledges writes alone; they die with it and
  the checker must report them lost. The bug is not in the product: this test plants it
  from tests/chaos/planted_bugs/<bug>/sitecustomize.py, a directory it puts first on the
  PYTHONPATH of the broker processes it starts (`planted_bug_env`), and checks that every
  broker logged it.

The window that matters starts when the ISR is seen to be the leader alone. Records
acknowledged before it may legitimately be lost too: the two followers are frozen one
after the other, and if the leader drops them from its ISR at different moments, a
record can be acknowledged by the leader and the follower frozen last only, and then
the other one is elected uncleanly. That is what unclean election means in Kafka as
well, so the control run only asserts on the leader-alone window.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.chaos.checker import Summary
from tests.chaos.conftest import record_summary
from tests.chaos.scenario import make_topic, run_with_faults
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

SUMMARY = Summary("planted bug (skip_min_isr) against the checker")
PLANTED_BUGS = Path(__file__).resolve().with_name("planted_bugs")


def planted_bug_env(bug: str) -> dict[str, str]:
    """Environment for brokers that run with `bug`: its directory first on PYTHONPATH, so
    Python imports the bug's sitecustomize.py when the broker process starts."""
    path = [str(PLANTED_BUGS / bug)]
    path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(path)}


@pytest.fixture(scope="module", autouse=True)
def _print_summary():
    yield
    if SUMMARY.rows:
        record_summary(SUMMARY)


def leader_alone_then_dies(cluster, topic):
    def fault(window):
        state = cluster.partition(topic, 0)
        leader = state.leader
        followers = [b for b in state.replicas if b != leader]
        for b in followers:
            cluster.pause(f"broker-{b}")
        wait_until(
            lambda: (
                cluster.partition(topic, 0).isr == (leader,)
                or list(cluster.partition(topic, 0).isr) == [leader]
            ),
            30,
            0.2,
        )
        window.begin()  # from here min.insync.replicas=2 must refuse every acks=all write
        time.sleep(2.0)  # acks=all writes meet an ISR of one
        cluster.kill(f"broker-{leader}", signal.SIGKILL)
        for b in followers:
            cluster.resume(f"broker-{b}")
        # The controller elects a follower uncleanly (the leader was the whole ISR).
        wait_until(lambda: cluster.partition(topic, 0).leader in followers, 60, 0.2)
        SUMMARY.faults["freeze_followers+kill_leader"] += 1

    return fault


@pytest.mark.parametrize("bug", [None, "skip_min_isr"])
def test_checker_catches_planted_bug(chaos_cluster, bug):
    cluster = chaos_cluster(env=planted_bug_env(bug) if bug else None)
    topic = make_topic(
        cluster, "planted", partitions=1, **{"unclean.leader.election.enable": "true"}
    )
    verdict = run_with_faults(
        cluster,
        topic,
        leader_alone_then_dies(cluster, topic),
        before_s=1.5,
        after_s=2.0,
        throughput=100,
        partitions=1,
        consume_timeout_s=30,
    )
    SUMMARY.add(f"planted bug: {bug or 'none'}", verdict)
    planted = {
        info.id: "PLANTED BUG" in Path(info.log_path).read_text(errors="replace")
        for info in cluster.state.brokers()
    }
    assert planted == dict.fromkeys(planted, bug is not None), planted
    assert verdict.acked > 0
    if bug is None:
        assert not verdict.lost_in_fault_window, verdict.problems()
    else:
        assert verdict.lost_in_fault_window, (
            "the checker missed the planted bug: nothing acknowledged by the leader alone "
            f"was reported lost ({verdict.problems()})"
        )
