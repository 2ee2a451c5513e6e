"""The partition log: appends, reads, rolls, truncation, retention, timestamps."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    CorruptRecordError,
    EpochEntry,
    Log,
    LogConfig,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from broker.core.log.checkpoint import LeaderEpochCheckpointFile
from broker.core.log.log import LEADER_EPOCH_CHECKPOINT
from client.protocol.records import (
    Codec,
    Record,
    TimestampType,
    build_batch,
    decode_batches,
    iter_batches,
    read_header,
)

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=64)


def batch(n: int = 3, ts: int = 1_000, value: bytes = b"v" * 40, **kwargs) -> bytes:
    return build_batch([Record(None, value, ts + i) for i in range(n)], **kwargs)


def open_log(tmp_path, config: LogConfig = SMALL, **kwargs) -> Log:
    return Log.open(tmp_path / "topic-0", config, now_ms=0, **kwargs)


def offsets(records: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(records)]


def fill(log: Log, batches: int, *, n: int = 3, epoch: int = 0, ts: int = 1_000) -> None:
    for i in range(batches):
        log.append_as_leader(batch(n, ts=ts + i * 10), leader_epoch=epoch, now_ms=i)


# ---------------------------------------------------------------- appending


def test_leader_append_assigns_offsets_and_epoch_and_leaves_caller_bytes_alone(tmp_path):
    log = open_log(tmp_path)
    first = batch(3)
    info = log.append_as_leader(first, leader_epoch=4, now_ms=10)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    info = log.append_as_leader(first + batch(2), leader_epoch=5, now_ms=11)
    assert (info.first_offset, info.last_offset, info.batch_count) == (3, 7, 2)
    assert log.log_end_offset == 8
    assert read_header(first).base_offset == 0  # caller's buffer untouched
    data = log.read(0, 1 << 20).records
    assert offsets(data) == [(0, 2), (3, 5), (6, 7)]
    assert [h.partition_leader_epoch for _, h in iter_batches(data)] == [4, 5, 5]
    assert [r.offset for r in decode_batches(data)] == list(range(8))
    assert log.leader_epoch_cache.entries == (EpochEntry(4, 0), EpochEntry(5, 3))


def test_log_append_time_stamps_batches(tmp_path):
    log = open_log(tmp_path, SMALL.merged({"message.timestamp.type": "LogAppendTime"}))
    info = log.append_as_leader(batch(2, ts=5), leader_epoch=0, now_ms=777)
    assert info.log_append_time_ms == 777 and info.max_timestamp == 777
    records = decode_batches(log.read(0, 4096).records)
    assert [r.timestamp for r in records] == [777, 777]
    assert read_header(log.read(0, 4096).records).timestamp_type == TimestampType.LOG_APPEND_TIME


def test_invalid_appends_write_nothing(tmp_path):
    log = open_log(tmp_path, SMALL.merged(max_message_bytes=300))
    good = batch(1)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_as_leader(good + bytes(corrupt), leader_epoch=0, now_ms=0)
    with pytest.raises(RecordTooLargeError, match="max.message.bytes 300"):
        log.append_as_leader(batch(10), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    assert log.append_as_leader(b"", leader_epoch=0, now_ms=0).first_offset == -1


def test_follower_append_keeps_leader_offsets_and_epochs(tmp_path):
    leader = Log.open(tmp_path / "leader" / "t-0", SMALL, now_ms=0)
    follower = Log.open(tmp_path / "follower" / "t-0", SMALL, now_ms=0)
    leader.append_as_leader(batch(2), leader_epoch=1, now_ms=0)
    leader.append_as_leader(batch(2), leader_epoch=3, now_ms=0)
    fetched = leader.read(0, 1 << 20).records
    info = follower.append_as_follower(fetched, now_ms=0)
    assert (info.first_offset, info.last_offset) == (0, 3)
    assert follower.read(0, 1 << 20).records == fetched
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    with pytest.raises(UnexpectedAppendOffsetError, match="below the log end offset 4"):
        follower.append_as_follower(fetched, now_ms=0)


def test_big_follower_batches_are_not_size_checked(tmp_path):
    leader = Log.open(tmp_path / "a" / "t-0", LogConfig(), now_ms=0)
    leader.append_as_leader(batch(50), leader_epoch=0, now_ms=0)
    follower = Log.open(tmp_path / "b" / "t-0", LogConfig(max_message_bytes=100), now_ms=0)
    follower.append_as_follower(leader.read(0, 1 << 20).records, now_ms=0)
    assert follower.log_end_offset == 50


# ---------------------------------------------------------------- reading


def test_read_returns_whole_batches_within_max_bytes(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=64))
    fill(log, 20)
    size = len(batch(3))
    for start in range(0, 60, 7):
        for max_bytes in (1, size, size + 1, 3 * size - 1, 10 * size):
            data = log.read(start, max_bytes).records
            got = offsets(data)
            assert got[0][0] <= start <= got[0][1]
            assert len(data) == size * len(got)
            assert len(got) == max(1, min(max_bytes // size, 20 - start // 3))


def test_read_never_crosses_the_upper_bound(tmp_path):
    log = open_log(tmp_path)
    fill(log, 10)  # offsets 0..29, batches of 3
    assert offsets(log.read(0, 1 << 20, upper_bound=9).records) == [(0, 2), (3, 5), (6, 8)]
    assert offsets(log.read(0, 1 << 20, upper_bound=10).records) == [(0, 2), (3, 5), (6, 8)]
    assert offsets(log.read(4, 1 << 20, upper_bound=12).records) == [(3, 5), (6, 8), (9, 11)]
    empty = log.read(9, 1 << 20, upper_bound=9)
    assert empty.records == b"" and empty.first_offset == 9
    assert log.read(10, 1 << 20, upper_bound=11).records == b""  # batch 9..11 crosses it


def test_a_batch_bigger_than_max_bytes_is_returned_whole(tmp_path):
    log = open_log(tmp_path, LogConfig())
    big = batch(100, value=b"x" * 100)
    log.append_as_leader(big, leader_epoch=0, now_ms=0)
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=0)
    fetched = log.read(50, 100)
    assert offsets(fetched.records) == [(0, 99)] and len(fetched.records) == len(big)
    assert log.read(50, 100, min_one_batch=False).records == b""


def test_read_bounds(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    assert log.read(9, 100).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 100)
    log.maybe_increment_log_start_offset(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    assert offsets(log.read(4, 100).records)[0] == (3, 5)


def test_reads_stay_in_one_segment_and_continue_in_the_next(tmp_path):
    log = open_log(tmp_path)
    fill(log, 30)
    assert len(log.segments) > 2
    second = log.segments[1]
    fetched = log.read(second.base_offset - 1, 1 << 20)
    assert offsets(fetched.records)[-1][1] == second.base_offset - 1
    fetched = log.read(second.base_offset, 1 << 20)
    assert fetched.segment_base_offset == second.base_offset and fetched.position == 0


def test_offset_metadata_locates_batches(tmp_path):
    log = open_log(tmp_path)
    fill(log, 10)
    size = len(batch(3))
    meta = log.offset_metadata_or_error(4)
    assert (meta.segment_base_offset, meta.position) == (0, size)
    assert log.offset_metadata_or_error(log.log_end_offset) == log.log_end_offset_metadata
    with pytest.raises(OffsetOutOfRangeError):
        log.offset_metadata_or_error(log.log_end_offset + 1)


# ---------------------------------------------------------------- rolling


def test_roll_by_segment_bytes_index_and_time(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=2 * len(batch(3))))
    fill(log, 5)
    assert [s.base_offset for s in log.segments] == [0, 6, 12]

    log = Log.open(
        tmp_path / "b-0", LogConfig(segment_index_bytes=16, index_interval_bytes=0), now_ms=0
    )
    fill(log, 6)  # two offset-index entries fill a 16-byte index
    assert len(log.segments) > 1

    log = Log.open(tmp_path / "c-0", LogConfig(segment_ms=100), now_ms=0)
    log.append_as_leader(batch(1, ts=1_000), leader_epoch=0, now_ms=0)
    log.append_as_leader(batch(1, ts=1_100), leader_epoch=0, now_ms=0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=1_101), leader_epoch=0, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_explicit_roll_and_empty_active_segment(tmp_path):
    log = open_log(tmp_path)
    assert log.roll(now_ms=0) is log.active_segment  # empty at the LEO: nothing to do
    fill(log, 1)
    log.roll(now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert log.read(3, 100).records == b""


# ---------------------------------------------------------------- truncation


def test_truncate_to_drops_tail_segments_and_epochs(tmp_path):
    log = open_log(tmp_path)
    fill(log, 10, epoch=1)
    fill(log, 10, epoch=2)  # epoch 2 starts at 30
    log.flush()
    assert log.recovery_point == 60
    assert log.truncate_to(33)
    assert log.log_end_offset == 33
    assert log.recovery_point == 33
    assert log.leader_epoch_cache.entries == (EpochEntry(1, 0), EpochEntry(2, 30))
    assert all(s.base_offset <= 33 for s in log.segments)
    assert offsets(log.read(30, 1 << 20).records)[-1] == (30, 32)
    assert log.truncate_to(29)
    assert log.leader_epoch_cache.entries == (EpochEntry(1, 0),)
    assert not log.truncate_to(100)
    # A truncation point inside a batch removes the whole batch.
    assert log.truncate_to(25)
    assert log.log_end_offset == 24
    info = log.append_as_leader(batch(1), leader_epoch=3, now_ms=0)
    assert info.first_offset == 24


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path)
    fill(log, 10, epoch=1)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (500, 500, 1)
    assert log.leader_epoch_cache.entries == ()
    assert log.append_as_leader(batch(1), leader_epoch=2, now_ms=0).first_offset == 500


# ---------------------------------------------------------------- retention


def test_retention_by_bytes_keeps_whole_segments_and_an_active_one(tmp_path):
    log = open_log(tmp_path)
    fill(log, 30, epoch=1)
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    limit = total - sizes[0] - sizes[1] // 2  # room for dropping the first segment only
    log.update_config(SMALL.merged(retention_bytes=limit))
    assert log.delete_old_segments(now_ms=0) == 1
    assert log.size_in_bytes == total - sizes[0]
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.leader_epoch_cache.earliest_entry == EpochEntry(1, log.log_start_offset)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.update_config(SMALL.merged(retention_bytes=0))
    log.delete_old_segments(now_ms=0)
    assert len(log.segments) == 1 and log.size_in_bytes == 0
    assert log.log_start_offset == log.log_end_offset == 90


def test_retention_by_time_uses_each_segments_largest_timestamp(tmp_path):
    log = open_log(tmp_path, SMALL.merged(retention_ms=1_000))
    fill(log, 30, ts=10_000)  # batch i has timestamps 10_000 + 10 i .. + 2
    newest_first_segment = log.segments[0].largest_timestamp
    assert log.delete_old_segments(now_ms=newest_first_segment + 1_000) == 0
    assert log.delete_old_segments(now_ms=newest_first_segment + 1_001) == 1
    remaining = len(log.segments)
    assert log.delete_old_segments(now_ms=10**9) == remaining
    assert log.size_in_bytes == 0 and log.log_end_offset == 90


def test_retention_respects_high_watermark_and_cleanup_policy(tmp_path):
    log = open_log(tmp_path, SMALL.merged(retention_bytes=0))
    fill(log, 30)
    second = log.segments[1].base_offset
    assert log.delete_old_segments(now_ms=0, high_watermark=second) == 1
    assert log.log_start_offset == second
    compact = SMALL.merged({"cleanup.policy": "compact", "retention.bytes": "0"})
    log.update_config(compact)
    assert log.delete_old_segments(now_ms=0) == 0


def test_log_start_offset_increment_then_retention(tmp_path):
    log = open_log(tmp_path)
    fill(log, 30, epoch=1)
    third = log.segments[2].base_offset
    assert log.maybe_increment_log_start_offset(third + 1)
    assert not log.maybe_increment_log_start_offset(third)
    assert log.delete_old_segments(now_ms=0) == 2
    assert log.segments[0].base_offset == third and log.log_start_offset == third + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(10_000)


# ---------------------------------------------------------------- timestamps


def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):  # batch i: offsets 3i..3i+2, timestamps 100i, 100i+1, 100i+2
        log.append_as_leader(batch(3, ts=100 * i, codec=Codec.LZ4), leader_epoch=0, now_ms=0)
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(1) == (1, 1)
    assert log.offset_for_timestamp(3) == (3, 100)
    assert log.offset_for_timestamp(1502) == (47, 1502)
    assert log.offset_for_timestamp(1503) == (48, 1600)
    assert log.offset_for_timestamp(2902) == (89, 2902)
    assert log.offset_for_timestamp(2903) is None
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (90, -1)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    log.maybe_increment_log_start_offset(50)
    assert log.offset_for_timestamp(0) == (50, 1602)


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path):
    log = open_log(tmp_path)
    for ts in (500, 100, 900, 300, 1000):
        log.append_as_leader(batch(1, ts=ts), leader_epoch=0, now_ms=0)
    assert log.offset_for_timestamp(200) == (0, 500)
    assert log.offset_for_timestamp(600) == (2, 900)
    assert log.offset_for_timestamp(950) == (4, 1000)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.lists(st.integers(0, 50), min_size=1, max_size=4), min_size=1, max_size=25))
def test_max_timestamp_is_the_first_record_holding_the_largest_timestamp(tmp_path_factory, batches):
    """KIP-734 (ListOffsets v7): the exact record, not its batch's last offset, in
    whichever segment holds it, before and after the log is closed and opened again."""
    path = tmp_path_factory.mktemp("max-ts")
    log = Log.open(path / "topic-0", SMALL, now_ms=0)
    stamps = [ts for timestamps in batches for ts in timestamps]
    for timestamps in batches:
        records = [Record(None, b"v" * 60, ts) for ts in timestamps]
        log.append_as_leader(build_batch(records), leader_epoch=0, now_ms=0)
    expected = (stamps.index(max(stamps)), max(stamps))
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == expected
    log.close()
    log = Log.open(path / "topic-0", SMALL, now_ms=0)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == expected
    log.close()


def test_max_timestamp_of_an_empty_log_and_earliest_local(tmp_path):
    log = open_log(tmp_path)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) is None
    fill(log, 5)
    log.maybe_increment_log_start_offset(4)
    assert log.offset_for_timestamp(EARLIEST_LOCAL_TIMESTAMP) == (4, -1)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (14, 1042)


# ---------------------------------------------------------------- flushing


def test_flush_messages_and_flush_ms_fsync_and_move_the_recovery_point(tmp_path):
    log = open_log(tmp_path, SMALL.merged(flush_messages=5))
    fill(log, 1)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 6
    log = Log.open(tmp_path / "b-0", SMALL.merged(flush_ms=100), now_ms=0)
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=50)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=100)
    assert log.recovery_point == 2
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=150)
    assert not log.maybe_flush(now_ms=199)
    assert log.maybe_flush(now_ms=200) and log.recovery_point == 3


def test_rolled_segments_are_flushed_by_maybe_flush(tmp_path):
    log = open_log(tmp_path)
    fill(log, 20)
    assert log.recovery_point == 0
    assert log.maybe_flush(now_ms=0)
    assert log.recovery_point == log.active_segment.base_offset


def test_a_flush_run_elsewhere_moves_the_recovery_point_only_once_it_ran(tmp_path):
    log = open_log(tmp_path)
    fill(log, 20)
    pending = log.due_flush(now_ms=0)
    assert pending is not None and log.recovery_point == 0
    fill(log, 2)  # appends and rolls go on while the fsyncs run (in a worker thread)
    pending.run()
    log.finish_flush(pending, synced=True)
    assert 0 < log.recovery_point == pending.upto <= log.log_end_offset


def test_a_flush_overtaken_by_truncation_or_failure_does_not_move_the_recovery_point(tmp_path):
    log = open_log(tmp_path)
    fill(log, 20)
    pending = log.due_flush(now_ms=0)
    log.truncate_to(pending.upto - 1)
    fill(log, 5)  # new, unsynced data now sits at offsets below pending.upto
    pending.run()
    log.finish_flush(pending, synced=True)
    assert log.recovery_point == 0
    failed = log.due_flush(now_ms=0)
    failed.run()
    log.finish_flush(failed, synced=False)
    assert log.recovery_point == 0
    assert log.maybe_flush(now_ms=0) and log.recovery_point > 0


def test_a_pending_flush_survives_the_log_closing_under_it(tmp_path):
    log = open_log(tmp_path)
    fill(log, 20)
    pending = log.due_flush(now_ms=0)
    log.close()
    pending.run()  # duplicated descriptors: still valid, then closed
    log.finish_flush(pending, synced=True)


def test_a_new_epoch_is_checkpointed_at_once_and_synced_with_the_next_flush(tmp_path):
    log = open_log(tmp_path)
    fill(log, 1, epoch=3)
    checkpoint = LeaderEpochCheckpointFile(log.directory / LEADER_EPOCH_CHECKPOINT)
    assert checkpoint.read() == [(3, 0)]  # on disk already (its fsync waits for a flush)
    failed = log.prepare_flush()
    assert failed.epoch_checkpoint
    failed.run()
    log.finish_flush(failed, synced=False)
    retried = log.prepare_flush()
    assert retried.epoch_checkpoint  # handed out again after a failed sync
    retried.run()
    log.finish_flush(retried, synced=True)
    assert log.prepare_flush() is None  # data and checkpoint both synced


def test_closed_log_refuses_work(tmp_path):
    log = open_log(tmp_path)
    log.close()
    with pytest.raises(Exception, match="closed"):
        log.append_as_leader(batch(1), leader_epoch=0, now_ms=0)


def test_delete_removes_the_directory(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    log.delete()
    assert not (tmp_path / "topic-0").exists()


def test_reads_cut_at_exact_batch_boundaries_with_a_sparse_index(tmp_path):
    log = open_log(tmp_path, LogConfig())  # 4 KiB index interval: few entries, long scans
    fill(log, 20)
    size = len(batch(3))
    for start in (0, 4, 31):
        first = start // 3
        for k in range(1, 6):
            assert len(offsets(log.read(start, k * size).records)) == k
            assert len(offsets(log.read(start, k * size - 1).records)) == max(1, k - 1)
            assert len(offsets(log.read(start, k * size + 1).records)) == k
        assert offsets(log.read(start, 1 << 20).records)[0][0] == 3 * first


def test_truncation_then_new_appends_keep_time_lookups_and_retention_right(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0, retention_ms=1_000))
    for i in range(10):  # offsets 3i..3i+2 at 10_000 + 100 i (+0, +1, +2)
        log.append_as_leader(batch(3, ts=10_000 + 100 * i), leader_epoch=0, now_ms=0)
    log.truncate_to(15)  # keeps timestamps up to 10_402
    assert log.active_segment.max_timestamp == 10_402
    assert log.offset_for_timestamp(10_500) is None
    log.append_as_leader(batch(3, ts=10_450), leader_epoch=0, now_ms=0)
    assert log.offset_for_timestamp(10_403) == (15, 10_450)
    assert log.offset_for_timestamp(10_451) == (16, 10_451)
    log.roll(now_ms=0)
    log.append_as_leader(batch(1, ts=50_000), leader_epoch=0, now_ms=0)
    assert log.delete_old_segments(now_ms=10_452 + 1_000) == 0
    assert log.delete_old_segments(now_ms=10_452 + 1_001) == 1
