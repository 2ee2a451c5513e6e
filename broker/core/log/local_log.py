"""The segment files of one partition directory (Kafka 3.x's `LocalLog`).

How it works: `segments` lists the directory's segments oldest first, the last one
active, and `bases` their base offsets (parallel, for bisecting). This class knows
nothing of producers, leader epochs or the log start offset policy: `log.py`'s `Log`
decides what to append, truncate or delete, and calls it to change the list:

- `create_segment`, `remove_segments` (from the end; `delete_oldest` for retention),
  `truncate_to` (batch boundaries: the batch holding the offset goes whole),
  `truncate_fully_and_start_at`, `replace_segments` (a cleaned segment in place of old
  ones, crash-safely through `swap.py`); each notes in `dir_dirty` that the directory's
  entries changed, so the next flush fsyncs the directory (`flush.py`).
- `should_roll` is Kafka's shouldRoll: the active segment is full by bytes, old by
  `segment.ms` (less the segment's random jitter, drawn below `segment.jitter.ms` when
  it is added, so that many partitions do not roll at once), has a full index, or
  cannot index the new offsets (32-bit relative).
- Retention's deletions (`delete_oldest`) are Kafka's asynchronous ones: the segment's
  files are renamed `.deleted` at once and removed `file.delete.delay.ms` later
  (`delete_due_files`, which the broker calls every second; a restart removes what is
  left, `loader.py`). Truncation and the cleaner's replacements delete at once.
- Reads find the segment by bisecting `bases`, the batch by the segment's sparse index
  plus a short header scan, and return whole batches from one segment (as Kafka),
  bounded by `max_bytes` (but at least one batch) and by `upper_bound` (HW or LEO).
"""

from __future__ import annotations

import bisect
import logging
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, TypedDict

from broker.core.log.config import INT_MAX, LogConfig
from broker.core.log.errors import LogError, OffsetOutOfRangeError
from broker.core.log.segment import LogSegment
from broker.core.log.swap import DELETED_SUFFIX, FileOps, replace_segment_files
from client.protocol.records import NO_TIMESTAMP
from client.protocol.types import TopicPartition

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FetchData",
    "LocalLog",
    "LogOffsetMetadata",
    "OffsetAndTimestamp",
    "parse_topic_partition",
]

logger = logging.getLogger(__name__)

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def parse_topic_partition(name: str) -> TopicPartition:
    """`<topic>-<partition>` as a TopicPartition; LogError when it is not one."""
    match = _PARTITION_DIR.match(name)
    if match is None:
        raise LogError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
    return TopicPartition(match.group(1), int(match.group(2)))


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


class SegmentArgs(TypedDict):
    """`LogSegment.create`'s keyword arguments that come from the log's config and clock."""

    index_interval_bytes: int
    max_index_bytes: int
    now_ms: int


_RANDOM = random.Random()


def _random_int() -> int:
    return _RANDOM.getrandbits(31)


class LocalLog:
    """One partition directory's segments; `Log` (log.py) is its only user."""

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.directory = directory
        self.topic_partition = parse_topic_partition(directory.name)
        self.config = config
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []
        self.dir_dirty = False  # entries added or removed since the last directory fsync
        # Segment files renamed .deleted by retention: (when to remove them, their paths).
        self.pending_deletes: list[tuple[int, list[Path]]] = []
        # Where segment roll jitter comes from (tests give a fixed source).
        self.random_int: Callable[[], int] = _random_int

    # ================================================================== the list

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    def end_offset_metadata(self) -> LogOffsetMetadata:
        active = self.segments[-1]
        return LogOffsetMetadata(active.next_offset, active.base_offset, active.size)

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def floor_index(self, offset: int) -> int:
        """Index of the segment that would hold `offset` (0 when below the first)."""
        return max(0, bisect.bisect_right(self.bases, offset) - 1)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.set_index_config(config.index_interval_bytes, config.segment_index_bytes)

    def segment_args(self, now_ms: int) -> SegmentArgs:
        return {
            "index_interval_bytes": self.config.index_interval_bytes,
            "max_index_bytes": self.config.segment_index_bytes,
            "now_ms": now_ms,
        }

    def add_segment(self, segment: LogSegment) -> None:
        segment.roll_jitter_ms = self.config.random_segment_jitter(self.random_int)
        self.segments.append(segment)
        self.bases.append(segment.base_offset)
        self.dir_dirty = True

    def create_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        """A new empty segment at `base_offset`, appended to the list (the new active one)."""
        segment = LogSegment.create(self.directory, base_offset, **self.segment_args(now_ms))
        self.add_segment(segment)
        return segment

    def remove_segments(
        self, count: int, *, from_start: bool = False, now_ms: int | None = None
    ) -> None:
        """Delete `count` segments from the end (or the start) of the list; with `now_ms`
        and a `file.delete.delay.ms`, their files are renamed `.deleted` and go later."""
        if count <= 0:
            return
        if from_start:
            doomed = self.segments[:count]
            del self.segments[:count]
            del self.bases[:count]
        else:
            doomed = self.segments[-count:]
            del self.segments[-count:]
            del self.bases[-count:]
        delay = self.config.file_delete_delay_ms
        for segment in doomed:
            if now_ms is None or delay == 0:
                segment.delete()
                continue
            segment.change_file_suffix("", DELETED_SUFFIX)
            segment.release()
            self.pending_deletes.append((now_ms + delay, segment.file_paths()))
        self.dir_dirty = True

    def delete_due_files(self, now_ms: int) -> int:
        """Remove the `.deleted` files whose delay has passed; how many segments went."""
        due = [paths for when, paths in self.pending_deletes if when <= now_ms]
        if not due:
            return 0
        self.pending_deletes = [(w, p) for w, p in self.pending_deletes if w > now_ms]
        for paths in due:
            for path in paths:
                path.unlink(missing_ok=True)
        self.dir_dirty = True
        return len(due)

    def delete_oldest(self, count: int, why: str, now_ms: int | None = None) -> None:
        """Retention's deletion of the `count` oldest segments (never the active one)."""
        logger.info(
            "Log %s: deleting %d segment(s) from offset %d by %s",
            self.topic_partition,
            count,
            self.segments[0].base_offset,
            why,
        )
        self.remove_segments(count, from_start=True, now_ms=now_ms)

    def should_roll(self, size: int, max_timestamp: int, last_offset: int, now_ms: int) -> bool:
        """Whether to roll before an append of `size` bytes (Kafka's shouldRoll): full by
        bytes, old by `segment.ms`, a full index, or offsets that no longer fit the
        index's 32-bit relative offsets."""
        active = self.segments[-1]
        config = self.config
        return (
            active.size > 0
            and (
                active.size > config.segment_bytes - size
                or active.time_waited_for_roll(now_ms, max_timestamp)
                > config.max_segment_ms - active.roll_jitter_ms
            )
        ) or (
            active.offset_index.is_full
            or active.time_index.is_full
            or last_offset - active.base_offset > INT_MAX
        )

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= `offset` (the first segment starts at
        or below it: `truncate_fully_and_start_at` is for the other case)."""
        later = len(self.segments) - bisect.bisect_right(self.bases, offset)
        self.remove_segments(later)
        self.segments[-1].truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        self.remove_segments(len(self.segments))
        self.create_segment(offset, now_ms)

    def replace_segments(self, new: LogSegment, old: Sequence[LogSegment], ops: FileOps) -> None:
        """Put `new` in place of `old`, consecutive closed segments, on disk (swap.py) and
        in the list; LogError, with nothing changed, when they no longer are."""
        segments = self.segments
        first = next((i for i, s in enumerate(segments) if s is old[0]), None)
        last = first + len(old) if first is not None else 0
        if (
            first is None
            or last >= len(segments)
            or any(a is not b for a, b in zip(segments[first:last], old, strict=False))
            or new.base_offset != old[0].base_offset
        ):
            raise LogError(
                f"{self.topic_partition}: the segments to replace are no longer in the log"
            )
        replace_segment_files(self.directory, new, old, ops)
        segments[first:last] = [new]
        self.bases[first:last] = [new.base_offset]
        logger.info(
            "Log %s: replaced %d segment(s) from offset %d by a cleaned one (%d bytes)",
            self.topic_partition,
            len(old),
            new.base_offset,
            new.size,
        )

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    # ================================================================== reading

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        upper_bound: int | None,
        min_one_batch: bool,
        log_start_offset: int,
    ) -> FetchData:
        """`Log.read`: whole batches from the one holding `start_offset`, in one segment;
        OffsetOutOfRangeError outside [log_start_offset, LEO]."""
        segments = self.segments
        leo = segments[-1].next_offset
        if start_offset == leo:
            active = segments[-1]
            return FetchData(b"", start_offset, active.base_offset, active.size)
        if start_offset > leo or start_offset < log_start_offset:
            raise OffsetOutOfRangeError(
                f"{self.topic_partition}: offset {start_offset} is outside "
                f"[{log_start_offset}, {leo}]"
            )
        index = max(0, bisect.bisect_right(self.bases, start_offset) - 1)
        while index < len(segments):
            segment = segments[index]
            found = segment.read(start_offset, max_bytes, upper_bound, min_one_batch)
            if found is not None:
                data, first_offset, position = found
                return FetchData(data, first_offset, segment.base_offset, position)
            index += 1
        active = segments[-1]
        return FetchData(b"", start_offset, active.base_offset, active.size)

    def offset_metadata_or_error(self, offset: int, log_start_offset: int) -> LogOffsetMetadata:
        """Where `offset`'s batch is; OffsetOutOfRangeError outside [log start, LEO]."""
        leo = self.log_end_offset
        if offset == leo:
            return self.end_offset_metadata()
        if offset > leo or offset < log_start_offset:
            raise OffsetOutOfRangeError(
                f"{self.topic_partition}: offset {offset} is outside [{log_start_offset}, {leo}]"
            )
        for segment in self.segments[self.floor_index(offset) :]:
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found[0])
        return self.end_offset_metadata()

    def offset_for_timestamp(
        self, timestamp_ms: int, log_start_offset: int
    ) -> OffsetAndTimestamp | None:
        """`Log.offset_for_timestamp`: LATEST_TIMESTAMP and EARLIEST_TIMESTAMP (and
        EARLIEST_LOCAL_TIMESTAMP) give the LEO and the log start offset, MAX_TIMESTAMP the
        record with the largest timestamp; otherwise the first record with timestamp >= it."""
        if timestamp_ms == LATEST_TIMESTAMP:
            return OffsetAndTimestamp(self.log_end_offset, NO_TIMESTAMP)
        if timestamp_ms in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return OffsetAndTimestamp(log_start_offset, NO_TIMESTAMP)
        if timestamp_ms == MAX_TIMESTAMP:
            return self._max_timestamp_record(log_start_offset)
        for segment in self.segments:
            if segment.size == 0 or segment.next_offset <= log_start_offset:
                continue
            if segment.largest_timestamp < timestamp_ms:
                continue
            found = segment.find_offset_by_timestamp(timestamp_ms, log_start_offset)
            if found is not None:
                return OffsetAndTimestamp(*found)
        return None

    def _max_timestamp_record(self, log_start_offset: int) -> OffsetAndTimestamp | None:
        """KIP-734: the first record holding the log's largest timestamp. The segments
        know their largest timestamp; the record itself is the first one of its segment
        at or after that time (Kafka before 3.8 answered its batch's last offset instead,
        KAFKA-16310). None for an empty log, or when that record lies below the log start
        offset (after DeleteRecords), as no record at or above it holds the maximum."""
        live = [s for s in self.segments if s.size > 0 and s.next_offset > log_start_offset]
        if not live:
            return None
        newest = max(live, key=lambda s: s.max_timestamp)  # the first of equals
        found = newest.find_offset_by_timestamp(newest.max_timestamp, log_start_offset)
        return None if found is None else OffsetAndTimestamp(*found)
