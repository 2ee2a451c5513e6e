"""Opening a log after a crash: torn and corrupt tails, damaged indexes, leftovers."""

from __future__ import annotations

import logging
import os

import pytest

from broker.core.log import EpochEntry, Log, LogConfig
from broker.core.log.log import LEADER_EPOCH_CHECKPOINT
from client.protocol.records import Record, build_batch, iter_batches

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=100)


@pytest.fixture
def caplog_warnings(caplog):
    caplog.set_level(logging.INFO, logger="broker.core.log")
    return caplog


def batch(i: int, n: int = 3) -> bytes:
    return build_batch(
        [Record(b"k%d" % i, b"value-%d" % i * 5, 1_000 + 10 * i + j) for j in range(n)]
    )


def build_log(directory, batches: int = 40, *, epochs=(0,)) -> Log:
    log = Log.open(directory, CONFIG, now_ms=0)
    for i in range(batches):
        log.append_as_leader(batch(i), leader_epoch=epochs[i * len(epochs) // batches], now_ms=0)
    return log


def everything(log: Log) -> list[bytes]:
    """Every batch in the log, read one fetch at a time."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        for pos, header in iter_batches(data):
            out.append(data[pos : pos + header.size])
            offset = header.next_offset
    return out


def reads_at_every_offset(log: Log) -> dict[int, bytes]:
    return {o: log.read(o, 300).records for o in range(log.log_start_offset, log.log_end_offset)}


def crash(log: Log) -> None:
    """Drop the log without closing or flushing it (the page cache keeps what was written)."""
    for segment in log.segments:
        segment._file.close()  # what the OS does to a killed process's descriptors


def warnings_text(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_corrupt_crc_in_the_middle_of_the_last_segment(tmp_path, caplog_warnings):
    directory = tmp_path / "orders-3"
    log = build_log(directory)
    i = 40
    while len(list(iter_batches(log.active_segment.pread(2048, 0)))) < 5:
        log.append_as_leader(batch(i), leader_epoch=0, now_ms=0)
        i += 1
    before = everything(log)
    last = log.active_segment
    batches = list(iter_batches(last.pread(last.size, 0)))
    position, header = batches[len(batches) // 2]
    crash(log)
    with open(last.log_path, "r+b") as file:  # flip one payload byte
        file.seek(position + 70)
        byte = file.read(1)
        file.seek(position + 70)
        file.write(bytes([byte[0] ^ 0x55]))

    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=last.base_offset)
    assert log.log_end_offset == header.base_offset
    kept = [b for b in before if int.from_bytes(b[:8], "big") < header.base_offset]
    assert everything(log) == kept
    assert os.path.getsize(last.log_path) == position
    text = warnings_text(caplog_warnings)
    assert "orders-3" in text
    assert f"offset {header.base_offset}" in text and f"position {position}" in text
    assert "CRC mismatch" in text
    assert text.count("\n") == 0  # one line
    info = log.append_as_leader(batch(99), leader_epoch=0, now_ms=0)
    assert info.first_offset == header.base_offset


def test_half_written_length_prefix(tmp_path, caplog_warnings):
    directory = tmp_path / "t-0"
    log = build_log(directory, 10)
    before, leo, size = everything(log), log.log_end_offset, log.active_segment.size
    path = log.active_segment.log_path
    crash(log)
    with open(path, "ab") as file:
        file.write(batch(50)[:7])
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=0)
    assert log.log_end_offset == leo and everything(log) == before
    assert os.path.getsize(path) == size
    assert "short length prefix" in warnings_text(caplog_warnings)


def test_a_corrupt_batch_in_an_older_segment_cuts_the_log_there(tmp_path, caplog_warnings):
    directory = tmp_path / "t-0"
    log = build_log(directory, 40)
    assert len(log.segments) >= 4
    second = log.segments[1]
    crash(log)
    with open(second.log_path, "r+b") as file:
        file.seek(17)  # the CRC field of the segment's first batch
        file.write(b"\0\0\0\0")
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=0)
    assert log.log_end_offset == second.base_offset
    assert len(log.segments) == 2 and log.segments[1].size == 0
    assert "removed" in warnings_text(caplog_warnings)


def test_deleted_index_is_rebuilt_and_lookups_stay_right(tmp_path, caplog_warnings):
    directory = tmp_path / "t-0"
    log = build_log(directory, 40)
    log.flush()
    reads = reads_at_every_offset(log)
    older = log.segments[1]
    index_path = older.offset_index._file.path
    original_index = index_path.read_bytes()
    assert len(original_index) > 0
    log.close()
    index_path.unlink()

    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=log.log_end_offset)
    assert "rebuilding the indexes of segment" in warnings_text(caplog_warnings)
    assert index_path.read_bytes() == original_index
    assert reads_at_every_offset(log) == reads


def test_truncated_time_index_is_rebuilt(tmp_path, caplog_warnings):
    directory = tmp_path / "t-0"
    log = build_log(directory, 40)
    log.flush()
    answers = {ts: log.offset_for_timestamp(ts) for ts in range(990, 1_420, 7)}
    older = log.segments[1]
    time_path = older.time_index._file.path
    original = time_path.read_bytes()
    log.close()
    with open(time_path, "r+b") as file:
        file.truncate(len(original) - 5)

    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=log.log_end_offset)
    assert "timeindex" in warnings_text(caplog_warnings)
    assert time_path.read_bytes() == original
    assert {ts: log.offset_for_timestamp(ts) for ts in answers} == answers


def test_index_pointing_past_the_log_is_rebuilt(tmp_path, caplog_warnings):
    directory = tmp_path / "t-0"
    log = build_log(directory, 40)
    log.flush()
    reads = reads_at_every_offset(log)
    index_path = log.segments[0].offset_index._file.path
    log.close()
    with open(index_path, "ab") as file:
        file.write((10**5).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=log.log_end_offset)
    assert "past the log" in warnings_text(caplog_warnings)
    assert reads_at_every_offset(log) == reads


def test_empty_partition_dir_opens_empty(tmp_path):
    (tmp_path / "t-0").mkdir()
    log = Log.open(tmp_path / "t-0", CONFIG, now_ms=0)
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (0, 0, 0)
    log = Log.open(tmp_path / "u-1", CONFIG, now_ms=0, log_start_offset=120)
    assert (log.log_start_offset, log.log_end_offset) == (120, 120)
    assert log.append_as_leader(batch(0), leader_epoch=0, now_ms=0).first_offset == 120


def test_missing_segment_files_below_the_log_start_offset(tmp_path, caplog_warnings):
    directory = tmp_path / "t-0"
    log = build_log(directory, 10)
    log.close()
    log = Log.open(directory, CONFIG, now_ms=0, log_start_offset=1_000)
    assert (log.log_start_offset, log.log_end_offset) == (1_000, 1_000)
    assert "below the log start offset" in warnings_text(caplog_warnings)


def test_leftover_temporary_and_orphan_files_are_removed(tmp_path):
    directory = tmp_path / "t-0"
    log = build_log(directory, 5)
    log.close()
    leftovers = [
        "00000000000000000000.log.deleted",
        "00000000000000000007.log.swap",
        "00000000000000000000.log.cleaned",
        "leader-epoch-checkpoint.tmp",
        "00000000000000000099.index",
    ]
    for name in leftovers:
        (directory / name).write_bytes(b"junk")
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=0)
    assert not any((directory / name).exists() for name in leftovers)
    assert log.log_end_offset == 15


def test_torn_tail_truncates_the_epoch_cache(tmp_path):
    directory = tmp_path / "t-0"
    log = build_log(directory, 40, epochs=(1, 1, 1, 2))  # epoch 2 starts at offset 90
    assert log.leader_epoch_cache.entries == (EpochEntry(1, 0), EpochEntry(2, 90))
    crash(log)
    lost = [s for s in log.segments if s.next_offset > 90]
    for segment in lost:
        segment.log_path.unlink()
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=0)
    assert log.log_end_offset == lost[0].base_offset <= 90
    assert log.leader_epoch_cache.entries == (EpochEntry(1, 0),)


def test_bad_epoch_checkpoint_is_rebuilt_from_batch_headers(tmp_path, caplog_warnings):
    directory = tmp_path / "t-0"
    log = build_log(directory, 20, epochs=(3, 5))
    expected = log.leader_epoch_cache.entries
    log.close()
    (directory / LEADER_EPOCH_CHECKPOINT).write_text("0\n2\n3 zero\n5 30\n")
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=log.log_end_offset)
    assert log.leader_epoch_cache.entries == expected
    text = warnings_text(caplog_warnings)
    assert "leader-epoch-checkpoint: line 3" in text and "rebuilding" in text
    assert (directory / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n3 0\n5 30\n"


def test_clean_shutdown_reopens_without_recovery(tmp_path):
    directory = tmp_path / "t-0"
    log = build_log(directory, 40)
    log.flush()
    reads = reads_at_every_offset(log)
    leo = log.log_end_offset
    log.close()
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=leo, had_clean_shutdown=True)
    assert log.log_end_offset == leo and log.recovery_point == leo
    assert reads_at_every_offset(log) == reads
