"""Which log the cleaner should compact next, and which offsets of it (Kafka's
LogCleanerManager).

How it works: for every log whose `cleanup.policy` includes compact, `log_to_clean`
splits the log in three:

    [log start ... first dirty)   clean: compacted by an earlier pass
    [first dirty ... uncleanable)  dirty: written since, and eligible now
    [uncleanable ... log end)      not touched this time

- first dirty offset: the log's cleaner checkpoint, reset to the log start offset when it
  lies outside [log start, log end] (retention moved past it, or the log was replaced);
- first uncleanable offset: the lowest of the active segment's base offset (the active
  segment is never cleaned), the high watermark (Kafka 3's "last stable offset": a record
  that may still be truncated away must not make an older one disappear), and the base
  offset of the first dirty segment that holds a record younger than
  `min.compaction.lag.ms`; and the first offset of the earliest transaction still open
  (its records cannot be judged committed or aborted yet, as Kafka's firstUnstableOffset).

The dirty ratio is dirty bytes / (clean + dirty bytes), counted in whole segments as Kafka
does. `grab_filthiest_log` picks, among the logs whose ratio is above
`min.cleanable.dirty.ratio` (strictly, as Kafka: with a ratio of 0 an idle log is not
cleaned over and over) or whose oldest dirty record is older than
`max.compaction.lag.ms`, the one with the highest ratio. Time comes in as `now_ms`.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping
from typing import NamedTuple

from broker.core.log.log import Log
from broker.core.log.segment import LogSegment
from client.protocol.types import TopicPartition

__all__ = ["LogToClean", "grab_filthiest_log", "log_to_clean"]


class LogToClean(NamedTuple):
    """A compacted log and the offsets a cleaning pass of it would work on."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool  # its oldest dirty record is older than max.compaction.lag.ms

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.dirty_bytes

    @property
    def dirty_ratio(self) -> float:
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0


def first_dirty_offset(log: Log) -> int:
    """The cleaner checkpoint, or the log start offset when it is no longer valid."""
    checkpoint = log.cleaner_checkpoint
    if checkpoint < log.log_start_offset or checkpoint > log.log_end_offset:
        return log.log_start_offset
    return checkpoint


def _overlapping(
    segments: tuple[LogSegment, ...], bases: list[int], start: int, end: int
) -> tuple[LogSegment, ...]:
    """The segments holding offsets in [start, end): from the one holding `start`."""
    first = max(0, bisect.bisect_right(bases, start) - 1)
    last = bisect.bisect_left(bases, end)
    return segments[first:last]


def log_to_clean(
    tp: TopicPartition, log: Log, now_ms: int, high_watermark: int | None
) -> LogToClean:
    """The clean, dirty and uncleanable parts of `log` now (see the module docstring)."""
    config = log.config
    segments = log.segments
    bases = [segment.base_offset for segment in segments]
    active = segments[-1]
    dirty = first_dirty_offset(log)
    uncleanable = active.base_offset
    if high_watermark is not None:
        uncleanable = min(uncleanable, high_watermark)
    state = log.producer_state
    if high_watermark is not None:
        first_open = state.first_unstable_offset(high_watermark)
    else:
        first_open = state.first_open_offset()
    if first_open is not None:
        uncleanable = min(uncleanable, first_open)
    dirty_closed = _overlapping(segments, bases, dirty, active.base_offset)
    if config.min_compaction_lag_ms > 0:
        for segment in dirty_closed:
            if segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    uncleanable = max(uncleanable, dirty)
    # Bytes are counted in whole segments: up to the segment holding the uncleanable offset.
    uncleanable_base = bases[max(0, bisect.bisect_right(bases, uncleanable) - 1)]
    dirty_bytes = sum(
        segment.size
        for segment in _overlapping(segments, bases, min(dirty, uncleanable_base), uncleanable_base)
    )
    clean_bytes = sum(segment.size for segment in segments if segment.base_offset < dirty)
    must_clean = False
    if config.max_compaction_lag_ms < 2**63 - 1:
        firsts = [t for s in dirty_closed if (t := s.first_batch_timestamp() or 0) > 0]
        must_clean = bool(firsts) and min(firsts) < now_ms - config.max_compaction_lag_ms
    return LogToClean(tp, log, dirty, uncleanable, clean_bytes, dirty_bytes, must_clean)


def grab_filthiest_log(
    logs: Mapping[TopicPartition, Log],
    high_watermarks: Mapping[TopicPartition, int] | None,
    now_ms: int,
    *,
    skip: Collection[TopicPartition] = (),
) -> tuple[LogToClean | None, float]:
    """(The compacted log most in need of cleaning, or None; the highest dirty ratio seen).

    With `high_watermarks`, a log missing from it is not considered (its HW is unknown).
    """
    candidates: list[LogToClean] = []
    for tp, log in logs.items():
        if tp in skip or log.closed or not log.config.compact_enabled:
            continue
        hw = high_watermarks.get(tp) if high_watermarks is not None else None
        if high_watermarks is not None and hw is None:
            continue
        candidate = log_to_clean(tp, log, now_ms, hw)
        if candidate.total_bytes > 0:
            candidates.append(candidate)
    max_ratio = max((c.dirty_ratio for c in candidates), default=0.0)
    cleanable = [
        c
        for c in candidates
        if (c.must_clean and c.dirty_bytes > 0)
        or c.dirty_ratio > c.log.config.min_cleanable_dirty_ratio
    ]
    if not cleanable:
        return None, max_ratio
    return max(cleanable, key=lambda c: c.dirty_ratio), max_ratio
