"""Which segments retention deletes (Kafka's `deleteOldSegments` rules), for `Log`.

How it works: each rule is a predicate over (segment, the segment after it or None),
applied from the oldest segment until it first fails:

- `retention_ms_breached`: the segment's largest timestamp is older than `retention.ms`;
- `retention_size_breached`: the log would still be at least `retention.bytes` without
  it (the rule carries the excess and uses it up segment by segment);
- `log_start_offset_breached`: the next segment starts at or below the log start offset
  (DeleteRecords or a follower copying its leader's moved it), so none of this one's
  offsets is readable.

`Log.delete_old_segments` applies the first two with `cleanup.policy` delete, the third
always, each after the previous one's deletions; `deletable_segments` counts how many
segments a rule deletes: only whole segments wholly below the high watermark (when one
is given), never an empty active segment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from broker.core.log.segment import LogSegment

__all__ = [
    "SegmentPredicate",
    "deletable_segments",
    "log_start_offset_breached",
    "retention_ms_breached",
    "retention_size_breached",
]

SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]


def retention_ms_breached(retention_ms: int, now_ms: int) -> SegmentPredicate:
    return lambda segment, _next: now_ms - segment.largest_timestamp > retention_ms


def retention_size_breached(excess_bytes: int) -> SegmentPredicate:
    """`excess_bytes`: the log's size minus `retention.bytes`."""
    excess = excess_bytes

    def over_size(segment: LogSegment, _next: LogSegment | None) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False

    return over_size


def log_start_offset_breached(log_start_offset: int) -> SegmentPredicate:
    return lambda _segment, following: (
        following is not None and following.base_offset <= log_start_offset
    )


def deletable_segments(
    segments: Sequence[LogSegment],
    log_end_offset: int,
    predicate: SegmentPredicate,
    high_watermark: int | None,
) -> int:
    """How many segments from the oldest satisfy `predicate`, stopping at the first that
    does not, at one not wholly below `high_watermark`, and at an empty active segment
    (Kafka's deletableSegments)."""
    count = 0
    for index, segment in enumerate(segments):
        following = segments[index + 1] if index + 1 < len(segments) else None
        upper = following.base_offset if following is not None else log_end_offset
        if high_watermark is not None and high_watermark < upper:
            break
        if following is None and segment.size == 0:
            break
        if not predicate(segment, following):
            break
        count += 1
    return count
