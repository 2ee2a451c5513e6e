"""Recovery when a partition's log opens (Kafka 3.x's `LogLoader`).

How it works, in `LogLoader.load`'s order:
1. A segment replacement a crash interrupted is finished or undone (`swap.py`), then
   leftover temporary files (`.deleted`, `.cleaned`, `.swap`, `.tmp`) and index files
   without their `.log` are removed.
2. Every `<base>.log` is opened as a `LogSegment`; one whose index files are missing or
   inconsistent is noted.
3. The leader-epoch checkpoint is read (an unreadable one is rebuilt from the batch
   headers).
4. Segments from the one holding the recovery point onward (none after a clean
   shutdown), and every noted segment, are re-read batch by batch and their indexes
   rebuilt; the first torn or corrupt batch and everything after it is cut away, with
   one WARNING.
5. A log whose end is below the checkpointed log start offset (segment files deleted by
   hand) is emptied; an empty log gets its first segment.
6. The producer state is rebuilt (`rebuild_producer_state`): the newest readable
   snapshot at or below the log end (`producer_snapshots.py`) plus the batches after
   it. A clean shutdown without snapshots means a log written before producer state
   existed: no scan. `Log.truncate_to` rebuilds it the same way. The `.txnindex`
   files (`txn_index.py`) are read first; the replay drops their entries from the
   snapshot's offset on and indexes again the ABORT markers it meets, so an unclean
   shutdown or a truncation leaves them matching the log.

The result is a `LoadedLog` from which `Log` is built; nothing here knows `Log`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path
from typing import NamedTuple

from broker.core.log.checkpoint import LeaderEpochCheckpointFile
from broker.core.log.config import LogConfig
from broker.core.log.errors import CheckpointError, RecordError
from broker.core.log.leader_epoch import LeaderEpochCache
from broker.core.log.local_log import LocalLog
from broker.core.log.producer_snapshots import ProducerSnapshots
from broker.core.log.producer_state import ProducerStateManager
from broker.core.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from broker.core.log.swap import recover_interrupted_swaps
from broker.core.log.txn_index import TransactionIndexes, record_completed
from client.protocol.records import is_control, read_control_marker

__all__ = ["LEADER_EPOCH_CHECKPOINT", "LoadedLog", "LogLoader", "rebuild_producer_state"]

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# Files a crash can leave behind mid-operation; removed when the log opens.
_TEMP_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


class LoadedLog(NamedTuple):
    """What `LogLoader.load` found: everything `Log` is built from."""

    local: LocalLog
    snapshots: ProducerSnapshots
    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    txn_indexes: TransactionIndexes
    log_start_offset: int
    recovery_point: int


def rebuild_producer_state(
    local: LocalLog,
    snapshots: ProducerSnapshots,
    log_start_offset: int,
    end: int,
    indexes: TransactionIndexes,
) -> ProducerStateManager:
    """The producer state at `end`: the newest readable snapshot at or below it, then
    the batches from the snapshot's offset to the LEO (the aborted-transaction index
    entries from that offset on are written again by the replay)."""
    state = snapshots.load_newest(end)
    if state is None:
        state = ProducerStateManager(min(log_start_offset, end))
    from_offset = state.map_end_offset
    indexes.retain(local.bases)
    indexes.truncate_to(from_offset)
    if from_offset < local.log_end_offset:
        _replay(local, state, from_offset, indexes)
    return state


def _replay(
    local: LocalLog, state: ProducerStateManager, from_offset: int, indexes: TransactionIndexes
) -> None:
    try:
        for segment in local.segments[local.floor_index(from_offset) :]:
            start = 0
            if segment.base_offset < from_offset:
                found = segment.translate_offset(from_offset)
                if found is None:
                    continue
                start = found[0]
            for position, header in segment.iter_headers(start):
                if header.base_offset + header.last_offset_delta < from_offset:
                    continue
                if header[9] >= 0:
                    marker = None
                    if is_control(header):
                        marker = read_control_marker(segment.pread(header.size, position))
                    completed = state.update(header, marker=marker)
                    if completed is not None:
                        record_completed(state, indexes, segment.base_offset, completed)
                state.update_end_offset(header.base_offset + header.last_offset_delta + 1)
    except RecordError as exc:
        logger.warning("Log %s: producer state rebuilt only partly: %s", local.topic_partition, exc)
    state.update_end_offset(local.log_end_offset)


class LogLoader:
    """Loads the partition directory `directory` (which exists) for `Log.open`."""

    def __init__(self, directory: Path, config: LogConfig, *, now_ms: int) -> None:
        self._dir = directory
        self._now_ms = now_ms
        self._local = LocalLog(directory, config)
        self._tp = self._local.topic_partition

    def load(
        self, recovery_point: int, log_start_offset: int | None, had_clean_shutdown: bool
    ) -> LoadedLog:
        """Recover the directory (module docstring, steps 1-6). Segments from the one
        holding `recovery_point` onward are recovered unless `had_clean_shutdown` (then
        only segments with bad indexes are)."""
        local, config, now_ms = self._local, self._local.config, self._now_ms
        recover_interrupted_swaps(self._dir)
        self._remove_temp_files()
        bases = sorted(
            int(m.group(1))
            for m in map(_SEGMENT_NAME.match, os.listdir(self._dir))
            if m is not None
        )
        problems: dict[int, str] = {}
        for base in bases:
            segment, problem = LogSegment.load(
                self._dir,
                base,
                index_interval_bytes=config.index_interval_bytes,
                max_index_bytes=config.segment_index_bytes,
                now_ms=now_ms,
            )
            local.segments.append(segment)
            local.bases.append(base)
            if problem:
                problems[base] = problem
        epoch_cache, epochs_damaged = self._load_epoch_cache()
        recover_from = len(local.segments)
        if not had_clean_shutdown and local.segments:
            recover_from = local.floor_index(recovery_point)
        found_epochs = self._recover_segments(recover_from, problems)

        if local.segments and log_start_offset is not None:
            if local.log_end_offset < log_start_offset:
                logger.warning(
                    "Log %s: log end offset %d is below the log start offset %d "
                    "(segment files deleted?); deleting all segments",
                    self._tp,
                    local.log_end_offset,
                    log_start_offset,
                )
                local.remove_segments(len(local.segments))
        if not local.segments:
            local.create_segment(log_start_offset if log_start_offset is not None else 0, now_ms)
        start_offset = max(log_start_offset or 0, local.segments[0].base_offset)
        leo = local.log_end_offset
        recovered_to = leo if had_clean_shutdown else min(max(recovery_point, 0), leo)
        recovered_to = max(recovered_to, start_offset)
        if epochs_damaged:
            found_epochs = self._scan_epochs(epoch_cache)
        epoch_cache.truncate_from_end(leo)
        for epoch, start in found_epochs:
            if start < leo:
                epoch_cache.assign_if_newer(epoch, start)
        epoch_cache.truncate_from_start(start_offset)
        snapshots = ProducerSnapshots(self._dir, str(self._tp))
        indexes = TransactionIndexes(self._dir)
        indexes.load(local.bases)
        if had_clean_shutdown and not snapshots.offsets():
            # A clean shutdown always leaves a snapshot; none means a log written before
            # producer state existed, which holds no idempotent batches: skip the scan.
            state = ProducerStateManager(leo)
        else:
            state = rebuild_producer_state(local, snapshots, start_offset, leo, indexes)
        logger.debug(
            "Loaded log %s: %d segment(s), offsets [%d, %d), recovery point %d",
            self._tp,
            len(local.segments),
            start_offset,
            leo,
            recovered_to,
        )
        return LoadedLog(local, snapshots, epoch_cache, state, indexes, start_offset, recovered_to)

    def _remove_temp_files(self) -> None:
        names = set(os.listdir(self._dir))
        for name in names:
            path = self._dir / name
            if name.endswith(_TEMP_SUFFIXES):
                logger.info("Log %s: removing leftover temporary file %s", self._tp, name)
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
                stem = name.rsplit(".", 1)[0]
                if stem + LOG_SUFFIX not in names:
                    logger.info("Log %s: removing orphaned index file %s", self._tp, name)
                    path.unlink(missing_ok=True)

    def _load_epoch_cache(self) -> tuple[LeaderEpochCache, bool]:
        """The cache from leader-epoch-checkpoint, and whether the file was unreadable
        (then the cache starts empty and is rebuilt from the log)."""
        path = self._dir / LEADER_EPOCH_CHECKPOINT
        checkpoint = LeaderEpochCheckpointFile(path, sync_later=True)
        try:
            entries = checkpoint.read()
        except CheckpointError as exc:
            logger.warning(
                "Log %s: %s; rebuilding the leader epoch cache from the log", self._tp, exc
            )
            checkpoint.write([])
            fresh = LeaderEpochCheckpointFile(path, sync_later=True)
            return LeaderEpochCache(fresh, name=str(self._tp)), True
        return LeaderEpochCache(checkpoint, entries, name=str(self._tp)), False

    def _scan_epochs(self, epoch_cache: LeaderEpochCache) -> list[tuple[int, int]]:
        """(epoch, start offset) from every batch header, for a lost epoch checkpoint."""
        found: list[tuple[int, int]] = []
        latest = -1
        try:
            for segment in self._local.segments:
                for _, header in segment.iter_headers(0):
                    if header.partition_leader_epoch > latest:
                        latest = header.partition_leader_epoch
                        found.append((latest, header.base_offset))
        except RecordError as exc:
            logger.warning("Log %s: leader epochs rebuilt only partly: %s", self._tp, exc)
        epoch_cache.clear()
        return found

    def _recover_segments(
        self, recover_from: int, problems: dict[int, str]
    ) -> list[tuple[int, int]]:
        """Recover segments from index `recover_from` on and those with index problems.

        The first torn or corrupt batch cuts its segment there and removes every later
        segment. Returns the epoch starts seen in the recovered batches.
        """
        segments = self._local.segments
        epoch_starts: list[tuple[int, int]] = []
        index = 0
        while index < len(segments):
            segment = segments[index]
            problem = problems.get(segment.base_offset)
            if index < recover_from and problem is None:
                index += 1
                continue
            if problem is not None:
                logger.warning(
                    "Log %s: rebuilding the indexes of segment %d (%s)",
                    self._tp,
                    segment.base_offset,
                    problem,
                )
            result = segment.recover()
            epoch_starts.extend(result.epoch_starts)
            if result.reason is not None:
                later = len(segments) - index - 1
                logger.warning(
                    "Log %s: corrupt or torn batch at offset %d, position %d of segment %d "
                    "(%s): truncated %d byte(s) and removed %d later segment(s)",
                    self._tp,
                    result.next_offset,
                    result.valid_bytes,
                    segment.base_offset,
                    result.reason,
                    result.truncated_bytes,
                    later,
                )
                self._local.remove_segments(later)
                break
            if index < len(segments) - 1:
                segment.on_become_inactive()  # the final time-index entry, as on roll
            index += 1
        return epoch_starts
