"""Checking a segment's batches against their CRCs, and rebuilding a damaged segment.

How it works: `SegmentScan` reads one segment from the batch holding a given offset,
in steps of about `max_bytes` (so the shell can rate-limit and yield between steps),
validating every batch (length, magic, CRC-32C: `validate_batch`) without decoding
records. A batch that fails becomes a `CorruptRange` with its header's offsets, and the
scan goes on with the next batch (its length is intact). A length that is impossible
or runs past the end means the batches after it cannot be found: the range then runs
from the first offset not yet accounted for to the end of the segment, and the scan of
the segment ends.

`rebuild_segment` writes a new segment (`<base>.log.cleaned`) from the segment's own
intact batches outside the damaged ranges and the replacement batches fetched from
another replica, in the order `scrub.splice_segment` decides, flushes it and swaps it in
with `Log.replace_segments` (crash-safe; the log refuses when the segment is no longer
there, e.g. retention or a truncation got there first).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from broker.core.log.log import Log
from broker.core.log.segment import BatchPlacement, LogSegment
from broker.core.log.swap import CLEANED_SUFFIX
from broker.core.scrub import BatchSpan, CorruptRange, splice_segment
from client.protocol.records import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    RecordError,
    iter_batches,
    read_header,
    validate_batch,
    validate_batches,
)

__all__ = ["SegmentScan", "rebuild_segment", "segment_end_offset"]


def segment_end_offset(log: Log, segment: LogSegment) -> int:
    """The offset after `segment`: the next segment's base (or the LEO for the last)."""
    segments = log.segments
    for i, s in enumerate(segments):
        if s is segment:
            return segments[i + 1].base_offset if i + 1 < len(segments) else log.log_end_offset
    return segment.next_offset


class SegmentScan:
    """One pass over one segment; call `step()` until `done`."""

    def __init__(self, segment: LogSegment, from_offset: int, end_offset: int) -> None:
        self.segment = segment
        self.end_offset = end_offset  # offset after the segment (next segment's base)
        self.position = 0
        self.next_offset = segment.base_offset  # first offset not accounted for yet
        if from_offset > segment.base_offset:
            found = segment.translate_offset(from_offset)
            if found is None:
                self.position = segment.size
            else:
                self.position = found[0]
                self.next_offset = found[1].base_offset
        self.end = segment.size
        self.batches = 0
        self.bytes = 0
        self.corrupt: list[CorruptRange] = []
        self.done = self.position >= self.end

    def step(self, max_bytes: int) -> int:
        """Check batches worth about `max_bytes` (at least one); returns bytes read."""
        if self.done:
            return 0
        segment = self.segment
        want = max(BATCH_OVERHEAD, min(max_bytes, self.end - self.position))
        chunk = segment.pread(want, self.position)
        view = memoryview(chunk)
        if len(chunk) >= LOG_OVERHEAD:
            first_size = LOG_OVERHEAD + int.from_bytes(chunk[8:12], "big", signed=True)
            if BATCH_OVERHEAD <= first_size <= self.end - self.position and first_size > len(chunk):
                chunk = segment.pread(first_size, self.position)  # one batch larger than a step
                view = memoryview(chunk)
        rel = 0
        while rel < len(chunk):
            if len(chunk) - rel < LOG_OVERHEAD:
                break
            size = LOG_OVERHEAD + int.from_bytes(chunk[rel + 8 : rel + 12], "big", signed=True)
            if size < BATCH_OVERHEAD or self.position + rel + size > self.end:
                self._broken(f"impossible batch length at position {self.position + rel}")
                return rel
            if rel + size > len(chunk):
                break
            base = int.from_bytes(chunk[rel : rel + 8], "big", signed=True)
            try:
                header = validate_batch(view[rel : rel + size], strict=False)
            except RecordError as exc:
                header = read_header(view, rel)
                last = max(base, header.last_offset)
                if base < self.next_offset or last >= self.end_offset:
                    self._broken(f"batch at position {self.position + rel}: {exc}")
                    return rel
                where = f"at byte {self.position + rel}"
                reason = str(exc).split(" (")[0].replace("at position 0", where)
                self.corrupt.append(CorruptRange(base, last, segment.base_offset, reason))
                self.next_offset = last + 1
            else:
                if header.base_offset < self.next_offset:
                    self._broken(
                        f"offset {header.base_offset} goes backwards at position "
                        f"{self.position + rel}"
                    )
                    return rel
                self.next_offset = header.last_offset + 1
            self.batches += 1
            self.bytes += size
            rel += size
        self.position += rel
        if self.position >= self.end:
            self.done = True
        return max(rel, 1)

    def _broken(self, reason: str) -> None:
        """The rest of the segment cannot be walked: one range to its end."""
        if self.next_offset < self.end_offset:
            self.corrupt.append(
                CorruptRange(
                    self.next_offset, self.end_offset - 1, self.segment.base_offset, reason
                )
            )
        self.bytes += self.end - self.position
        self.position = self.end
        self.done = True


def _own_batches(segment: LogSegment) -> tuple[list[BatchSpan], list[tuple[int, int]]]:
    """The segment's intact batches, in order: spans and (position, size)."""
    spans: list[BatchSpan] = []
    places: list[tuple[int, int]] = []
    position = 0
    end = segment.size
    while position + BATCH_OVERHEAD <= end:
        head = segment.pread(BATCH_OVERHEAD, position)
        size = LOG_OVERHEAD + int.from_bytes(head[8:12], "big", signed=True)
        if size < BATCH_OVERHEAD or position + size > end:
            break
        data = segment.pread(size, position)
        try:
            header = validate_batch(data, strict=False)
        except RecordError:
            position += size
            continue
        spans.append(BatchSpan(header.base_offset, header.last_offset))
        places.append((position, size))
        position += size
    return spans, places


def rebuild_segment(
    log: Log,
    segment: LogSegment,
    ranges: Sequence[CorruptRange],
    fetched: bytes,
    *,
    now_ms: int,
) -> int:
    """Replace `segment` by a copy with `ranges` taken from `fetched` (whole batches from
    another replica, each inside one range); returns the new segment's size. Raises
    `SpliceError`/`RecordError` when the fetched bytes do not fit, `LogError` when the
    segment is no longer in the log; nothing changes then."""
    validate_batches(fetched, strict=False)
    fetched_spans = []
    fetched_places = []
    for pos, header in iter_batches(fetched):
        fetched_spans.append(BatchSpan(header.base_offset, header.last_offset))
        fetched_places.append((pos, header.size))
    own_spans, own_places = _own_batches(segment)
    order = splice_segment(own_spans, ranges, fetched_spans, compacted=log.config.compact_enabled)
    config = log.config
    output = LogSegment.create(
        log.directory,
        segment.base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes,
        now_ms=now_ms,
        suffix=CLEANED_SUFFIX,
    )
    try:
        view = memoryview(fetched)
        for source, index in order:
            if source == "own":
                position, size = own_places[index]
                data = segment.pread(size, position)
            else:
                position, size = fetched_places[index]
                data = bytes(view[position : position + size])
            header = read_header(data)
            output.append(
                [data],
                [
                    BatchPlacement(
                        header.base_offset, header.last_offset, header.max_timestamp, size
                    )
                ],
            )
        output.on_become_inactive()
        output.flush()
        mtime = os.stat(segment.log_path).st_mtime_ns
        os.utime(output.log_path, ns=(mtime, mtime))
        log.replace_segments(output, [segment])
    except BaseException:
        if output.log_path.name.endswith(CLEANED_SUFFIX):
            output.delete()
        raise
    return output.size
