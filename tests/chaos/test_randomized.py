"""A seeded randomized fault run on real processes (tests/chaos/nemesis.py): one acks=all
verifiable producer and one verifiable consumer throughout, faults one after another
(broker kills, pauses past and under the session timeout, controlled stops, controller
kills, ZooKeeper paused past the session timeout, broker-to-broker link cuts), then the
checker: no acknowledged record lost, none read at another offset, replicas identical
below their common end after healing. Duplicates are reported; with idempotence on they
must be 0 too.

`make test` runs the short form (about 40 s of faults, idempotence on: the stricter
check; the replication matrix's cells run the producer without it); `make chaos
CHAOS_SEED=.. CHAOS_MINUTES=..` the long one, with idempotence off and on. The summary
table is printed at the end of the session.
"""

from __future__ import annotations

import pytest

from tests.chaos.checker import Summary
from tests.chaos.conftest import CHAOS_MINUTES, CHAOS_SEED, record_summary
from tests.chaos.nemesis import Nemesis
from tests.chaos.scenario import make_topic, run_with_faults

pytestmark = pytest.mark.integration

SHORT_FAULT_S = 40.0
FAULT_S = CHAOS_MINUTES * 60 if CHAOS_MINUTES > 0 else SHORT_FAULT_S
LONG_FORM_ONLY = pytest.mark.skipif(CHAOS_MINUTES <= 0, reason="make chaos (the long form) only")


@pytest.mark.parametrize(
    "idempotent",
    [
        pytest.param(False, id="idempotence-off", marks=LONG_FORM_ONLY),
        pytest.param(True, id="idempotence-on"),
    ],
)
@pytest.mark.timeout(FAULT_S + 600)  # the faults, plus start-up, restoration and audit
def test_seeded_random_faults(chaos_cluster, idempotent):
    cluster = chaos_cluster()
    topic = make_topic(cluster, "random", partitions=3)
    duration = FAULT_S
    nemesis = Nemesis(cluster, topic, CHAOS_SEED, duration)
    verdict = run_with_faults(
        cluster, topic, nemesis, before_s=2.0, after_s=3.0, idempotent=idempotent
    )
    summary = Summary(
        f"randomized run, seed {CHAOS_SEED}, {duration:.0f} s of faults, "
        f"idempotence {'on' if idempotent else 'off'}"
    )
    summary.faults.update(nemesis.counts)
    summary.add("random faults", verdict)
    record_summary(summary)
    assert verdict.acked > 0, "nothing was acknowledged"
    assert not verdict.lost, f"{verdict.problems()}; faults: {nemesis.log}"
    assert not verdict.offset_disagreements, f"{verdict.problems()}; faults: {nemesis.log}"
    assert not verdict.divergent, f"{verdict.problems()}; faults: {nemesis.log}"
    if nemesis.counts["cut_link"]:
        # The cuts took effect: the proxy held broker-to-broker connections silent.
        assert cluster.proxy.held_connections > 0
    assert not cluster.proxy.errors, cluster.proxy.errors
    if idempotent:
        assert verdict.duplicates == 0, verdict.problems()
