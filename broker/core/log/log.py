"""A partition's log (Kafka 3.x's `UnifiedLog`): appends, reads, truncation, retention,
leader epochs and idempotent producers' state over the segments of one directory.

How it works:
- The segments are a `LocalLog` (`local_log.py`): the segment list, reads, rolls and
  the file side of truncation and replacement. `Log.open` builds the log from what
  `LogLoader` (`loader.py`) recovered; the recovery point and fsyncs are `LogFlusher`'s
  (`flush.py`); producer-state snapshot files are `ProducerSnapshots`'
  (`producer_snapshots.py`). `Log` decides and keeps the log start offset, the
  leader-epoch cache, the producer state and the cleaner checkpoint.
- Appends go to the active segment. The leader path validates every batch (header and
  CRC, no record decoding), stamps offsets from the log end offset (LEO) and its leader
  epoch into the headers (a fresh 61-byte header before each untouched body, in
  `validator.py`, Kafka's LogValidator; with `compression.type` set to a codec, batches
  in another one are recompressed first, and CreateTime records too far from the clock
  are refused by `message.timestamp.difference.max.ms`), rolls a
  new segment first when the active one is due (`LocalLog.should_roll`), writes, and
  records a new epoch in the leader-epoch cache. The follower path keeps the leader's
  offsets and epochs. With `cleanup.policy` compact, the leader refuses records without
  a key (`KeylessRecordError`), as Kafka does.
- Retention (`retention.py`'s rules) deletes whole segments from the front, never the
  last one without first rolling an empty one, and moves the log start offset up.
- Compaction (`cleaner.py`) replaces closed segments by cleaned ones through
  `replace_segments`; the log keeps the cleaner checkpoint (the offset below which it is
  clean), lowered by truncation.

Idempotent producers (`producer_state.py`): the leader path asks the producer state about
every batch before writing; a duplicate of one of a producer's last five batches is not
written and the append reports the original offsets (`LogAppendInfo.duplicate`); an
out-of-order sequence or an old epoch raises `ProducerStateError`. Both paths record what
they wrote, so followers hold the same state as the leader. The state is snapshotted
when a segment rolls and when the log closes cleanly; truncation rebuilds it from a
snapshot at or below the new end (`loader.rebuild_producer_state`), so the state never
describes offsets the log no longer holds. Snapshots below the log start offset are
deleted with the segments.

Transactions: the leader path takes a producer's transactional batches like any other
(`origin` "client") and refuses control batches from clients (`ControlBatchError`);
the transaction markers themselves come with `origin` "coordinator" (the
WriteTxnMarkers handler), are checked by the producer state (`check_marker`) and end the
producer's transaction. Both paths and recovery record markers the same way: an ABORT
goes to the `.txnindex` of its segment (`txn_index.py`). `last_stable_offset(hw)` is the
LSO and `collect_aborted_transactions` what a read_committed fetch answers with.

Truncation works on batch boundaries: `truncate_to(n)` removes the whole batch holding
offset n, so the LEO afterwards is that batch's base offset (<= n).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from broker.core.log.config import LONG_MAX, LogConfig
from broker.core.log.errors import ControlBatchError, LogError, OffsetOutOfRangeError
from broker.core.log.flush import LogFlusher, PendingFlush
from broker.core.log.leader_epoch import LeaderEpochCache
from broker.core.log.loader import (
    LEADER_EPOCH_CHECKPOINT,
    LoadedLog,
    LogLoader,
    rebuild_producer_state,
)
from broker.core.log.local_log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchData,
    LogOffsetMetadata,
    OffsetAndTimestamp,
    parse_topic_partition,
)
from broker.core.log.producer_state import (
    DEFAULT_PRODUCER_EXPIRATION_MS,
    ProducerStateEntry,
    ProducerStateManager,
)
from broker.core.log.retention import (
    SegmentPredicate,
    deletable_segments,
    log_start_offset_breached,
    retention_ms_breached,
    retention_size_breached,
)
from broker.core.log.segment import BatchPlacement, LogSegment
from broker.core.log.swap import FileOps
from broker.core.log.txn_index import (
    AbortedTxn,
    Records,
    TransactionIndexes,
    check_markers,
    record_batches,
)
from broker.core.log.validator import (
    LogAppendInfo,
    append_info,
    assign_offsets,
    check_keys,
    check_timestamps,
    duplicate_info,
    follower_placements,
    recompress,
)
from client.protocol.records import NO_TIMESTAMP, BatchHeader, validate_batches
from client.protocol.types import TopicPartition

# Log, and the names importers found here before they moved beside it (local_log.py,
# loader.py, flush.py, validator.py): the broker shell imports PendingFlush from here.
__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "LEADER_EPOCH_CHECKPOINT",
    "FetchData",
    "Log",
    "LogAppendInfo",
    "LogOffsetMetadata",
    "OffsetAndTimestamp",
    "PendingFlush",
    "parse_topic_partition",
]

logger = logging.getLogger(__name__)


class Log:
    """One partition's segmented log. Create it with `Log.open`."""

    def __init__(self, loaded: LoadedLog, *, now_ms: int) -> None:
        self._local = local = loaded.local
        self._tp = local.topic_partition
        self._log_start_offset = loaded.log_start_offset
        self._cleaner_checkpoint = 0
        self._closed = False
        self._epoch_cache = loaded.epoch_cache
        self._producer_state = loaded.producer_state
        self._snapshots = loaded.snapshots
        self._txn_indexes: TransactionIndexes = loaded.txn_indexes
        self._flusher = LogFlusher(local, loaded.epoch_cache, loaded.recovery_point, now_ms)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig,
        *,
        now_ms: int,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        had_clean_shutdown: bool = False,
    ) -> Log:
        """Open (creating if needed) the partition directory `<dir>/<topic>-<partition>`.

        Segments from the one holding `recovery_point` onward are recovered unless
        `had_clean_shutdown` (then only segments with bad indexes are): `loader.py`.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        loader = LogLoader(directory, config, now_ms=now_ms)
        return cls(loader.load(recovery_point, log_start_offset, had_clean_shutdown), now_ms=now_ms)

    # ================================================================== properties

    @property
    def directory(self) -> Path:
        return self._local.directory

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def config(self) -> LogConfig:
        return self._local.config

    def update_config(self, config: LogConfig) -> None:
        self._local.update_config(config)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.segments[-1].next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._local.end_offset_metadata()

    @property
    def recovery_point(self) -> int:
        return self._flusher.recovery_point

    @property
    def cleaner_checkpoint(self) -> int:
        """The log cleaner's checkpoint: offsets below it were clean after its last pass
        (it may lie below the log start offset; `cleaner.py` clamps it)."""
        return self._cleaner_checkpoint

    def update_cleaner_checkpoint(self, offset: int) -> None:
        self._cleaner_checkpoint = max(0, offset)

    @property
    def size_in_bytes(self) -> int:
        return self._local.size_in_bytes

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first (a snapshot: changing it changes nothing)."""
        return tuple(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def last_flush_ms(self) -> int:
        return self._flusher.last_flush_ms

    @property
    def unflushed_messages(self) -> int:
        return self._flusher.unflushed_messages

    # ================================================================== appending

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        *,
        origin: str = "client",
    ) -> LogAppendInfo:
        """Validate `records`, give them offsets from the LEO and `leader_epoch`, write.

        Raises CorruptRecordError/InvalidRecordError (bad batch; ControlBatchError for a
        client's control batch) or RecordTooLargeError; nothing is written then. With
        `origin` "coordinator", `records` are transaction markers (ProducerStateError when
        the producer state refuses one). The caller's buffer is not modified: each batch
        goes out as a freshly stamped 61-byte header followed by its untouched body.
        """
        self._check_open()
        headers = validate_batches(records, strict=origin == "client")
        if not headers:
            return self._empty_append_info()
        if origin == "coordinator":
            check_markers(self._producer_state, self._tp, records, headers)
        elif any(header.attributes & 0x20 for header in headers):
            raise ControlBatchError(f"{self._tp}: clients may not write control batches")
        idempotent = any(header[9] >= 0 for header in headers)
        if idempotent and origin == "client":
            duplicate = self._producer_state.check_append(headers)  # ProducerStateError
            if duplicate is not None:
                return duplicate_info(duplicate, self._log_start_offset)
        config = self._local.config
        if config.compact_enabled:
            check_keys(self._tp, records, headers)
        append_time = now_ms if config.log_append_time else None
        if append_time is None and config.message_timestamp_difference_max_ms < LONG_MAX:
            check_timestamps(
                self._tp, records, headers, now_ms, config.message_timestamp_difference_max_ms
            )
        codec = config.recompression_codec
        if codec is not None:  # compression.type: the topic's codec, whatever was sent
            records, headers = recompress(records, headers, codec)
        first_offset = self._local.segments[-1].next_offset
        buffers, placements, size = assign_offsets(
            self._tp,
            records,
            headers,
            first_offset,
            leader_epoch,
            append_time,
            config.max_message_bytes,
        )
        info = self._append(
            buffers, headers, placements, size, -1 if append_time is None else append_time, now_ms
        )
        if idempotent:
            self._record_producers(records, headers, [p.base_offset for p in placements])
        self._producer_state.update_end_offset(info.last_offset + 1)
        self._epoch_cache.assign_if_newer(leader_epoch, first_offset)
        if self._flusher.due_after_append(now_ms):
            self.flush(now_ms=now_ms)
        return info

    def append_as_follower(self, records: bytes | bytearray, now_ms: int) -> LogAppendInfo:
        """Append batches copied from the leader, keeping their offsets and epochs.

        The first batch must not start below the LEO (UnexpectedAppendOffsetError); as in
        Kafka, a start above it (a gap left by compaction on the leader) is accepted.
        """
        self._check_open()
        headers = validate_batches(records, strict=False)
        if not headers:
            return self._empty_append_info()
        placements = follower_placements(self._tp, headers, self.log_end_offset)
        info = self._append([records], headers, placements, len(records), -1, now_ms)
        if any(header[9] >= 0 for header in headers):
            self._record_producers(records, headers, [h.base_offset for h in headers])
        self._producer_state.update_end_offset(info.last_offset + 1)
        epoch_cache = self._epoch_cache
        for header in headers:
            epoch_cache.assign_if_newer(header.partition_leader_epoch, header.base_offset)
        if self._flusher.due_after_append(now_ms):
            self.flush(now_ms=now_ms)
        return info

    def _append(
        self,
        buffers: Sequence[bytes | bytearray | memoryview],
        headers: Sequence[BatchHeader],
        placements: list[BatchPlacement],
        size: int,
        log_append_time_ms: int,
        now_ms: int,
    ) -> LogAppendInfo:
        """Write `buffers` (`size` bytes) to the active segment, rolling first if due."""
        info = append_info(headers, placements, size, log_append_time_ms, self._log_start_offset)
        local = self._local
        if local.should_roll(size, info.max_timestamp, info.last_offset, now_ms):
            self.roll(now_ms, expected_next_offset=info.first_offset)
        local.segments[-1].append(buffers, placements)
        return info

    def _record_producers(
        self, records: Records, headers: Sequence[BatchHeader], offsets: Sequence[int]
    ) -> None:
        base = self._local.segments[-1].base_offset  # one append goes to one segment
        record_batches(self._producer_state, self._txn_indexes, base, records, headers, offsets)

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, 0, 0, 0, -1, self._log_start_offset)

    def roll(self, now_ms: int, *, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the LEO (or `expected_next_offset` if higher),
        snapshotting the producer state at the LEO.

        An empty active segment at that offset is kept as it is; an empty one at a lower
        offset is replaced.
        """
        self._check_open()
        local = self._local
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = local.segments[-1]
        if active.base_offset == new_base:
            return active
        if active.size == 0:
            local.remove_segments(1)
        else:
            active.on_become_inactive()
        self._take_snapshot()
        segment = local.create_segment(new_base, now_ms)
        logger.info("Log %s: rolled new segment at offset %d", self._tp, new_base)
        return segment

    # ================================================================== reading

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchData:
        """Whole batches from the one holding `start_offset`, within one segment.

        Stops before `max_bytes` would be exceeded, except that with `min_one_batch` the
        first batch is returned whole however large; never returns a batch whose last
        offset >= `upper_bound`. OffsetOutOfRangeError outside [log start, LEO].
        """
        self._check_open()
        return self._local.read(
            start_offset, max_bytes, upper_bound, min_one_batch, self._log_start_offset
        )

    def offset_metadata_or_error(self, offset: int) -> LogOffsetMetadata:
        """Where `offset`'s batch is; OffsetOutOfRangeError outside [log start, LEO]."""
        return self._local.offset_metadata_or_error(offset, self._log_start_offset)

    def active_producers(self) -> list[ProducerStateEntry]:
        """DescribeProducers (KIP-664): a copy of each producer's state here, by id."""
        self._check_open()
        entries = self._producer_state.entries
        return [entries[pid].copy() for pid in sorted(entries)]

    def offset_for_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        """ListOffsets: the first record with timestamp >= `timestamp_ms`, or None.

        The special values LATEST_TIMESTAMP (-1) and EARLIEST_TIMESTAMP (-2, and
        EARLIEST_LOCAL_TIMESTAMP -4) give the LEO and the log start offset (with timestamp
        -1); MAX_TIMESTAMP (-3) the first record holding the largest timestamp.
        """
        self._check_open()
        return self._local.offset_for_timestamp(timestamp_ms, self._log_start_offset)

    # ================================================================== truncation

    def truncate_to(self, offset: int) -> bool:
        """Drop every batch holding an offset >= `offset`; returns whether anything went.

        A batch that straddles `offset` goes whole, so the LEO may end up below it.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate {self._tp} to negative offset {offset}")
        leo = self.log_end_offset
        if offset >= leo:
            return False
        local = self._local
        if local.segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        local.truncate_to(offset)
        new_leo = self.log_end_offset
        self._epoch_cache.truncate_from_end(new_leo)
        self._producer_state = rebuild_producer_state(
            local, self._snapshots, self._log_start_offset, new_leo, self._txn_indexes
        )
        self._log_start_offset = min(self._log_start_offset, new_leo)
        self._flusher.truncated(new_leo)
        self._cleaner_checkpoint = min(self._cleaner_checkpoint, new_leo)
        logger.info("Log %s: truncated from %d to %d", self._tp, leo, new_leo)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete everything; the log restarts empty at `offset`."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot restart {self._tp} at negative offset {offset}")
        now = now_ms if now_ms is not None else self._local.segments[-1].created_ms
        self._local.truncate_fully_and_start_at(offset, now)
        self._epoch_cache.clear()
        self._snapshots.delete_all()
        self._txn_indexes.delete_all()
        self._producer_state = ProducerStateManager(offset)
        self._log_start_offset = offset
        self._flusher.restarted_at(offset)
        self._cleaner_checkpoint = offset
        logger.info("Log %s: truncated fully, restarting at offset %d", self._tp, offset)

    # ================================================================== compaction

    def replace_segments(
        self,
        new: LogSegment,
        old: Sequence[LogSegment],
        ops: FileOps | None = None,
        *,
        aborted: Sequence[AbortedTxn] | None = None,
    ) -> None:
        """Put the cleaned segment `new` (flushed, its files suffixed `.cleaned`, its base
        offset the first old one's) in place of `old`, consecutive closed segments of this
        log, on disk (crash-safely, `swap.py`) and in memory; its `.txnindex` holds
        `aborted` (the ABORT markers kept), by default all of the old segments' entries.

        LogError, with nothing changed, when `old` is no longer a run of this log's closed
        segments (retention or truncation got there first): the caller deletes `new`.
        """
        self._check_open()
        bases = [segment.base_offset for segment in old]
        swap = partial(self._local.replace_segments, new, old, ops or FileOps())
        self._txn_indexes.replace(new.base_offset, bases, aborted, swap)

    # ================================================================== retention

    def delete_old_segments(self, now_ms: int, *, high_watermark: int | None = None) -> int:
        """Apply retention (`retention.py`); returns how many segments were deleted.

        With cleanup.policy=delete: by `retention.ms` and by `retention.bytes`; always:
        segments wholly below the log start offset. Only whole segments, from the oldest,
        and (when `high_watermark` is given) only segments wholly below it.
        """
        self._check_open()
        config = self._local.config
        deleted = 0
        if config.delete_enabled:
            if config.retention_ms >= 0:
                rule = retention_ms_breached(config.retention_ms, now_ms)
                deleted += self._delete_segments_while(rule, high_watermark, now_ms, "retention.ms")
            if config.retention_bytes >= 0:
                rule = retention_size_breached(self.size_in_bytes - config.retention_bytes)
                deleted += self._delete_segments_while(
                    rule, high_watermark, now_ms, "retention.bytes"
                )
        rule = log_start_offset_breached(self._log_start_offset)
        return deleted + self._delete_segments_while(
            rule, high_watermark, now_ms, "log start offset"
        )

    def _delete_segments_while(
        self, rule: SegmentPredicate, high_watermark: int | None, now_ms: int, why: str
    ) -> int:
        local = self._local
        count = deletable_segments(local.segments, self.log_end_offset, rule, high_watermark)
        if count == 0:
            return 0
        if count == len(local.segments):
            self.roll(now_ms)
        local.delete_oldest(count, why, now_ms)
        self._txn_indexes.retain(local.bases)
        self._advance_log_start_offset(local.segments[0].base_offset)
        self._snapshots.delete_below(self._log_start_offset)
        return count

    def delete_due_files(self, now_ms: int) -> int:
        """Remove deleted segments' files whose `file.delete.delay.ms` has passed."""
        return self._local.delete_due_files(now_ms)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up to `offset` (a follower copying its leader's,
        or DeleteRecords); whole segments below it go at the next retention run."""
        self._check_open()
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self._tp}: log start offset {offset} is above the log end offset "
                f"{self.log_end_offset}"
            )
        return self._advance_log_start_offset(offset)

    def _advance_log_start_offset(self, offset: int) -> bool:
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        flusher = self._flusher
        flusher.recovery_point = max(flusher.recovery_point, offset)
        self._epoch_cache.truncate_from_start(offset)
        return True

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> bool:
        """Record a new leader epoch starting at `start_offset` (on becoming leader)."""
        return self._epoch_cache.assign(leader_epoch, start_offset)

    # ================================================================== producer state

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    def remove_expired_producers(
        self, now_ms: int, expiration_ms: int = DEFAULT_PRODUCER_EXPIRATION_MS
    ) -> int:
        """Forget idempotent producers idle longer than `expiration_ms`
        (transactional.id.expiration.ms); how many went."""
        return self._producer_state.remove_expired(now_ms, expiration_ms)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: below the first open (or not yet replicated) transaction, <= the HW."""
        return self._producer_state.last_stable_offset(high_watermark)

    def collect_aborted_transactions(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper) (a read_committed
        fetch of that range answers with them)."""
        bases = self._local.bases[self._local.floor_index(fetch_offset) :]
        return self._txn_indexes.collect(fetch_offset, upper, bases)

    def _take_snapshot(self) -> None:
        """Snapshot the producer state at the LEO (`producer_snapshots.py`)."""
        if self._snapshots.write(self._producer_state, self.log_end_offset):
            self._local.dir_dirty = True

    # ================================================================== durability

    def flush(self, upto: int | None = None, *, now_ms: int | None = None) -> bool:
        """fsync segments holding offsets in [recovery point, upto) and move the recovery
        point to `upto` (default: the LEO). Returns whether anything was flushed."""
        return self._flusher.run_now(self.prepare_flush(upto, now_ms=now_ms))

    def prepare_flush(
        self, upto: int | None = None, *, now_ms: int | None = None
    ) -> PendingFlush | None:
        """The first half of `flush`, for fsyncs away from the event loop: a `PendingFlush`
        whose `run()` (any thread) does the fsyncs, after which `finish_flush` (on the
        loop) moves the recovery point; None if there is nothing to flush."""
        self._check_open()
        return self._flusher.prepare(self, upto, now_ms)

    def finish_flush(self, pending: PendingFlush, *, synced: bool) -> None:
        """Record a `PendingFlush` that ran: the recovery point moves to its end, unless it
        failed, or the log was truncated or closed meanwhile (its offsets may be new)."""
        self._flusher.finish(pending, synced=synced, closed=self._closed)

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush when `flush.ms` has passed with unflushed data, or rolled segments are
        unflushed (Kafka flushes those after every roll); returns whether it flushed."""
        return self._flusher.run_now(self.due_flush(now_ms))

    def due_flush(self, now_ms: int) -> PendingFlush | None:
        """`maybe_flush`'s decision, as a `PendingFlush` to run off the loop (or None)."""
        return None if self._closed else self._flusher.due(self, now_ms)

    def close(self) -> None:
        """Close the files (no fsync: call flush first for a clean shutdown)."""
        if self._closed:
            return
        try:
            self._take_snapshot()
        except OSError as exc:
            logger.warning("Log %s: producer state snapshot failed at close: %s", self._tp, exc)
        self._local.close()
        self._closed = True

    def delete(self) -> None:
        """Close the log and remove its directory."""
        self.close()
        shutil.rmtree(self._local.directory, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"log {self._tp} is closed")

    def __repr__(self) -> str:
        return (
            f"Log({self._tp}, start={self._log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self._local.segments)})"
        )
