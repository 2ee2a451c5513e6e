"""A consume-transform-produce copier goes on after each SIGKILL of its coordinators'
brokers (issue 28): the stall once seen in test_exactly_once.py, where
send_offsets_to_transaction never returned.

How it works: a confluent-kafka `Copier` (txn_workload.py: read_committed consumer in
group `eos-copier`, transactional producer, 500 records per transaction) copies the
input topic while a thread polls the group's committed offsets with a new consumer of
the group every half second (OffsetFetch with require_stable, as test_exactly_once.py
does). CHAOS_EOS_KILLS (10) times, once the copier has committed 3,000 more records, the broker
coordinating the group (even kills) or the transactional id (odd kills) is SIGKILLed,
started again 2 s later and the cluster restored; the copier must then commit 1,000 more
records within 60 s. Without `producer_config`'s idle-connection close, librdkafka's
cached group coordinator can be a broker handle it dropped when a Metadata answer left
the killed broker out, and send_offsets_to_transaction waits for it for good
(librdkafka issues #5511 and #5456). That is a race (the Metadata answer must come
while the copier waits on the dead coordinator): without the workaround two runs of
this loop with librdkafka's debug logging on (`debug=eos,broker`, slower) stalled for
good at the 3rd and the 6th kill, one 10-kill run without debug logging did not stall.
With the workaround, over 22 kills, five send_offsets_to_transaction calls waited 4-9 s
after AddOffsetsToTxn (the others under 0.7 s) and went on.

Only `make chaos` runs it (CHAOS_MINUTES > 0), or a run that sets CHAOS_EOS_KILLS.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tests.chaos.conftest import CHAOS_MINUTES
from tests.chaos.scenario import make_topic
from tests.chaos.test_exactly_once import copied_or_none, fill
from tests.chaos.txn_checker import COMMITTED
from tests.chaos.txn_scenario import find_txn_coordinator
from tests.chaos.txn_workload import Copier, Recorder

pytest.importorskip("confluent_kafka")

KILLS = int(os.environ.get("CHAOS_EOS_KILLS", "10"))
RECORDS = 8_000 * KILLS + 20_000  # the copier goes on while a broker restarts
GROUP = "eos-copier"
STEP, PROGRESS, PROGRESS_WAIT_S = 3_000, 1_000, 60.0

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        CHAOS_MINUTES <= 0 and "CHAOS_EOS_KILLS" not in os.environ,
        reason="the coordinator kills run in `make chaos` (or with CHAOS_EOS_KILLS)",
    ),
]


def committed(recorder: Recorder) -> int:
    with recorder.lock:
        return sum(len(t.writes) for t in recorder.txns if t.outcome == COMMITTED)


def reaches(recorder: Recorder, count: int, timeout_s: float) -> bool:
    """Whether the copier's committed records reach `count` within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while committed(recorder) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.timeout(KILLS * 150 + 300)
def test_copier_goes_on_after_each_coordinator_kill(chaos_cluster):
    cluster = chaos_cluster()
    bootstrap = cluster.state.kafka_bootstrap_servers
    source = make_topic(cluster, "eos-in", partitions=4)
    target = make_topic(cluster, "eos-out", partitions=4)
    fill(bootstrap, source, RECORDS)

    recorder = Recorder()
    copier = Copier(bootstrap, "eos", source, target, GROUP, recorder, batch=500)
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            copied_or_none(bootstrap, source)
            time.sleep(0.5)

    threads = [
        threading.Thread(target=copier.run, args=(stop,), daemon=True),
        threading.Thread(target=poll, daemon=True),
    ]
    for thread in threads:
        thread.start()
    kills: list[str] = []
    try:
        for k in range(KILLS):
            if committed(recorder) + 2 * (STEP + PROGRESS) > RECORDS:
                break  # too little input left to judge another kill
            goal = committed(recorder) + STEP
            assert reaches(recorder, goal, 120), (
                f"no progress before kill {k}: {kills}; errors {recorder.errors[-5:]}"
            )
            role, key_type = ("group", 0) if k % 2 == 0 else ("transactional id", 1)
            key = GROUP if key_type == 0 else "txn-eos"
            victim = find_txn_coordinator(cluster, key, key_type=key_type)
            at = committed(recorder)
            cluster.kill(f"broker-{victim}", signal.SIGKILL)
            time.sleep(2)
            cluster.start(f"broker-{victim}")
            cluster.restore([source, target], timeout_s=90)
            kills.append(f"broker-{victim} ({role} coordinator) at {at}")
            assert reaches(recorder, at + PROGRESS, PROGRESS_WAIT_S), (
                f"the copier stalled after killing {kills[-1]}: {committed(recorder)} "
                f"committed; kills {kills}; errors {recorder.errors[-5:]}"
            )
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    print(f"copier went on after {len(kills)} kills: {kills}")
    assert len(kills) > KILLS // 2, f"only {len(kills)} kills: {kills}"
