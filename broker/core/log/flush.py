"""When one partition's log is fsynced, and its recovery point (Kafka's flush half of
`LocalLog`/`UnifiedLog`).

How it works: the recovery point is the offset below which the log is known to be on
disk; recovery on open (`loader.py`) re-reads the segments from the one holding it.
Durability is the OS's unless `flush.messages`/`flush.ms` ask for fsync
(`due_after_append`). Rolling does not fsync: the broker's flusher task flushes rolled
segments (and `flush.ms`) as Kafka's scheduled "flush-log" task does, off the event
loop: `due`/`prepare` return a `PendingFlush` holding duplicated descriptors (the
segments from the one holding the recovery point up to `upto`, the leader-epoch
checkpoint if it was rewritten, the directory if entries were added or removed), its
`run()` fsyncs them in a worker thread, and `finish` moves the recovery point afterwards
unless the log was truncated meanwhile (`truncations` counts them) or the flush failed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from broker.core.log.checkpoint import fsync_dir
from broker.core.log.leader_epoch import LeaderEpochCache
from broker.core.log.local_log import LocalLog
from client.protocol.types import TopicPartition

__all__ = ["FlushOwner", "LogFlusher", "PendingFlush"]


class FlushOwner(Protocol):
    """What a `PendingFlush` reports back to once it ran: the `Log` it was prepared for."""

    @property
    def topic_partition(self) -> TopicPartition: ...

    def finish_flush(self, pending: PendingFlush, *, synced: bool) -> None: ...


class PendingFlush:
    """fsyncs prepared by `Log.prepare_flush`: `run()` does them (blocking; any thread)
    on duplicated descriptors, which it closes, then the directory if a file was added
    or removed in it; `Log.finish_flush` records the result on the event loop."""

    __slots__ = ("log", "upto", "descriptors", "directory", "truncations", "epoch_checkpoint")

    def __init__(
        self,
        log: FlushOwner,
        upto: int,
        descriptors: list[int],
        directory: Path | None,
        truncations: int,
        epoch_checkpoint: bool = False,
    ) -> None:
        self.log = log
        self.upto = upto
        self.descriptors = descriptors
        self.directory = directory
        self.truncations = truncations
        self.epoch_checkpoint = epoch_checkpoint  # the leader-epoch checkpoint is among them

    def run(self) -> None:
        try:
            for descriptor in self.descriptors:
                os.fsync(descriptor)
            if self.directory is not None:
                fsync_dir(self.directory)
        finally:
            for descriptor in self.descriptors:
                os.close(descriptor)


class LogFlusher:
    """The recovery point of `local` and the decisions to flush it."""

    def __init__(
        self, local: LocalLog, epoch_cache: LeaderEpochCache, recovery_point: int, now_ms: int
    ) -> None:
        self._local = local
        self._epoch_cache = epoch_cache
        self.recovery_point = recovery_point
        self.last_flush_ms = now_ms
        self.truncations = 0  # bumped by every truncation (see finish)

    @property
    def unflushed_messages(self) -> int:
        return self._local.segments[-1].next_offset - self.recovery_point

    def due_after_append(self, now_ms: int) -> bool:
        """Whether an append reached `flush.messages` or `flush.ms` since the last flush."""
        config = self._local.config
        if self._local.segments[-1].next_offset - self.recovery_point >= config.flush_messages:
            return True
        return now_ms - self.last_flush_ms >= config.flush_ms

    def run_now(self, pending: PendingFlush | None) -> bool:
        """Run `pending` here and record it; whether anything was flushed."""
        if pending is None:
            return False
        try:
            pending.run()
        except OSError:
            self.finish(pending, synced=False, closed=False)
            raise
        self.finish(pending, synced=True, closed=False)
        return True

    def prepare(
        self, owner: FlushOwner, upto: int | None, now_ms: int | None
    ) -> PendingFlush | None:
        """`Log.prepare_flush`: the fsyncs that bring the recovery point to `upto` (default
        the LEO), with the leader-epoch checkpoint if it is unsynced; None if none."""
        local = self._local
        leo = local.log_end_offset
        upto = leo if upto is None else min(upto, leo)
        if now_ms is not None:
            self.last_flush_ms = now_ms
        epochs = self._epoch_cache.take_unsynced_checkpoint()
        descriptors: list[int] = []
        if upto > self.recovery_point:
            segments = local.segments
            first = local.floor_index(self.recovery_point)
            for segment in segments[first:]:
                if segment.base_offset >= upto and segment is not segments[first]:
                    break
                descriptors.extend(segment.descriptors_to_flush())
        elif epochs is None:
            return None
        if epochs is not None:
            descriptors.append(epochs)
            local.dir_dirty = True  # the checkpoint was renamed into place
        directory = local.directory if local.dir_dirty else None
        local.dir_dirty = False
        return PendingFlush(
            owner, upto, descriptors, directory, self.truncations, epochs is not None
        )

    def finish(self, pending: PendingFlush, *, synced: bool, closed: bool) -> None:
        """`Log.finish_flush`: the recovery point moves to the end of a `pending` that
        ran, unless it failed, or the log was truncated or closed meanwhile."""
        if not synced:
            self._local.dir_dirty = self._local.dir_dirty or pending.directory is not None
            if pending.epoch_checkpoint:
                self._epoch_cache.checkpoint_unsynced()
            return
        if closed or pending.truncations != self.truncations:
            return
        leo = self._local.log_end_offset
        self.recovery_point = max(self.recovery_point, min(pending.upto, leo))

    def due(self, owner: FlushOwner, now_ms: int) -> PendingFlush | None:
        """`Log.due_flush`: flush when `flush.ms` has passed with unflushed data, or rolled
        segments are unflushed (Kafka flushes those after every roll); else None."""
        if self.unflushed_messages <= 0:
            return None
        if now_ms - self.last_flush_ms >= self._local.config.flush_ms:
            return self.prepare(owner, None, now_ms)
        active_base = self._local.segments[-1].base_offset
        if self.recovery_point < active_base:
            return self.prepare(owner, active_base, None)
        return None

    def truncated(self, new_end: int) -> None:
        """The log was truncated to `new_end`: what a flush in flight covers may be new."""
        self.recovery_point = min(self.recovery_point, new_end)
        self.truncations += 1

    def restarted_at(self, offset: int) -> None:
        """The log was emptied and restarts at `offset`."""
        self.recovery_point = offset
        self.truncations += 1
