"""All partition logs of one log directory (Kafka's LogManager, for a single log dir).

How it works: `open` takes an exclusive `flock` on `<log dir>/.lock` (a second broker on
the same dir gets `LogDirLockedError`), reads the checkpoint files, and opens every
`<topic>-<partition>` directory as a `Log`:

- `recovery-point-offset-checkpoint` says, per partition, up to where the log is known to
  be on disk; segments from there on are re-validated. `log-start-offset-checkpoint`
  restores log start offsets that lie inside a segment.
- `scrub-offset-checkpoint` is the scrubber's (broker/tasks/log_scrubber.py): how far its
  current pass has checked each log (`read_scrub_positions`/`write_scrub_positions`).
- `cleaner-offset-checkpoint` gives each log its cleaner checkpoint (where compaction
  stopped); the cleaner writes it after every pass (`checkpoint_cleaner_offsets`).
- `.kafka_cleanshutdown`, written by `close()` after everything was flushed, lets the next
  start skip recovery; it is removed (durably) once the logs are open.
- A checkpoint that cannot be parsed is logged as one line and ignored: every log is then
  recovered from its first segment. That costs time, never data.

The broker owns `replication-offset-checkpoint` (high watermarks) through
`read_high_watermarks`/`write_high_watermarks`, and drives the periodic work:
`run_retention`, `due_flushes` (flush.ms and rolled-but-unflushed segments, as
`PendingFlush`es the broker runs in a worker thread; `flush_dirty` runs them in place),
`checkpoint_recovery_points`, `checkpoint_log_start_offsets` (or a snapshot taken on the
loop, `recovery_points()`, and its write in a worker thread). `close` is the clean
shutdown path: flush, close, checkpoint, mark clean, unlock.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from broker.core.log.checkpoint import OffsetCheckpointFile, fsync_dir, write_atomically
from broker.core.log.config import LogConfig
from broker.core.log.errors import CheckpointError, LogDirLockedError, LogError
from broker.core.log.flush import PendingFlush
from broker.core.log.local_log import parse_topic_partition
from broker.core.log.log import Log
from broker.core.log.producer_state import DEFAULT_PRODUCER_EXPIRATION_MS
from client.protocol.types import TopicPartition

__all__ = [
    "CLEANER_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "HIGH_WATERMARK_CHECKPOINT",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "SCRUB_CHECKPOINT",
    "LogManager",
]

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
SCRUB_CHECKPOINT = "scrub-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_SUFFIX = "-delete"


def _lock_dir(log_dir: Path) -> io.FileIO:
    """Hold an exclusive flock on the dir's lock file (released when the file closes,
    also when a crashed process's file objects are dropped)."""
    lock = io.FileIO(log_dir / LOCK_FILE, "a+")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise LogDirLockedError(
            f"log dir {log_dir} is in use by another broker (cannot lock {log_dir / LOCK_FILE})"
        ) from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n".encode())
    return lock


class LogManager:
    """The logs of one log dir. Create it with `LogManager.open`."""

    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig,
        topic_configs: Callable[[str], LogConfig] | None,
        lock: io.FileIO,
    ) -> None:
        self._dir = log_dir
        self._default_config = default_config
        self._topic_configs = topic_configs
        self._lock: io.FileIO | None = lock
        self._logs: dict[TopicPartition, Log] = {}
        self._recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT)
        self._log_starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT)
        self._high_watermarks = OffsetCheckpointFile(log_dir / HIGH_WATERMARK_CHECKPOINT)
        self._cleaner_offsets = OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT)
        self._scrub_offsets = OffsetCheckpointFile(log_dir / SCRUB_CHECKPOINT)
        # transactional.id.expiration.ms: idle idempotent producers are forgotten at
        # retention time (the broker sets it from its config).
        self.producer_expiration_ms = DEFAULT_PRODUCER_EXPIRATION_MS

    @classmethod
    def open(
        cls,
        log_dir: str | os.PathLike[str],
        default_config: LogConfig,
        *,
        now_ms: int,
        topic_configs: Callable[[str], LogConfig] | None = None,
    ) -> LogManager:
        """Lock `log_dir` (created if needed) and open every partition log in it."""
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        manager = cls(log_dir, default_config, topic_configs, _lock_dir(log_dir))
        try:
            manager._load(now_ms)
        except BaseException:
            manager._close_logs_and_unlock()
            raise
        return manager

    def _read_checkpoint(self, checkpoint: OffsetCheckpointFile, fallback: str) -> dict | None:
        try:
            return checkpoint.read()
        except CheckpointError as exc:
            logger.error("Ignoring a bad checkpoint file, %s: %s", fallback, exc)
            return None

    def _load(self, now_ms: int) -> None:
        marker = self._dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = self._read_checkpoint(
            self._recovery_points, "recovering every log from its first segment"
        )
        if recovery_points is None:
            recovery_points, clean = {}, False
        log_starts = self._read_checkpoint(
            self._log_starts, "log start offsets fall back to the first segment"
        )
        log_starts = log_starts or {}
        cleaned = self._read_checkpoint(
            self._cleaner_offsets, "compacted logs are cleaned again from their start"
        )
        cleaned = cleaned or {}
        for name in sorted(os.listdir(self._dir)):
            path = self._dir / name
            if not path.is_dir():
                continue
            if name.endswith(DELETE_SUFFIX):
                logger.info("Removing partially deleted log directory %s", name)
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                tp = parse_topic_partition(name)
            except LogError:
                logger.warning(
                    "Skipping %s in log dir %s: not a partition directory", name, self._dir
                )
                continue
            self._logs[tp] = Log.open(
                path,
                self._config_for(tp.topic),
                now_ms=now_ms,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp),
                had_clean_shutdown=clean,
            )
            self._logs[tp].update_cleaner_checkpoint(cleaned.get(tp, 0))
        if marker.exists():
            marker.unlink()
            fsync_dir(self._dir)
        logger.info(
            "Loaded %d log(s) from %s (%s shutdown)",
            len(self._logs),
            self._dir,
            "clean" if clean else "unclean",
        )

    def _config_for(self, topic: str) -> LogConfig:
        if self._topic_configs is not None:
            return self._topic_configs(topic)
        return self._default_config

    # ------------------------------------------------------------------ logs

    @property
    def log_dir(self) -> Path:
        return self._dir

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def get_or_create_log(
        self,
        tp: TopicPartition,
        config: LogConfig | None = None,
        *,
        now_ms: int,
        sync_dir: bool = True,
    ) -> Log:
        """The log of `tp`, created empty (with `config` or the topic's) if there is none.
        Its directory entry is made durable at once, or, without `sync_dir`, by the
        caller's `sync_log_dir()` after a batch of creations (one fsync for a
        LeaderAndIsr of thousands of new partitions rather than one each: at ~15 ms each
        they stalled the event loop for 30 s and the new followers fell out of the ISRs)."""
        log = self._logs.get(tp)
        if log is not None:
            return log
        self._check_open()
        path = self._dir / f"{tp.topic}-{tp.partition}"
        log = Log.open(path, config or self._config_for(tp.topic), now_ms=now_ms)
        if sync_dir:
            fsync_dir(self._dir)
        self._logs[tp] = log
        logger.info("Created log %s in %s", tp, self._dir)
        return log

    def sync_log_dir(self) -> None:
        """Make the logs created with `sync_dir=False` durable (one directory fsync)."""
        fsync_dir(self._dir)

    def delete_log(self, tp: TopicPartition) -> bool:
        """Close and remove the log of `tp`; returns whether there was one."""
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        log.close()
        doomed = self._dir / f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        os.replace(log.directory, doomed)
        fsync_dir(self._dir)
        shutil.rmtree(doomed, ignore_errors=True)
        logger.info("Deleted log %s", tp)
        return True

    def all_logs(self) -> Mapping[TopicPartition, Log]:
        """A read-only live view of the logs by partition."""
        return MappingProxyType(self._logs)

    def update_topic_config(self, topic: str, config: LogConfig) -> int:
        """Apply `config` to every open log of `topic`; returns how many."""
        count = 0
        for tp, log in self._logs.items():
            if tp.topic == topic:
                log.update_config(config)
                count += 1
        return count

    # ------------------------------------------------------------------ checkpoints

    def checkpoint_recovery_points(self) -> None:
        self.write_recovery_points(self.recovery_points())

    def checkpoint_log_start_offsets(self) -> None:
        self.write_log_start_offsets(self.log_start_offsets())

    def recovery_points(self) -> dict[TopicPartition, int]:
        return {tp: log.recovery_point for tp, log in self._logs.items()}

    def log_start_offsets(self) -> dict[TopicPartition, int]:
        return {tp: log.log_start_offset for tp, log in self._logs.items()}

    def write_recovery_points(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Write the `recovery-point-offset-checkpoint` from a snapshot taken earlier
        (`recovery_points()`); safe in a worker thread while one writer at a time runs."""
        self._recovery_points.write(offsets)

    def write_log_start_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        """`write_recovery_points` for the `log-start-offset-checkpoint`."""
        self._log_starts.write(offsets)

    def checkpoint_cleaner_offsets(self) -> None:
        """Write `cleaner-offset-checkpoint`: the cleaner checkpoint of every log that has
        one (Kafka's LogCleanerManager keeps this file)."""
        self._cleaner_offsets.write(
            {tp: log.cleaner_checkpoint for tp, log in self._logs.items() if log.cleaner_checkpoint}
        )

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """The `replication-offset-checkpoint`; {} (logged) if missing or bad."""
        high_watermarks = self._read_checkpoint(
            self._high_watermarks, "high watermarks restart from the log start offsets"
        )
        return high_watermarks or {}

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        self._high_watermarks.write(high_watermarks)

    def read_scrub_positions(self) -> dict[TopicPartition, int]:
        """The scrubber's `scrub-offset-checkpoint` (where its pass stands per log); {}
        (logged) if missing or bad: the pass then starts again from the log starts."""
        return self._read_checkpoint(self._scrub_offsets, "scrubbing starts a new pass") or {}

    def write_scrub_positions(self, positions: Mapping[TopicPartition, int]) -> None:
        self._scrub_offsets.write(
            {tp: offset for tp, offset in positions.items() if tp in self._logs}
        )

    # ------------------------------------------------------------------ periodic work

    def run_retention(
        self,
        now_ms: int,
        *,
        high_watermarks: Mapping[TopicPartition, int] | None = None,
        checkpoint: bool = True,
    ) -> int:
        """Apply retention to every log; segments deleted in total. With
        `high_watermarks`, a log only loses segments wholly below its HW. When segments
        went, the log start offsets are checkpointed, unless `checkpoint` is False (the
        broker then writes them itself, in a worker thread)."""
        deleted = 0
        for tp, log in self._logs.items():
            hw = high_watermarks.get(tp) if high_watermarks is not None else None
            if high_watermarks is not None and hw is None:
                continue
            deleted += log.delete_old_segments(now_ms, high_watermark=hw)
            log.remove_expired_producers(now_ms, self.producer_expiration_ms)
        if deleted and checkpoint:
            self.checkpoint_log_start_offsets()
        return deleted

    def delete_due_files(self, now_ms: int) -> int:
        """Remove the `.deleted` segment files of every log whose delay has passed."""
        return sum(log.delete_due_files(now_ms) for log in self._logs.values())

    def flush_dirty(self, now_ms: int) -> int:
        """Flush logs due by `flush.ms` and logs with rolled, unflushed segments."""
        return sum(1 for log in self._logs.values() if log.maybe_flush(now_ms))

    def due_flushes(self, now_ms: int) -> list[PendingFlush]:
        """`flush_dirty`'s flushes, prepared to run elsewhere (see `Log.prepare_flush`)."""
        return [p for p in (log.due_flush(now_ms) for log in self._logs.values()) if p]

    # ------------------------------------------------------------------ shutdown

    def close(self) -> None:
        """Clean shutdown: flush and close every log, checkpoint, mark clean, unlock."""
        if self._lock is None:
            return
        clean = True
        for tp, log in self._logs.items():
            try:
                log.flush()
            except OSError as exc:
                clean = False
                logger.error("Flushing log %s at shutdown failed: %s", tp, exc)
            log.close()
        try:
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
            self.checkpoint_cleaner_offsets()
            if clean:
                write_atomically(self._dir / CLEAN_SHUTDOWN_FILE, "")
        finally:
            self._unlock()
        logger.info("Closed %d log(s) in %s", len(self._logs), self._dir)

    def _close_logs_and_unlock(self) -> None:
        for log in self._logs.values():
            log.close()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _check_open(self) -> None:
        if self._lock is None:
            raise LogError(f"log manager for {self._dir} is closed")
