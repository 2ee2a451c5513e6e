"""The log's idempotent-producer hooks: dedup on the leader, the same state on a follower,
truncation, and snapshots beside the segments (broker/core/log/producer_snapshots.py)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker.core.log.config import LogConfig
from broker.core.log.log import Log
from broker.core.log.producer_state import ProducerStateError, ProducerStateManager
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch, iter_batches

SMALL = LogConfig(segment_bytes=600, index_interval_bytes=64)


def batch(seq: int, count: int = 2, pid: int = 1000, epoch: int = 0) -> bytes:
    records = [Record(None, f"v{seq + i}".encode() * 10, 1000 + i, ()) for i in range(count)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def open_log(path, **kwargs) -> Log:
    return Log.open(path / "t-0", SMALL, now_ms=0, **kwargs)


def values(log: Log) -> list[bytes]:
    from client.protocol.records import decode_batches

    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        records = decode_batches(data.records)
        out.extend(r.value for r in records if r.offset >= offset)
        offset = records[-1].offset + 1
    return out


def test_a_retried_batch_is_answered_with_its_first_offsets_and_written_once(tmp_path):
    log = open_log(tmp_path)
    first = log.append_as_leader(batch(0), 0, now_ms=1)
    second = log.append_as_leader(batch(2), 0, now_ms=1)
    retry = log.append_as_leader(batch(0), 0, now_ms=2)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 1)
    assert not first.duplicate and second.first_offset == 2
    assert log.log_end_offset == 4
    with pytest.raises(ProducerStateError) as gap:
        log.append_as_leader(batch(9), 0, now_ms=3)
    assert gap.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 4


def test_a_follower_builds_the_same_state_and_dedups_after_becoming_leader(tmp_path):
    leader = Log.open(tmp_path / "a" / "t-0", SMALL, now_ms=0)
    follower = Log.open(tmp_path / "b" / "t-0", SMALL, now_ms=0)
    for seq in (0, 2, 4):
        leader.append_as_leader(batch(seq), 0, now_ms=1)
    data = leader.read(0, 1 << 20)
    follower.append_as_follower(data.records, now_ms=1)
    assert follower.producer_state == leader.producer_state
    retry = follower.append_as_leader(batch(4), 1, now_ms=2)
    assert retry.duplicate and retry.first_offset == 4


def test_truncation_drops_the_state_of_removed_batches(tmp_path):
    log = open_log(tmp_path)
    for seq in range(0, 20, 2):  # several segments, so snapshots exist
        log.append_as_leader(batch(seq), 0, now_ms=1)
    assert len(log.segments) > 2
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert log.producer_state.entry(1000).last_seq == 5
    # The batch at sequence 6 is new again, not a duplicate.
    again = log.append_as_leader(batch(6), 0, now_ms=2)
    assert not again.duplicate and again.first_offset == 6


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_a_restart_from_snapshot_plus_log(tmp_path, clean):
    log = open_log(tmp_path)
    for seq in range(0, 30, 2):
        log.append_as_leader(batch(seq), 0, now_ms=1)
    expected = log.producer_state.to_bytes()
    assert list((tmp_path / "t-0").glob("*.snapshot"))
    if clean:
        log.flush()
        log.close()
        assert (tmp_path / "t-0" / f"{log.log_end_offset:020d}.snapshot").exists()
    else:  # a crash: no close, the last snapshot is from the last roll
        for segment in log.segments:
            segment.flush()
    reopened = open_log(tmp_path, recovery_point=0, had_clean_shutdown=clean)
    assert reopened.producer_state.to_bytes() == expected
    retry = reopened.append_as_leader(batch(28), 0, now_ms=2)
    assert retry.duplicate and retry.first_offset == 28


def test_a_damaged_snapshot_is_ignored_and_the_state_rebuilt_from_the_log(tmp_path):
    log = open_log(tmp_path)
    for seq in range(0, 20, 2):
        log.append_as_leader(batch(seq), 0, now_ms=1)
    expected = log.producer_state.entry(1000)
    log.flush()
    log.close()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.write_bytes(b"garbage!")
    reopened = open_log(tmp_path, had_clean_shutdown=True)
    assert reopened.producer_state.entry(1000) == expected


# --- any history: the state equals a replay of the whole log -------------------------------


class ProducerStateMachine(RuleBasedStateMachine):
    """Appends by two producers (in order, retried, or out of order), follower-style
    truncations, and restarts (clean or a crash) on a small-segment log: afterwards the
    log's producer state always equals the state rebuilt from every batch in the log,
    and no batch is in the log twice."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.log = open_log(self.tmp)
        self.next_seq = {1000: 0, 2000: 0}
        self.sent: dict[int, list[int]] = {1000: [], 2000: []}

    @rule(pid=st.sampled_from([1000, 2000]), count=st.integers(1, 3))
    def append_next(self, pid, count):
        seq = self.next_seq[pid]
        info = self.log.append_as_leader(batch(seq, count, pid), 0, now_ms=1)
        assert not info.duplicate
        self.next_seq[pid] = seq + count
        self.sent[pid].append(seq)

    @rule(pid=st.sampled_from([1000, 2000]), back=st.integers(1, 7))
    def retry_an_old_batch(self, pid, back):
        if len(self.sent[pid]) < back:
            return
        seq = self.sent[pid][-back]
        count = (self.sent[pid][-back + 1] if back > 1 else self.next_seq[pid]) - seq
        try:
            info = self.log.append_as_leader(batch(seq, count, pid), 0, now_ms=1)
        except ProducerStateError as exc:
            assert back > 5 and exc.code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER
            return
        assert info.duplicate and back <= 5

    @rule(pid=st.sampled_from([1000, 2000]), gap=st.integers(1, 3))
    def send_with_a_gap(self, pid, gap):
        if not self.sent[pid]:
            return
        with pytest.raises(ProducerStateError):
            self.log.append_as_leader(batch(self.next_seq[pid] + gap, 1, pid), 0, now_ms=1)

    @rule(fraction=st.floats(0, 1))
    def truncate(self, fraction):
        target = int(self.log.log_end_offset * fraction)
        self.log.truncate_to(target)
        self._resync()

    @rule(clean=st.booleans())
    def restart(self, clean):
        if clean:
            self.log.flush()
            self.log.close()
        else:
            for segment in self.log.segments:
                segment.flush()
        self.log = open_log(self.tmp, recovery_point=0, had_clean_shutdown=clean)

    def _resync(self):
        """After truncation the producers continue from what the log still holds."""
        for pid in self.next_seq:
            entry = self.log.producer_state.entry(pid)
            self.next_seq[pid] = entry.last_seq + 1 if entry else 0
            self.sent[pid] = [s for s in self.sent[pid] if s < self.next_seq[pid]]

    @invariant()
    def state_matches_a_full_replay(self):
        replayed = ProducerStateManager()
        seen = set()
        data = b""
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset:
            chunk = self.log.read(offset, 1 << 20)
            data += chunk.records
            offset = max(h.next_offset for _, h in iter_batches(chunk.records))
        for _, header in iter_batches(data):
            key = (header.producer_id, header.base_sequence)
            assert key not in seen, f"batch {key} written twice"
            seen.add(key)
            replayed.update(header)
        replayed.update_end_offset(self.log.log_end_offset)
        assert self.log.producer_state == replayed

    def teardown(self):
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


TestProducerStateMachine = ProducerStateMachine.TestCase
TestProducerStateMachine.settings = settings(max_examples=50, stateful_step_count=25, deadline=None)
