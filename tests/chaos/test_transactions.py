"""Transactions under faults, judged by the transactional checker (txn_checker.py):
confluent-kafka transactional writers (each transaction committed or aborted at random)
and consume-transform-produce copiers (read_committed, send_offsets_to_transaction) on
the Kafka listener of a 3-broker cluster, while the seeded nemesis kills the
transaction coordinator's broker, partition leaders and the controller, pauses leaders
and cuts broker-to-broker links; plus one late write (txn_scenario.py's `late_write`),
which KIP-890's check must refuse. Then everything is read with read_committed and
read_uncommitted and the checker must report all zeros: no aborted or uncommitted
read, no lost or partly visible committed transaction, no duplicate, no record copied
twice, no G0/G1c cycle.

`make test` runs the short form: about 10 s of faults, the first always the
coordinator's kill, then two or so of the other short kinds (txn_scenario.py's
SHORT_KINDS); `make chaos CHAOS_SEED=.. CHAOS_MINUTES=..` the long one, with every kind
(pauses past the session timeout, controlled stops and ZooKeeper paused as well).
"""

from __future__ import annotations

import pytest

from client.protocol.errors import ErrorCode
from tests.chaos.conftest import CHAOS_MINUTES, CHAOS_SEED, record_summary
from tests.chaos.txn_checker import COMMITTED
from tests.chaos.txn_scenario import (
    ALL_KINDS,
    SHORT_KINDS,
    TxnNemesis,
    TxnSummary,
    run_transactions,
)

pytest.importorskip("confluent_kafka")
pytestmark = [
    pytest.mark.integration,
]

SHORT_FAULT_S = 10.0
FAULT_S = CHAOS_MINUTES * 60 if CHAOS_MINUTES > 0 else SHORT_FAULT_S
KINDS = ALL_KINDS if CHAOS_MINUTES > 0 else SHORT_KINDS


@pytest.mark.timeout(FAULT_S + 600)
def test_transactions_under_seeded_faults(chaos_cluster):
    cluster = chaos_cluster()
    name = "txn"
    nemesis = TxnNemesis(
        cluster,
        f"{name}-in",
        CHAOS_SEED,
        FAULT_S,
        kinds=KINDS,
        transactional_ids=["txn-w0", "txn-w1", "txn-c0", "txn-c1"],
    )
    run = run_transactions(cluster, name, seed=CHAOS_SEED, faults=nemesis, inject_late_write=True)
    record_summary(
        TxnSummary(
            f"transactions, seed {CHAOS_SEED}, {FAULT_S:.0f} s of faults",
            run.verdict,
            dict(nemesis.counts),
        )
    )
    context = f"faults: {nemesis.log}; client errors: {run.errors[:10]}"
    assert run.verdict.ok(), f"{run.verdict.problems()}; {context}"
    assert run.late_write is not None and run.late_write != ErrorCode.NONE, (
        "a transactional write to a partition outside any transaction was appended "
        "(KIP-890's check)"
    )
    committed = [t for t in run.history.txns if t.outcome == COMMITTED]
    assert any(t.writer.startswith("w") for t in committed), context
    assert any(t.writer.startswith("c") and t.reads for t in committed), context
    assert run.verdict.aborted > 0, "no transaction was aborted"
    assert nemesis.counts["kill_coordinator"] >= 1
