"""A partition's log: an ordered list of segments, the last one active (Kafka's `Log`).

How it works:
- Appends go to the active segment. The leader path validates every batch (header and
  CRC, no record decoding), stamps offsets from the log end offset (LEO) and its leader
  epoch into the headers in place, rolls a new segment first when the active one is full
  (`segment.bytes`, `segment.ms`, a full index), writes, and records a new epoch in the
  leader-epoch cache. The follower path keeps the leader's offsets and epochs.
- Reads find the segment by bisecting base offsets, the batch by the segment's sparse
  index plus a short header scan, and return whole batches from one segment (as Kafka),
  bounded by `max_bytes` (but at least one batch) and by `upper_bound` (HW or LEO).
- Retention deletes whole segments from the front, never the last one without first
  rolling an empty one, and moves the log start offset up.
- Durability is the OS's unless `flush.messages`/`flush.ms` ask for fsync; `flush`
  advances the recovery point. Rolling does not fsync: the broker's flusher task flushes
  rolled segments (and `flush.ms`) as Kafka's scheduled "flush-log" task does, off the
  event loop: `due_flush`/`prepare_flush` return a `PendingFlush` holding duplicated
  descriptors, its `run()` fsyncs them in a worker thread, and `finish_flush` moves the
  recovery point afterwards unless the log was truncated meanwhile.
- `open` recovers: first it finishes or undoes a segment replacement a crash interrupted
  (`swap.py`); then segments from the one holding the recovery point onward (and any
  segment whose index files are missing or inconsistent) are re-read batch by batch; the
  first torn or corrupt batch and everything after it is cut away, with one WARNING.
- Compaction (`cleaner.py`) replaces closed segments by cleaned ones through
  `replace_segments`; the log keeps the cleaner checkpoint (the offset below which it is
  clean), lowered by truncation. With `cleanup.policy` compact, the leader refuses
  records without a key (`KeylessRecordError`), as Kafka does.

Idempotent producers (`producer_state.py`): the leader path asks the producer state about
every batch before writing; a duplicate of one of a producer's last five batches is not
written and the append reports the original offsets (`LogAppendInfo.duplicate`); an
out-of-order sequence or an old epoch raises `ProducerStateError`. Both paths record what
they wrote, so followers hold the same state as the leader. The state is snapshotted to
`<offset>.snapshot` beside the segments when a segment rolls and when the log closes
cleanly; `open` loads the newest snapshot not beyond the log end and replays the batches
after it, and truncation reloads it the same way from a snapshot at or below the new end
(so the state never describes offsets the log no longer holds). Snapshots below the log
start offset are deleted with the segments; the two newest are kept.

Truncation works on batch boundaries: `truncate_to(n)` removes the whole batch holding
offset n, so the LEO afterwards is that batch's base offset (<= n).
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from broker.core.log.checkpoint import LeaderEpochCheckpointFile, fsync_dir
from broker.core.log.config import INT_MAX, LogConfig
from broker.core.log.errors import (
    CheckpointError,
    InvalidRecordError,
    KeylessRecordError,
    LogError,
    OffsetOutOfRangeError,
    RecordError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from broker.core.log.leader_epoch import LeaderEpochCache
from broker.core.log.producer_state import (
    DEFAULT_PRODUCER_EXPIRATION_MS,
    ProducerStateManager,
    SnapshotError,
)
from broker.core.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    BatchPlacement,
    LogSegment,
)
from broker.core.log.swap import FileOps, recover_interrupted_swaps, replace_segment_files
from client.protocol.records import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    record_keys,
    stamped_header,
    validate_batches,
)
from client.protocol.types import TopicPartition

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
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

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
# Files a crash can leave behind mid-operation; removed when the log opens.
_TEMP_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
# Producer state snapshots kept (Kafka keeps those above the log start offset; two are
# enough to survive one damaged file).
_SNAPSHOTS_RETAINED = 2
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def parse_topic_partition(name: str) -> TopicPartition:
    """`<topic>-<partition>` as a TopicPartition; LogError when it is not one."""
    match = _PARTITION_DIR.match(name)
    if match is None:
        raise LogError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
    return TopicPartition(match.group(1), int(match.group(2)))


class PendingFlush:
    """fsyncs prepared by `Log.prepare_flush`: `run()` does them (blocking; any thread)
    on duplicated descriptors, which it closes, then the directory if a file was added
    or removed in it; `Log.finish_flush` records the result on the event loop."""

    __slots__ = ("log", "upto", "descriptors", "directory", "truncations", "epoch_checkpoint")

    def __init__(
        self,
        log: Log,
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


class LogAppendInfo(NamedTuple):
    """What an append did (Kafka's LogAppendInfo, the fields the broker uses)."""

    first_offset: int  # -1 when nothing was appended
    last_offset: int  # -1 when nothing was appended
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    batch_count: int
    valid_bytes: int
    log_append_time_ms: int  # -1 unless LogAppendTime stamped the batches
    log_start_offset: int
    # True when the batch duplicated one already written by its idempotent producer:
    # nothing was appended, the offsets are those of the original.
    duplicate: bool = False


class LogOffsetMetadata(NamedTuple):
    """An offset and where its batch is: lets DelayedFetch measure bytes between offsets."""

    offset: int
    segment_base_offset: int
    position: int

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        return self.segment_base_offset < other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes from `other` to this one, when both are in the same segment."""
        return self.position - other.position


class FetchData(NamedTuple):
    """Result of `Log.read`: whole batches from one segment.

    `first_offset` is the base offset of the first batch returned (it may be below the
    requested offset: a batch is returned whole), or the requested offset when `records`
    is empty. `segment_base_offset` and `position` say where the read started.
    """

    records: bytes
    first_offset: int
    segment_base_offset: int
    position: int


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class Log:
    """One partition's segmented log. Create it with `Log.open`."""

    def __init__(self, directory: Path, config: LogConfig, *, now_ms: int) -> None:
        self._dir = directory
        self._tp = parse_topic_partition(directory.name)
        self._config = config
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start_offset = 0
        self._recovery_point = 0
        self._cleaner_checkpoint = 0
        self._last_flush_ms = now_ms
        self._dir_dirty = False
        self._truncations = 0  # bumped by every truncation (see finish_flush)
        self._closed = False
        self._epoch_cache = LeaderEpochCache(
            LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT, sync_later=True),
            name=str(self._tp),
        )
        self._producer_state = ProducerStateManager()

    # ================================================================== opening

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
        `had_clean_shutdown` (then only segments with bad indexes are).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, config, now_ms=now_ms)
        log._load(now_ms, recovery_point, log_start_offset, had_clean_shutdown)
        return log

    def _load(
        self,
        now_ms: int,
        recovery_point: int,
        log_start_offset: int | None,
        had_clean_shutdown: bool,
    ) -> None:
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
                index_interval_bytes=self._config.index_interval_bytes,
                max_index_bytes=self._config.segment_index_bytes,
                now_ms=now_ms,
            )
            self._segments.append(segment)
            self._bases.append(base)
            if problem:
                problems[base] = problem
        epochs_damaged = self._load_epoch_cache()
        recover_from = len(self._segments)
        if not had_clean_shutdown and self._segments:
            recover_from = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        found_epochs = self._recover_segments(recover_from, problems)

        if self._segments and log_start_offset is not None:
            if self._segments[-1].next_offset < log_start_offset:
                logger.warning(
                    "Log %s: log end offset %d is below the log start offset %d "
                    "(segment files deleted?); deleting all segments",
                    self._tp,
                    self._segments[-1].next_offset,
                    log_start_offset,
                )
                self._remove_segments(len(self._segments))
        if not self._segments:
            start = log_start_offset if log_start_offset is not None else 0
            self._add_segment(LogSegment.create(self._dir, start, **self._segment_args(now_ms)))
        first_base = self._segments[0].base_offset
        self._log_start_offset = max(log_start_offset or 0, first_base)
        leo = self.log_end_offset
        self._recovery_point = leo if had_clean_shutdown else min(max(recovery_point, 0), leo)
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        if epochs_damaged:
            found_epochs = self._scan_epochs()
        self._epoch_cache.truncate_from_end(leo)
        for epoch, start in found_epochs:
            latest = self._epoch_cache.latest_epoch
            if start < leo and (latest is None or epoch > latest):
                self._epoch_cache.assign(epoch, start)
        self._epoch_cache.truncate_from_start(self._log_start_offset)
        self._load_producer_state(had_clean_shutdown)
        logger.debug(
            "Loaded log %s: %d segment(s), offsets [%d, %d), recovery point %d",
            self._tp,
            len(self._segments),
            self._log_start_offset,
            leo,
            self._recovery_point,
        )

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

    def _load_epoch_cache(self) -> bool:
        """Load leader-epoch-checkpoint; True when it was unreadable (rebuild it)."""
        checkpoint = LeaderEpochCheckpointFile(self._dir / LEADER_EPOCH_CHECKPOINT, sync_later=True)
        try:
            entries = checkpoint.read()
        except CheckpointError as exc:
            logger.warning(
                "Log %s: %s; rebuilding the leader epoch cache from the log", self._tp, exc
            )
            checkpoint.write([])
            return True
        self._epoch_cache = LeaderEpochCache(checkpoint, entries, name=str(self._tp))
        return False

    def _scan_epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) from every batch header, for a lost epoch checkpoint."""
        found: list[tuple[int, int]] = []
        latest = -1
        try:
            for segment in self._segments:
                for _, header in segment.iter_headers(0):
                    if header.partition_leader_epoch > latest:
                        latest = header.partition_leader_epoch
                        found.append((latest, header.base_offset))
        except RecordError as exc:
            logger.warning("Log %s: leader epochs rebuilt only partly: %s", self._tp, exc)
        self._epoch_cache.clear()
        return found

    def _recover_segments(
        self, recover_from: int, problems: dict[int, str]
    ) -> list[tuple[int, int]]:
        """Recover segments from index `recover_from` on and those with index problems.

        The first torn or corrupt batch cuts its segment there and removes every later
        segment. Returns the epoch starts seen in the recovered batches.
        """
        epoch_starts: list[tuple[int, int]] = []
        index = 0
        while index < len(self._segments):
            segment = self._segments[index]
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
                later = len(self._segments) - index - 1
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
                self._remove_segments(later)
                break
            if index < len(self._segments) - 1:
                segment.on_become_inactive()  # the final time-index entry, as on roll
            index += 1
        return epoch_starts

    # ================================================================== properties

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        self._config = config
        for segment in self._segments:
            segment.set_index_config(config.index_interval_bytes, config.segment_index_bytes)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self._segments[-1]
        return LogOffsetMetadata(active.next_offset, active.base_offset, active.size)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def cleaner_checkpoint(self) -> int:
        """The log cleaner's checkpoint: offsets below it were clean after its last pass
        (it may lie below the log start offset; `cleaner.py` clamps it)."""
        return self._cleaner_checkpoint

    def update_cleaner_checkpoint(self, offset: int) -> None:
        self._cleaner_checkpoint = max(0, offset)

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first (a snapshot: changing it changes nothing)."""
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    # ================================================================== appending

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int
    ) -> LogAppendInfo:
        """Validate `records`, give them offsets from the LEO and `leader_epoch`, write.

        Raises CorruptRecordError/InvalidRecordError (bad batch) or RecordTooLargeError;
        nothing is written then. The caller's buffer is not modified: each batch goes out
        as a freshly stamped 61-byte header followed by its untouched body.
        """
        self._check_open()
        headers = validate_batches(records, strict=True)
        if not headers:
            return self._empty_append_info()
        idempotent = any(header[9] >= 0 for header in headers)
        if idempotent:
            duplicate = self._producer_state.check_append(headers)  # ProducerStateError
            if duplicate is not None:
                return LogAppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.timestamp,
                    duplicate.last_offset,
                    0,
                    0,
                    0,
                    -1,
                    self._log_start_offset,
                    True,
                )
        if self._config.compact_enabled:
            self._check_keys(records, headers)
        config = self._config
        limit = config.max_message_bytes
        append_time = now_ms if config.log_append_time else None
        first_offset = next_offset = self._segments[-1].next_offset
        view = memoryview(records)
        buffers: list[bytes | memoryview] = []
        placements: list[BatchPlacement] = []
        position = 0
        for header in headers:
            size = LOG_OVERHEAD + header[1]
            if size > limit:
                raise RecordTooLargeError(
                    f"{self._tp}: batch of {size} bytes exceeds max.message.bytes {limit}"
                )
            body = view[position + BATCH_OVERHEAD : position + size]
            buffers.append(
                stamped_header(
                    header, next_offset, leader_epoch, log_append_time_ms=append_time, body=body
                )
            )
            buffers.append(body)
            last = next_offset + header[6]
            max_ts = header[8] if append_time is None else append_time
            placements.append(BatchPlacement(next_offset, last, max_ts, size))
            next_offset = last + 1
            position += size
        info = self._append(buffers, position, headers, placements, now_ms)
        state = self._producer_state
        if idempotent:
            for header, placement in zip(headers, placements, strict=True):
                state.update(header, placement.base_offset)
        state.update_end_offset(next_offset)
        if leader_epoch >= 0:
            latest = self._epoch_cache.latest_epoch
            if latest is None or leader_epoch > latest:
                self._epoch_cache.assign(leader_epoch, first_offset)
        if append_time is not None:
            info = info._replace(log_append_time_ms=append_time)
        self._maybe_flush_after_append(now_ms)
        return info

    def _check_keys(self, records: bytes | bytearray | memoryview, headers) -> None:
        """KeylessRecordError if a record has no key (Kafka's LogValidator for compacted
        topics). Decodes the records: only compacted topics pay for it."""
        view = memoryview(records)
        position = 0
        for header in headers:
            size = LOG_OVERHEAD + header[1]
            for offset, key in record_keys(view[position : position + size]):
                if key is None:
                    raise KeylessRecordError(
                        f"{self._tp}: compacted topic cannot accept a record without a key "
                        f"(record {offset - header[0]} of a batch)"
                    )
            position += size

    def append_as_follower(self, records: bytes | bytearray, now_ms: int) -> LogAppendInfo:
        """Append batches copied from the leader, keeping their offsets and epochs.

        The first batch must not start below the LEO (UnexpectedAppendOffsetError); as in
        Kafka, a start above it (a gap left by compaction on the leader) is accepted.
        """
        self._check_open()
        headers = validate_batches(records, strict=False)
        if not headers:
            return self._empty_append_info()
        leo = self.log_end_offset
        if headers[0].base_offset < leo:
            raise UnexpectedAppendOffsetError(
                f"{self._tp}: follower append starts at offset {headers[0].base_offset}, "
                f"below the log end offset {leo}"
            )
        placements = []
        previous_last = leo - 1
        for header in headers:
            last = header.base_offset + header.last_offset_delta
            if header.base_offset <= previous_last:
                raise InvalidRecordError(
                    f"{self._tp}: batch offsets go backwards at offset {header.base_offset}"
                )
            placements.append(
                BatchPlacement(header.base_offset, last, header.max_timestamp, header.size)
            )
            previous_last = last
        info = self._append([records], len(records), headers, placements, now_ms)
        state = self._producer_state
        for header in headers:
            if header[9] >= 0:
                state.update(header)
        state.update_end_offset(placements[-1].last_offset + 1)
        for header in headers:
            epoch = header.partition_leader_epoch
            latest = self._epoch_cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                self._epoch_cache.assign(epoch, header.base_offset)
        self._maybe_flush_after_append(now_ms)
        return info

    def _append(
        self,
        buffers: list[bytes | bytearray | memoryview],
        size: int,
        headers: Sequence[BatchHeader],
        placements: list[BatchPlacement],
        now_ms: int,
    ) -> LogAppendInfo:
        first_offset = placements[0].base_offset
        last_offset = placements[-1].last_offset
        max_timestamp = NO_TIMESTAMP
        offset_of_max = first_offset
        for placement in placements:
            if placement.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = placement.max_timestamp, placement.last_offset
        self._maybe_roll(size, max_timestamp, first_offset, last_offset, now_ms)
        self._segments[-1].append(buffers, placements)
        return LogAppendInfo(
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max,
            sum(header[12] for header in headers),
            len(headers),
            size,
            -1,
            self._log_start_offset,
        )

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, 0, 0, 0, -1, self._log_start_offset)

    def _maybe_flush_after_append(self, now_ms: int) -> None:
        if self.unflushed_messages >= self._config.flush_messages:
            self.flush(now_ms=now_ms)
        elif now_ms - self._last_flush_ms >= self._config.flush_ms:
            self.flush(now_ms=now_ms)

    # ================================================================== rolling

    def _segment_args(self, now_ms: int) -> dict[str, int]:
        return {
            "index_interval_bytes": self._config.index_interval_bytes,
            "max_index_bytes": self._config.segment_index_bytes,
            "now_ms": now_ms,
        }

    def _maybe_roll(
        self, size: int, max_timestamp: int, first_offset: int, last_offset: int, now_ms: int
    ) -> bool:
        """Roll before an append of `size` bytes if the active segment is due (Kafka's
        shouldRoll): full by bytes, old by `segment.ms`, a full index, or offsets that no
        longer fit the index's 32-bit relative offsets."""
        active = self._segments[-1]
        config = self._config
        due = (
            active.size > 0
            and (
                active.size > config.segment_bytes - size
                or active.time_waited_for_roll(now_ms, max_timestamp) > config.segment_ms
            )
        ) or (
            active.offset_index.is_full
            or active.time_index.is_full
            or last_offset - active.base_offset > INT_MAX
        )
        if due:
            self.roll(now_ms, expected_next_offset=first_offset)
        return due

    def roll(self, now_ms: int, *, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the LEO (or `expected_next_offset` if higher).

        An empty active segment at that offset is kept as it is; an empty one at a lower
        offset is replaced.
        """
        self._check_open()
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self._segments[-1]
        if active.base_offset == new_base:
            return active
        if active.size == 0:
            self._remove_segments(1)
        else:
            active.on_become_inactive()
        self._take_snapshot()
        segment = LogSegment.create(self._dir, new_base, **self._segment_args(now_ms))
        self._add_segment(segment)
        logger.info("Log %s: rolled new segment at offset %d", self._tp, new_base)
        return segment

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._dir_dirty = True

    def _remove_segments(self, count: int, *, from_start: bool = False) -> None:
        """Delete `count` segments from the end (or the start) of the list."""
        if count <= 0:
            return
        if from_start:
            doomed = self._segments[:count]
            del self._segments[:count]
            del self._bases[:count]
        else:
            doomed = self._segments[-count:]
            del self._segments[-count:]
            del self._bases[-count:]
        for segment in doomed:
            segment.delete()
        self._dir_dirty = True

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
        leo = self.log_end_offset
        if start_offset == leo:
            active = self._segments[-1]
            return FetchData(b"", start_offset, active.base_offset, active.size)
        if start_offset > leo or start_offset < self._log_start_offset:
            raise OffsetOutOfRangeError(
                f"{self._tp}: offset {start_offset} is outside [{self._log_start_offset}, {leo}]"
            )
        index = max(0, bisect.bisect_right(self._bases, start_offset) - 1)
        while index < len(self._segments):
            segment = self._segments[index]
            found = segment.read(start_offset, max_bytes, upper_bound, min_one_batch)
            if found is not None:
                data, first_offset, position = found
                return FetchData(data, first_offset, segment.base_offset, position)
            index += 1
        active = self._segments[-1]
        return FetchData(b"", start_offset, active.base_offset, active.size)

    def offset_metadata_or_error(self, offset: int) -> LogOffsetMetadata:
        """Where `offset`'s batch is; OffsetOutOfRangeError outside [log start, LEO]."""
        leo = self.log_end_offset
        if offset == leo:
            return self.log_end_offset_metadata
        if offset > leo or offset < self._log_start_offset:
            raise OffsetOutOfRangeError(
                f"{self._tp}: offset {offset} is outside [{self._log_start_offset}, {leo}]"
            )
        index = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for segment in self._segments[index:]:
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found[0])
        return self.log_end_offset_metadata

    def offset_for_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        """ListOffsets: the first record with timestamp >= `timestamp_ms`, or None.

        The special values LATEST_TIMESTAMP (-1) and EARLIEST_TIMESTAMP (-2) give the LEO
        and the log start offset (with timestamp -1).
        """
        self._check_open()
        if timestamp_ms == LATEST_TIMESTAMP:
            return OffsetAndTimestamp(self.log_end_offset, NO_TIMESTAMP)
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return OffsetAndTimestamp(self._log_start_offset, NO_TIMESTAMP)
        for segment in self._segments:
            if segment.size == 0 or segment.next_offset <= self._log_start_offset:
                continue
            if segment.largest_timestamp < timestamp_ms:
                continue
            found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
            if found is not None:
                return OffsetAndTimestamp(*found)
        return None

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
        if self._segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        later = len(self._segments) - bisect.bisect_right(self._bases, offset)
        self._remove_segments(later)
        self._segments[-1].truncate_to(offset)
        new_leo = self.log_end_offset
        self._epoch_cache.truncate_from_end(new_leo)
        self._reload_producer_state(new_leo)
        self._log_start_offset = min(self._log_start_offset, new_leo)
        self._recovery_point = min(self._recovery_point, new_leo)
        self._truncations += 1
        self._cleaner_checkpoint = min(self._cleaner_checkpoint, new_leo)
        logger.info("Log %s: truncated from %d to %d", self._tp, leo, new_leo)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete everything; the log restarts empty at `offset`."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot restart {self._tp} at negative offset {offset}")
        now = now_ms if now_ms is not None else self._segments[-1].created_ms
        self._remove_segments(len(self._segments))
        self._add_segment(LogSegment.create(self._dir, offset, **self._segment_args(now)))
        self._epoch_cache.clear()
        self._delete_snapshots(lambda _offset: True)
        self._producer_state = ProducerStateManager(offset)
        self._log_start_offset = offset
        self._recovery_point = offset
        self._truncations += 1
        self._cleaner_checkpoint = offset
        logger.info("Log %s: truncated fully, restarting at offset %d", self._tp, offset)

    # ================================================================== compaction

    def replace_segments(
        self, new: LogSegment, old: Sequence[LogSegment], ops: FileOps | None = None
    ) -> None:
        """Put the cleaned segment `new` (flushed, its files suffixed `.cleaned`, its base
        offset the first old one's) in place of `old`, consecutive closed segments of this
        log, on disk (crash-safely, `swap.py`) and in memory.

        LogError, with nothing changed, when `old` is no longer a run of this log's closed
        segments (retention or truncation got there first): the caller deletes `new`.
        """
        self._check_open()
        first = next((i for i, s in enumerate(self._segments) if s is old[0]), None)
        last = first + len(old) if first is not None else 0
        if (
            first is None
            or last >= len(self._segments)
            or any(a is not b for a, b in zip(self._segments[first:last], old, strict=False))
            or new.base_offset != old[0].base_offset
        ):
            raise LogError(f"{self._tp}: the segments to replace are no longer in the log")
        replace_segment_files(self._dir, new, old, ops or FileOps())
        self._segments[first:last] = [new]
        self._bases[first:last] = [new.base_offset]
        logger.info(
            "Log %s: replaced %d segment(s) from offset %d by a cleaned one (%d bytes)",
            self._tp,
            len(old),
            new.base_offset,
            new.size,
        )

    # ================================================================== retention

    def delete_old_segments(self, now_ms: int, *, high_watermark: int | None = None) -> int:
        """Apply retention; returns how many segments were deleted.

        With cleanup.policy=delete: by `retention.ms` (a segment whose largest timestamp
        is older than the limit) and by `retention.bytes` (while the log would still be
        at least that large without the segment); always: segments wholly below the log
        start offset. Only whole segments, from the oldest, and (when `high_watermark` is
        given) only segments wholly below it.
        """
        self._check_open()
        deleted = 0
        config = self._config
        if config.delete_enabled:
            if config.retention_ms >= 0:
                limit = config.retention_ms
                deleted += self._delete_segments_while(
                    lambda segment, _next: now_ms - segment.largest_timestamp > limit,
                    high_watermark,
                    now_ms,
                    "retention.ms",
                )
            if config.retention_bytes >= 0:
                excess = self.size_in_bytes - config.retention_bytes

                def over_size(segment: LogSegment, _next: LogSegment | None) -> bool:
                    nonlocal excess
                    if excess - segment.size >= 0:
                        excess -= segment.size
                        return True
                    return False

                deleted += self._delete_segments_while(
                    over_size, high_watermark, now_ms, "retention.bytes"
                )
        start = self._log_start_offset
        deleted += self._delete_segments_while(
            lambda _segment, following: following is not None and following.base_offset <= start,
            high_watermark,
            now_ms,
            "log start offset",
        )
        return deleted

    def _delete_segments_while(
        self, predicate, high_watermark: int | None, now_ms: int, why: str
    ) -> int:
        count = 0
        segments = self._segments
        for index, segment in enumerate(segments):
            following = segments[index + 1] if index + 1 < len(segments) else None
            upper = following.base_offset if following is not None else self.log_end_offset
            if high_watermark is not None and high_watermark < upper:
                break
            if following is None and segment.size == 0:
                break
            if not predicate(segment, following):
                break
            count += 1
        if count == 0:
            return 0
        if count == len(segments):
            self.roll(now_ms)
        logger.info(
            "Log %s: deleting %d segment(s) from offset %d by %s",
            self._tp,
            count,
            segments[0].base_offset,
            why,
        )
        self._remove_segments(count, from_start=True)
        self._advance_log_start_offset(self._segments[0].base_offset)
        start = self._log_start_offset
        self._delete_snapshots(lambda offset: offset < start)
        return count

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
        self._recovery_point = max(self._recovery_point, offset)
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

    def _snapshot_offsets(self) -> list[int]:
        return sorted(
            int(m.group(1))
            for m in map(_SNAPSHOT_NAME.match, os.listdir(self._dir))
            if m is not None
        )

    def _snapshot_path(self, offset: int) -> Path:
        return self._dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def _delete_snapshots(self, doomed) -> None:
        for offset in self._snapshot_offsets():
            if doomed(offset):
                self._snapshot_path(offset).unlink(missing_ok=True)

    def _take_snapshot(self) -> None:
        """Write the producer state at the LEO as `<LEO>.snapshot`, empty or not (as Kafka
        does: a snapshot spares the next start or truncation a scan of the log from its
        start); keep the newest `_SNAPSHOTS_RETAINED`."""
        leo = self.log_end_offset
        state = self._producer_state
        offsets = self._snapshot_offsets()
        if offsets and offsets[-1] == leo:
            return
        state.update_end_offset(leo)
        path = self._snapshot_path(leo)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(state.to_bytes())
        os.replace(tmp, path)
        self._dir_dirty = True
        for offset in offsets[: max(0, len(offsets) + 1 - _SNAPSHOTS_RETAINED)]:
            self._snapshot_path(offset).unlink(missing_ok=True)

    def _load_producer_state(self, had_clean_shutdown: bool) -> None:
        if had_clean_shutdown and not self._snapshot_offsets():
            # A clean shutdown always leaves a snapshot; none means a log written before
            # producer state existed, which holds no idempotent batches: skip the scan.
            self._producer_state = ProducerStateManager(self.log_end_offset)
            return
        self._reload_producer_state(self.log_end_offset)

    def _reload_producer_state(self, end: int) -> None:
        """The producer state at `end`: the newest readable snapshot at or below it (newer
        ones are deleted: they describe offsets the log no longer holds), then the batches
        from the snapshot's offset to the LEO."""
        state: ProducerStateManager | None = None
        start = self._log_start_offset
        for offset in reversed(self._snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > end:
                path.unlink(missing_ok=True)
                continue
            try:
                state = ProducerStateManager.from_bytes(path.read_bytes())
            except (OSError, SnapshotError) as exc:
                logger.warning("Log %s: ignoring snapshot %s: %s", self._tp, path.name, exc)
                path.unlink(missing_ok=True)
                continue
            state.map_end_offset = offset
            break
        if state is None:
            state = ProducerStateManager(min(start, end))
        from_offset = state.map_end_offset
        if from_offset < self.log_end_offset:
            self._replay_producer_state(state, from_offset)
        self._producer_state = state

    def _replay_producer_state(self, state: ProducerStateManager, from_offset: int) -> None:
        first = max(0, bisect.bisect_right(self._bases, from_offset) - 1)
        try:
            for segment in self._segments[first:]:
                position = 0
                if segment.base_offset < from_offset:
                    found = segment.translate_offset(from_offset)
                    if found is None:
                        continue
                    position = found[0]
                for _, header in segment.iter_headers(position):
                    if header.base_offset + header.last_offset_delta < from_offset:
                        continue
                    if header[9] >= 0:
                        state.update(header)
                    state.update_end_offset(header.base_offset + header.last_offset_delta + 1)
        except RecordError as exc:
            logger.warning("Log %s: producer state rebuilt only partly: %s", self._tp, exc)
        state.update_end_offset(self.log_end_offset)

    # ================================================================== durability

    def flush(self, upto: int | None = None, *, now_ms: int | None = None) -> bool:
        """fsync segments holding offsets in [recovery point, upto) and move the recovery
        point to `upto` (default: the LEO). Returns whether anything was flushed."""
        return self._flush_now(self.prepare_flush(upto, now_ms=now_ms))

    def _flush_now(self, pending: PendingFlush | None) -> bool:
        if pending is None:
            return False
        try:
            pending.run()
        except OSError:
            self.finish_flush(pending, synced=False)
            raise
        self.finish_flush(pending, synced=True)
        return True

    def prepare_flush(self, upto: int | None = None, *, now_ms: int | None = None):
        """The first half of `flush`, for fsyncs away from the event loop: a `PendingFlush`
        whose `run()` (any thread) does the fsyncs, after which `finish_flush` (on the
        loop) moves the recovery point; None if there is nothing to flush."""
        self._check_open()
        leo = self.log_end_offset
        upto = leo if upto is None else min(upto, leo)
        if now_ms is not None:
            self._last_flush_ms = now_ms
        epochs = self._epoch_cache.take_unsynced_checkpoint()
        descriptors: list[int] = []
        if upto > self._recovery_point:
            first = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
            for segment in self._segments[first:]:
                if segment.base_offset >= upto and segment is not self._segments[first]:
                    break
                descriptors.extend(segment.descriptors_to_flush())
        elif epochs is None:
            return None
        if epochs is not None:
            descriptors.append(epochs)
            self._dir_dirty = True  # the checkpoint was renamed into place
        directory = self._dir if self._dir_dirty else None
        self._dir_dirty = False
        return PendingFlush(
            self, upto, descriptors, directory, self._truncations, epochs is not None
        )

    def finish_flush(self, pending: PendingFlush, *, synced: bool) -> None:
        """Record a `PendingFlush` that ran: the recovery point moves to its end, unless it
        failed, or the log was truncated or closed meanwhile (its offsets may be new)."""
        if not synced:
            self._dir_dirty = self._dir_dirty or pending.directory is not None
            if pending.epoch_checkpoint:
                self._epoch_cache.checkpoint_unsynced()
            return
        if self._closed or pending.truncations != self._truncations:
            return
        self._recovery_point = max(self._recovery_point, min(pending.upto, self.log_end_offset))

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush when `flush.ms` has passed with unflushed data, or rolled segments are
        unflushed (Kafka flushes those after every roll); returns whether it flushed."""
        return self._flush_now(self.due_flush(now_ms))

    def due_flush(self, now_ms: int) -> PendingFlush | None:
        """`maybe_flush`'s decision, as a `PendingFlush` to run off the loop (or None)."""
        if self._closed or self.unflushed_messages <= 0:
            return None
        if now_ms - self._last_flush_ms >= self._config.flush_ms:
            return self.prepare_flush(now_ms=now_ms)
        active_base = self._segments[-1].base_offset
        if self._recovery_point < active_base:
            return self.prepare_flush(active_base)
        return None

    def close(self) -> None:
        """Close the files (no fsync: call flush first for a clean shutdown)."""
        if self._closed:
            return
        try:
            self._take_snapshot()
        except OSError as exc:
            logger.warning("Log %s: producer state snapshot failed at close: %s", self._tp, exc)
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Close the log and remove its directory."""
        self.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"log {self._tp} is closed")

    def __repr__(self) -> str:
        return (
            f"Log({self._tp}, start={self._log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )
