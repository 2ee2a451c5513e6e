"""Disk faults at start-up: one replica's active segment is damaged while its broker is
down, and the broker must start, truncate what is damaged, fetch the rest again from the
leader, and end up identical to the other replicas, with no acknowledged record lost.

- torn tail: the leader of partition 0 is killed (SIGKILL) under acks=all traffic and its
  last batch is cut in half, as a crash in the middle of a write leaves it;
- corrupted middle: a follower is killed and bytes inside a batch in the middle of its
  active segment are flipped (its CRC no longer matches).
The broker is started again while the producer goes on; the checker then runs as in
every chaos test, and every replica's log must end at the same offset.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from client.protocol.records import iter_batches
from tests.chaos.checker import Summary
from tests.chaos.conftest import record_summary
from tests.chaos.scenario import make_topic, run_with_faults, settled_replicas

pytestmark = pytest.mark.integration

SUMMARY = Summary("disk faults at start-up (one replica damaged while down)")
RECOVERY_LINE = "corrupt or torn batch"


@pytest.fixture(scope="module", autouse=True)
def _print_summary():
    yield
    if SUMMARY.rows:
        record_summary(SUMMARY)


def active_segment(cluster, broker: int, topic: str, partition: int) -> Path:
    directory = Path(cluster.process(f"broker-{broker}").data_dir) / f"{topic}-{partition}"
    return sorted(directory.glob("*.log"))[-1]


def tear_tail(path: Path) -> str:
    data = path.read_bytes()
    position, header = list(iter_batches(data))[-1]
    cut = position + header.size // 2
    with open(path, "r+b") as f:
        f.truncate(cut)
    return f"cut {len(data) - cut} byte(s) off the batch at offset {header.base_offset}"


def corrupt_middle(path: Path) -> str:
    data = bytearray(path.read_bytes())
    batches = list(iter_batches(data))
    position, header = batches[len(batches) // 2]
    at = position + header.size - 3  # inside the records: the CRC no longer matches
    for i in range(at, at + 3):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return f"flipped 3 bytes of the batch at offset {header.base_offset} ({len(batches)} batches)"


@pytest.mark.parametrize("damage", ["torn_tail", "corrupted_middle"])
def test_damaged_replica_recovers_and_converges(shared_chaos_cluster, damage):
    cluster = shared_chaos_cluster
    topic = make_topic(cluster, f"disk-{damage}", partitions=1)
    done: dict[str, object] = {}

    def fault(window):
        state = cluster.partition(topic, 0)
        victim = (
            state.leader
            if damage == "torn_tail"
            else next(b for b in state.replicas if b != state.leader)
        )
        cluster.kill(f"broker-{victim}", signal.SIGKILL)
        path = active_segment(cluster, victim, topic, 0)
        done["what"] = tear_tail(path) if damage == "torn_tail" else corrupt_middle(path)
        done["victim"] = victim
        cluster.start(f"broker-{victim}")
        SUMMARY.faults[damage] += 1

    verdict = run_with_faults(cluster, topic, fault, before_s=3.0, after_s=3.0, partitions=1)
    SUMMARY.add(damage, verdict)
    victim = done["victim"]
    log = Path(cluster.process(f"broker-{victim}").log_path).read_text(errors="replace")
    assert RECOVERY_LINE in log, f"broker {victim} did not report the damage ({done['what']})"
    assert verdict.acked > 0
    assert not verdict.lost, verdict.problems()
    assert not verdict.offset_disagreements, verdict.problems()
    assert not verdict.divergent, verdict.problems()
    ends = {b: max(log) + 1 for b, log in settled_replicas(cluster, topic, 0).items()}
    assert len(set(ends.values())) == 1, f"replicas did not converge: log ends {ends}"
