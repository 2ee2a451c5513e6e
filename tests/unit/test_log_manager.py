"""LogManager and checkpoint files: restart paths a broker goes through."""

from __future__ import annotations

import logging

import pytest

from broker.core.log import (
    CheckpointError,
    LogConfig,
    LogDirLockedError,
    LogManager,
    OffsetCheckpointFile,
)
from broker.core.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from client.protocol.records import Record, build_batch, decode_batches
from client.protocol.types import TopicPartition

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=100)
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b.x_y-z", 0)


def batch(i: int) -> bytes:
    return build_batch([Record(None, b"value-%d" % i * 10, i)] * 2)


def values(manager: LogManager, tp: TopicPartition) -> list[bytes]:
    log = manager.get_log(tp)
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        records = decode_batches(log.read(offset, 1 << 20).records)
        out += [r.value for r in records if r.offset >= offset]
        offset = records[-1].offset + 1
    return out


def populated(log_dir, batches: int = 20) -> LogManager:
    manager = LogManager.open(log_dir, CONFIG, now_ms=0)
    for tp in (A0, A1, B0):
        log = manager.get_or_create_log(tp, now_ms=0)
        for i in range(batches):
            log.append_as_leader(batch(i), leader_epoch=0, now_ms=0)
    return manager


def crash(manager: LogManager) -> None:
    """Drop every open file as a killed process would (no flush, no checkpoints)."""
    for log in manager.all_logs().values():
        for segment in log.segments:
            segment._file.close()
    manager._lock.close()


# ---------------------------------------------------------------- checkpoint files


def test_offset_checkpoint_format_and_round_trip(tmp_path):
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    assert checkpoint.read() == {}
    checkpoint.write({A1: 7, A0: 3})
    assert (tmp_path / "cp").read_text() == "0\n2\na 0 3\na 1 7\n"
    assert checkpoint.read() == {A0: 3, A1: 7}
    assert not (tmp_path / "cp.tmp").exists()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "line 1"),
        ("1\n0\n", "line 1: unsupported version"),
        ("0\nmany\n", "line 2"),
        ("0\n2\na 0 3\n", "line 4: expected 2 entries, found 1"),
        ("0\n1\na 0\n", "line 3"),
        ("0\n2\na 0 3\na one 3\n", "line 4"),
    ],
)
def test_malformed_checkpoint_names_file_and_line(tmp_path, text, where):
    (tmp_path / "cp").write_text(text)
    with pytest.raises(CheckpointError, match=f"cp: {where}"):
        OffsetCheckpointFile(tmp_path / "cp").read()


# ---------------------------------------------------------------- manager


def test_clean_shutdown_and_restart(tmp_path):
    manager = populated(tmp_path)
    expected = {tp: values(manager, tp) for tp in (A0, A1, B0)}
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    leo = 40
    recovery = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).read()
    assert recovery == {A0: leo, A1: leo, B0: leo}
    assert OffsetCheckpointFile(tmp_path / LOG_START_OFFSET_CHECKPOINT).read() == {
        A0: 0,
        A1: 0,
        B0: 0,
    }

    manager = LogManager.open(tmp_path, CONFIG, now_ms=0)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert set(manager.all_logs()) == {A0, A1, B0}
    assert {tp: values(manager, tp) for tp in (A0, A1, B0)} == expected
    assert all(log.recovery_point == leo for log in manager.all_logs().values())
    manager.close()


def test_a_second_broker_cannot_open_the_same_dir(tmp_path):
    manager = LogManager.open(tmp_path, CONFIG, now_ms=0)
    with pytest.raises(LogDirLockedError, match="in use by another broker"):
        LogManager.open(tmp_path, CONFIG, now_ms=0)
    manager.close()
    LogManager.open(tmp_path, CONFIG, now_ms=0).close()


def test_crash_with_a_torn_tail_recovers_the_rest(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="broker.core.log")
    manager = populated(tmp_path)
    manager.checkpoint_recovery_points()  # all zero: nothing flushed yet
    torn = manager.get_log(A1).active_segment
    crash(manager)
    with open(torn.log_path, "r+b") as file:
        file.truncate(torn.size - 3)
    manager = LogManager.open(tmp_path, CONFIG, now_ms=0)
    assert (
        values(manager, A0)
        == values(manager, B0)
        == [b"value-%d" % i * 10 for i in range(20) for _ in (0, 1)]
    )
    assert manager.get_log(A1).log_end_offset == 38
    assert "a-1" in caplog.text and "runs past the end" in caplog.text
    manager.close()


def test_bad_recovery_checkpoint_is_logged_and_everything_is_recovered(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="broker.core.log")
    manager = populated(tmp_path)
    expected = {tp: values(manager, tp) for tp in (A0, A1, B0)}
    manager.close()
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_text("0\n3\na 0 40\ngarbage\n")
    (tmp_path / LOG_START_OFFSET_CHECKPOINT).write_text("zero\n")
    caplog.clear()
    manager = LogManager.open(tmp_path, CONFIG, now_ms=0)
    bad = [r for r in caplog.records if "bad checkpoint" in r.getMessage()]
    assert len(bad) == 2 and all(r.levelno == logging.ERROR for r in bad)
    assert "recovery-point-offset-checkpoint: line 4" in bad[0].getMessage()
    assert "unclean shutdown" in caplog.text  # the clean marker is not trusted then
    assert {tp: values(manager, tp) for tp in (A0, A1, B0)} == expected
    manager.close()


def test_high_watermark_checkpoint(tmp_path, caplog):
    manager = LogManager.open(tmp_path, CONFIG, now_ms=0)
    assert manager.read_high_watermarks() == {}
    manager.write_high_watermarks({A0: 12, B0: 4})
    assert (tmp_path / HIGH_WATERMARK_CHECKPOINT).read_text() == "0\n2\na 0 12\nb.x_y-z 0 4\n"
    assert manager.read_high_watermarks() == {A0: 12, B0: 4}
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_text("0\n1\n")
    assert manager.read_high_watermarks() == {}
    assert "replication-offset-checkpoint" in caplog.text
    manager.close()


def test_delete_log_and_leftover_delete_dirs(tmp_path):
    manager = populated(tmp_path, 2)
    assert manager.delete_log(A1) and not manager.delete_log(A1)
    assert manager.get_log(A1) is None
    assert not any(p.name.startswith("a-1") for p in tmp_path.iterdir())
    manager.close()
    (tmp_path / "a-7.0123abcd-delete").mkdir()
    (tmp_path / "not a partition").mkdir()
    manager = LogManager.open(tmp_path, CONFIG, now_ms=0)
    assert set(manager.all_logs()) == {A0, B0}
    assert not (tmp_path / "a-7.0123abcd-delete").exists()
    manager.close()


def test_retention_and_log_start_offsets_survive_restart(tmp_path):
    manager = populated(tmp_path)
    log = manager.get_log(A0)
    start = log.segments[1].base_offset + 1
    log.maybe_increment_log_start_offset(start)
    manager.update_topic_config("b.x_y-z", CONFIG.merged(retention_bytes=0))
    deleted = manager.run_retention(now_ms=0, high_watermarks={A0: 40, A1: 40, B0: 20})
    assert deleted >= 2
    assert manager.get_log(B0).log_start_offset <= 20
    assert OffsetCheckpointFile(tmp_path / LOG_START_OFFSET_CHECKPOINT).read()[A0] == start
    manager.close()
    manager = LogManager.open(tmp_path, CONFIG, now_ms=0)
    assert manager.get_log(A0).log_start_offset == start
    manager.close()


def test_flush_dirty_flushes_rolled_segments_and_topic_configs_apply(tmp_path):
    configs = {"a": CONFIG, "b.x_y-z": CONFIG.merged(flush_ms=100)}
    manager = LogManager.open(tmp_path, CONFIG, now_ms=0, topic_configs=configs.__getitem__)
    a0 = manager.get_or_create_log(A0, now_ms=0)
    b0 = manager.get_or_create_log(B0, now_ms=0)
    assert b0.config.flush_ms == 100
    for i in range(20):
        a0.append_as_leader(batch(i), leader_epoch=0, now_ms=0)
    b0.append_as_leader(batch(0), leader_epoch=0, now_ms=0)
    assert manager.flush_dirty(now_ms=50) == 1  # a-0 rolled; b-0 not yet due
    assert a0.recovery_point == a0.active_segment.base_offset > 0
    assert manager.flush_dirty(now_ms=100) == 1 and b0.recovery_point == 2
    manager.close()
