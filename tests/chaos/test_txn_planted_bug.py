"""The transactional checker can fail: two planted bugs must be caught.

- `read_past_lso` (planted_bugs/read_past_lso/): read_committed fetches are served up
  to the high watermark instead of the last stable offset. The observer and the
  copiers then read records of transactions still open, some of which abort: the
  checker must report uncommitted reads (read before their commit was asked for) or
  aborted reads.
- `skip_kip890` (planted_bugs/skip_kip890/): the leader's KIP-890 check lets a
  transactional batch in for a partition its producer never added to a transaction.
  The run's late write (txn_scenario.py's `late_write`, refused in the control run of
  test_transactions.py) is then appended and holds the partition's last stable offset
  for ever: the checker must report the committed writes after it lost.

Each bug is planted in the brokers only (`planted_bug_env`, as test_planted_bug.py
does), which must log that it is there. No faults: the bugs need none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from client.protocol.errors import ErrorCode
from tests.chaos.conftest import CHAOS_MINUTES, CHAOS_SEED, record_summary
from tests.chaos.test_planted_bug import planted_bug_env
from tests.chaos.txn_scenario import TxnSummary, run_transactions

pytest.importorskip("confluent_kafka")
pytestmark = [
    pytest.mark.integration,
]


# `make test` plants the KIP-890 one (caught every time); `make chaos` both (whether a
# read past the LSO is seen depends on timing: one early run caught only two reads).
LONG_FORM_ONLY = pytest.mark.skipif(CHAOS_MINUTES <= 0, reason="make chaos (the long form) only")


@pytest.mark.parametrize(
    "bug", [pytest.param("read_past_lso", marks=LONG_FORM_ONLY), "skip_kip890"]
)
def test_txn_checker_catches_planted_bug(chaos_cluster, bug):
    cluster = chaos_cluster(env=planted_bug_env(bug))
    run = run_transactions(
        cluster,
        f"planted-{bug.replace('_', '-')}",
        seed=CHAOS_SEED,
        inject_late_write=bug == "skip_kip890",
        before_s=4.0,
        after_s=4.0,
        copiers=1,
    )
    record_summary(TxnSummary(f"planted bug {bug} against the transactional checker", run.verdict))
    logged = [
        info.id
        for info in cluster.state.brokers()
        if "PLANTED BUG" in Path(info.log_path).read_text(errors="replace")
    ]
    assert logged, f"no broker logged the planted bug {bug}: was it planted?"
    verdict = run.verdict
    if bug == "read_past_lso":
        assert verdict.uncommitted_reads or verdict.aborted_reads, (
            f"the checker missed reads past the LSO ({verdict.problems()})"
        )
    else:
        assert run.late_write == ErrorCode.NONE, run.late_write
        assert verdict.lost_writes, (
            f"the checker missed the hanging transaction's effect ({verdict.problems()})"
        )
