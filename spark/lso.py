"""The last stable offset of a replica's partition log, from its batch headers alone.

A read_committed Kafka consumer reads only below the partition's last stable offset
(Kafka 2.8's `Log.lastStableOffset`): the first offset of the earliest transaction still
open, nothing at or past it, transactional or not. Offline, `first_open_offset` finds
that offset by replaying the batch headers of a partition directory's segments in
offset order, the way the broker's producer state does (`broker.core.log.producer_state`):
a producer's transaction opens at its first transactional data batch after its last
COMMIT/ABORT marker and closes at its next control batch; what is open at the end of the
log is open. Only the 61-byte headers are read (`iter_slice_batches` without data or CRC
checks, streaming), never a record.

Unlike the broker, a marker in the files closes its transaction even above the high
watermark: the data source reads each replica's files to their end in both isolation
modes (see `spark.datasource`), so the only bound here is the open transactions'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from client.protocol.records import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader
from spark.decode import SegmentSlice, iter_slice_batches

__all__ = ["first_open_offset", "open_transactions", "with_stable_end"]


def open_transactions(
    headers: Iterable[BatchHeader], *, until: int | None = None
) -> dict[int, int]:
    """Producer id -> first offset of its transaction still open after `headers` (in
    offset order). With `until`, headers from a batch starting past it on are ignored:
    a transaction opened later cannot bound reads at or below `until`."""
    open_: dict[int, int] = {}
    for header in headers:
        if until is not None and header.base_offset > until:
            break
        pid = header.producer_id
        if pid < 0:
            continue
        attributes = header.attributes
        if attributes & ATTR_CONTROL:
            open_.pop(pid, None)
        elif attributes & ATTR_TRANSACTIONAL and pid not in open_:
            open_[pid] = header.base_offset
    return open_


def _headers(segments: Sequence[SegmentSlice]) -> Iterable[BatchHeader]:
    for segment in sorted(segments, key=lambda s: (s.segment_base_offset, s.start)):
        for batch in iter_slice_batches(segment, verify_crc=False, need_data=False):
            yield batch.header


def first_open_offset(segments: Sequence[SegmentSlice], *, until: int | None = None) -> int | None:
    """The first offset of the earliest transaction open at the end of `segments` (the
    whole segment files of one replica's partition), None when none is: read_committed
    reads stop there. `until` as in `open_transactions` (an offset range's upper end)."""
    firsts = open_transactions(_headers(segments), until=until).values()
    return min(firsts) if firsts else None


def with_stable_end(segments: Sequence[SegmentSlice]) -> list[SegmentSlice]:
    """`segments` (one replica's partition) with `stable_end` set to its first open
    transaction's offset, for `read_slice_records(..., read_committed=True)`."""
    end = first_open_offset(segments)
    return [segment._replace(stable_end=end) for segment in segments]
