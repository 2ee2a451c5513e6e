"""The two KIP-101 scenarios: truncating to the high watermark on becoming a follower
loses acknowledged data (1) and lets replicas diverge (2); truncating by leader epoch
does neither. Each scenario runs with both rules: the HW rule must fail, the epoch rule
must pass. Network delays are zero so every step happens when the test says."""

from __future__ import annotations

from broker.core.follower_fetch import FetchPhase
from broker.core.log.log import Log
from client.protocol.types import TopicPartition
from tests.sim.harness import SimCluster

TP = TopicPartition("t", 0)
NEVER = 10**12  # no automatic HW checkpoints: the test takes them


def two_broker_cluster(tmp_path, truncation: str) -> SimCluster:
    cluster = SimCluster(
        tmp_path / truncation,
        (1, 2),
        truncation=truncation,
        max_delay_ms=0,
        hw_checkpoint_interval_ms=NEVER,
    )
    cluster.create_partition(TP, (1, 2))
    return cluster


def produce_and_wait(cluster: SimCluster, value: bytes, acks: int = -1) -> None:
    before = len(cluster.history.acked)
    cluster.produce(TP, value, acks=acks)
    if acks == -1:
        assert cluster.run_until(lambda: len(cluster.history.acked) > before, 5_000)


def checkpoint(cluster: SimCluster, *broker_ids: int) -> None:
    for b in broker_ids:
        cluster.brokers[b].rm.checkpoint_high_watermarks()


def scenario_1(tmp_path, truncation: str) -> dict[int, bytes]:
    """A leads, B follows. m1 and m2 are acked; B restarts knowing only HW=1 (its
    checkpoint), truncates, and then A dies, so B becomes the leader."""
    cluster = two_broker_cluster(tmp_path, truncation)
    produce_and_wait(cluster, b"m1")
    cluster.run_for(200)
    checkpoint(cluster, 1, 2)  # both have HW 1 on disk
    produce_and_wait(cluster, b"m2")  # acked: B has m2, but its checkpoint says HW 1
    cluster.bounce(2)
    assert cluster.run_until(
        lambda: cluster.brokers[2].rm.followers.states[TP].phase is FetchPhase.FETCHING, 2_000
    )
    cluster.crash(1)
    assert cluster.zk.get(TP).leader == 2
    return dict(cluster.brokers[2].read_all(TP))


def test_scenario_1_truncating_to_hw_loses_an_acked_write(tmp_path):
    on_new_leader = scenario_1(tmp_path, "high_watermark")
    assert 1 not in on_new_leader  # m2 was acknowledged to the producer, and is gone


def test_scenario_1_leader_epochs_keep_the_acked_write(tmp_path):
    on_new_leader = scenario_1(tmp_path, "leader_epoch")
    assert on_new_leader == {0: b"m1", 1: b"m2"}


def scenario_2(tmp_path, truncation: str) -> tuple[dict, dict]:
    """A has m1, m2 (HW 2 checkpointed); B lost m2 in a power cut (it was not flushed).
    Both die; B returns first and leads, taking m3 at offset 1; then A returns."""
    cluster = two_broker_cluster(tmp_path, truncation)
    produce_and_wait(cluster, b"m1")
    produce_and_wait(cluster, b"m2")
    cluster.run_for(200)
    checkpoint(cluster, 1)  # A: HW 2 on disk
    cluster.crash_together(1, 2)
    # B's page cache died with it: its log ends after m1 (KIP-101's "B has m1 only").
    b_dir = cluster.brokers[2].log_dir / "t-0"
    b_log = Log.open(b_dir, cluster.log_config, now_ms=cluster.clock())
    b_log.truncate_to(1)
    b_log.close()
    cluster.restart(2)
    assert cluster.zk.get(TP).leader == 2
    produce_and_wait(cluster, b"m3", acks=1)
    cluster.restart(1)
    cluster.run_for(2_000)
    return dict(cluster.brokers[1].read_all(TP)), dict(cluster.brokers[2].read_all(TP))


def test_scenario_2_truncating_to_hw_lets_replicas_diverge(tmp_path):
    on_a, on_b = scenario_2(tmp_path, "high_watermark")
    assert on_a[1] == b"m2" and on_b[1] == b"m3"  # same offset, different records


def test_scenario_2_leader_epochs_keep_replicas_identical(tmp_path):
    on_a, on_b = scenario_2(tmp_path, "leader_epoch")
    assert on_a == on_b == {0: b"m1", 1: b"m3"}
