"""The log's idempotent-producer hooks: dedup on the leader, the same state on a follower,
truncation, and snapshots beside the segments (broker/core/log/log.py)."""

from __future__ import annotations

import pytest

from broker.core.log.config import LogConfig
from broker.core.log.log import Log
from broker.core.log.producer_state import ProducerStateError
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch

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
