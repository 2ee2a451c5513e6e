"""ZooKeeper faults under load (`make chaos` only): a cluster on a three-server ensemble,
under a chroot (`zookeepers=3, zk_chroot="/tributary"`), one acks=all verifiable
producer (idempotent) and one verifiable consumer throughout, the seeded faults of
`zk_nemesis.ZooKeeperNemesis` (ZooKeeper servers killed, its leader killed, a server and
then a broker killed, two of three paused past the session timeout, rolling restarts),
then the checker: no acknowledged record lost, none read at another offset, no
duplicate, replicas identical below their common end. `make test` covers the short,
deterministic form (tests/integration/test_zk_ensemble.py).
"""

from __future__ import annotations

import pytest

from tests.chaos.checker import Summary
from tests.chaos.conftest import CHAOS_MINUTES, CHAOS_SEED, record_summary
from tests.chaos.scenario import make_topic, run_with_faults
from tests.chaos.zk_nemesis import ZooKeeperNemesis

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHAOS_MINUTES <= 0, reason="make chaos (the long form) only"),
]

# Half the randomized run's time (at least a minute: one round of every kind).
FAULT_S = max(60.0, CHAOS_MINUTES * 30)


@pytest.mark.timeout(FAULT_S + 600)
def test_zookeeper_faults_lose_nothing_acknowledged(chaos_cluster):
    cluster = chaos_cluster(zookeepers=3, zk_chroot="/tributary")
    topic = make_topic(cluster, "zk-faults", partitions=3)
    nemesis = ZooKeeperNemesis(cluster, topic, CHAOS_SEED, FAULT_S)
    verdict = run_with_faults(cluster, topic, nemesis, before_s=2.0, after_s=3.0, idempotent=True)
    summary = Summary(f"ZooKeeper faults, seed {CHAOS_SEED}, {FAULT_S:.0f} s, ensemble of 3")
    summary.faults.update(nemesis.counts)
    summary.add("zookeeper faults", verdict)
    record_summary(summary)
    assert verdict.acked > 0, "nothing was acknowledged"
    assert not verdict.lost, f"{verdict.problems()}; faults: {nemesis.log}"
    assert not verdict.offset_disagreements, f"{verdict.problems()}; faults: {nemesis.log}"
    assert not verdict.divergent, f"{verdict.problems()}; faults: {nemesis.log}"
    assert verdict.duplicates == 0, verdict.problems()
