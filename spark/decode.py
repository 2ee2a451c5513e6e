"""Reading record batches out of segment files, tolerant of torn tails and live writers.

How it works: a `SegmentSlice` is a byte range `[start, end)` of one `.log` file whose
`start` is a batch boundary (a whole segment is the slice `[0, size)`). `iter_slice_batches`
reads the range with `os.pread` in chunks of `READ_CHUNK` bytes (or one batch, if larger),
walks the v2 batch headers and yields one `SliceBatch` per whole batch. It never maps the
file (a file truncated under a mapping kills the process with SIGBUS) and never raises for
what it finds in the file:

- a batch whose length runs past the slice's end or the file's current end (a broker killed
  mid-write, or a file truncated under us) is a **torn tail**: logged, the slice ends;
- an impossible length, a wrong magic or (with `verify_crc`) a CRC mismatch is a
  **corrupt tail**: logged, the slice ends. In header mode the corrupt batch itself is
  still yielded (`crc_valid` false) before the slice ends, so users can see it;
- a file that vanished (retention, a deleted topic) yields nothing, logged.

`plan_slices` cuts a big segment into ranges of about `split_bytes`, at batch boundaries
found by walking the 12-byte length prefixes of its batches.

Two columnar builders turn batches into pyarrow `RecordBatch`es for the data source:
`RecordColumns` (one row per record: each batch's payload decoded in one call, msgpack
for Tributary's format and aiokafka's Cython reader for Kafka clients' varint records,
then transposed into column lists and converted to Arrow in bulk, with offsets and
timestamps as numpy base + delta: no Python object per record of our own) and
`BatchColumns` (one row per batch, header fields only, no record decoding).

Transactions: `read_slice_records(..., read_committed=True)` skips control batches (the
COMMIT/ABORT markers) and the batches of aborted transactions, as the partition
directory's `.txnindex` files list them (`aborted_transactions`), and stops at the
slice's `stable_end`: the partition's last stable offset, the first offset of its
earliest transaction still open, which the planner finds from the batch headers
(`spark.lso`); nothing at or past it is read, transactional or not, as in Kafka. Without
it every batch is read, markers included (one record each, at its offset).

`record_size` is the bytes a record occupies in the log: its batch's size (61-byte header
plus the compressed payload) shared evenly among the batch's records, the remainder going
one byte each to the first records. So the sum of `record_size` over a partition is exactly
its bytes on disk, and header mode's `batch_size` sums agree with it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from collections.abc import Iterator
from typing import NamedTuple

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.core.log.txn_index import TXN_INDEX_SUFFIX, read_txn_index
from client.protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    BatchHeader,
    Codec,
    RecordError,
    read_header,
    record_entries,
)
from spark import schemas

__all__ = [
    "READ_CHUNK",
    "BatchColumns",
    "RecordColumns",
    "SegmentSlice",
    "SliceBatch",
    "aborted_transactions",
    "iter_slice_batches",
    "plan_slices",
    "read_slice_batches",
    "read_slice_records",
]

logger = logging.getLogger(__name__)

# Reads of this size keep syscalls few for small batches without holding much memory.
READ_CHUNK = 8 * 1024 * 1024
# Where Kafka's v2 CRC-32C coverage starts: from `attributes` to the end of the batch.
CRC_START = 21
# Rows per pyarrow batch handed to Spark: big enough to amortise the conversion.
ROWS_PER_ARROW_BATCH = 32_768
# Timestamps beyond year 9999 (or negative) do not fit a Spark timestamp: those are null.
_MAX_TIMESTAMP_MS = 253_402_300_799_999
_LENGTH_PREFIX = LOG_OVERHEAD  # base_offset int64 + batch_length int32


class SegmentSlice(NamedTuple):
    """A byte range of one segment file of one replica's partition log."""

    path: str
    log_dir: str
    broker: int | None
    topic: str
    partition: int
    segment_base_offset: int
    start: int
    end: int
    # read_committed reads stop before this offset (the partition's first open
    # transaction, `spark.lso`); None: no open transaction (or not planned for it).
    stable_end: int | None = None


class SliceBatch(NamedTuple):
    """A whole batch read from a slice: its position in the file, header and bytes."""

    position: int
    header: BatchHeader
    data: memoryview
    crc_valid: bool


def plan_slices(
    segment: SegmentSlice, split_bytes: int, *, file_size: int | None = None
) -> list[SegmentSlice]:
    """`segment` (a whole file: start 0, end = size) as ranges of about `split_bytes`.

    Cut points are batch boundaries, found by reading the length prefix of each batch. A
    damaged length stops the walk: the rest stays in the last slice, whose reader then
    reports the damage. A file that changes meanwhile only makes the last slice longer.
    """
    size = segment.end if file_size is None else file_size
    if split_bytes <= 0 or size - segment.start <= split_bytes:
        return [segment]
    cuts = [segment.start]
    try:
        fd = os.open(segment.path, os.O_RDONLY)
    except OSError:
        return [segment]  # gone already: the reader logs it
    try:
        pos = segment.start
        while pos + _LENGTH_PREFIX <= size:
            prefix = os.pread(fd, _LENGTH_PREFIX, pos)
            if len(prefix) < _LENGTH_PREFIX:
                break
            batch_size = LOG_OVERHEAD + int.from_bytes(prefix[8:12], "big", signed=True)
            if batch_size < BATCH_OVERHEAD or pos + batch_size > size:
                break
            pos += batch_size
            if pos - cuts[-1] >= split_bytes and pos < size:
                cuts.append(pos)
    finally:
        os.close(fd)
    bounds = [*cuts, size]
    return [segment._replace(start=a, end=b) for a, b in zip(bounds, bounds[1:], strict=False)]


def _describe(segment: SegmentSlice, position: int) -> str:
    return f"{segment.path} at byte {position}"


def iter_slice_batches(
    segment: SegmentSlice,
    *,
    verify_crc: bool = True,
    yield_corrupt: bool = False,
    need_data: bool = True,
) -> Iterator[SliceBatch]:
    """The whole batches of `segment`, in file order; see the module docstring.

    With `verify_crc` a batch with a bad CRC ends the slice (it is yielded first, with
    `crc_valid` False, when `yield_corrupt`). Without it `crc_valid` is always True, and
    without `need_data` too, batches that do not fit the read buffer are not read at all:
    `data` is then only the 61 header bytes (a torn tail is still found by its length).
    """
    try:
        fd = os.open(segment.path, os.O_RDONLY)
    except FileNotFoundError:
        logger.warning("segment %s vanished before it could be read; skipped", segment.path)
        return
    except OSError as exc:
        logger.warning("cannot open segment %s (%s); skipped", segment.path, exc)
        return
    try:
        yield from _walk(fd, segment, verify_crc, yield_corrupt, need_data or verify_crc)
    except OSError as exc:
        logger.warning(
            "reading %s failed (%s); its remaining batches are skipped", segment.path, exc
        )
    finally:
        os.close(fd)


def _walk(
    fd: int, segment: SegmentSlice, verify_crc: bool, yield_corrupt: bool, need_data: bool
) -> Iterator[SliceBatch]:
    end = segment.end
    pos = segment.start
    buf = b""
    buf_pos = pos  # file position of buf[0]
    while pos < end:
        offset = pos - buf_pos
        if len(buf) - offset < BATCH_OVERHEAD:
            buf = os.pread(fd, min(READ_CHUNK, end - pos), pos)
            buf_pos, offset = pos, 0
            if len(buf) < BATCH_OVERHEAD:
                logger.warning(
                    "torn tail in %s: %d byte(s) where a batch header needs %d; "
                    "the rest of the segment is skipped",
                    _describe(segment, pos),
                    len(buf),
                    BATCH_OVERHEAD,
                )
                return
        header = read_header(buf, offset)
        size = LOG_OVERHEAD + header.batch_length
        if size < BATCH_OVERHEAD or header.magic != CURRENT_MAGIC:
            logger.warning(
                "corrupt batch in %s (length %d, magic %d); the rest of the segment is skipped",
                _describe(segment, pos),
                header.batch_length,
                header.magic,
            )
            return
        if pos + size > end:
            logger.warning(
                "torn tail in %s: the batch claims %d bytes, %d remain; "
                "the rest of the segment is skipped",
                _describe(segment, pos),
                size,
                end - pos,
            )
            return
        if not need_data and len(buf) - offset < size:
            yield SliceBatch(pos, header, memoryview(buf)[offset : offset + BATCH_OVERHEAD], True)
            pos += size
            continue
        if len(buf) - offset < size:
            buf = os.pread(fd, min(max(READ_CHUNK, size), end - pos), pos)
            buf_pos, offset = pos, 0
            if len(buf) < size:
                logger.warning(
                    "torn tail in %s: the file ends %d byte(s) into a %d-byte batch "
                    "(truncated while reading?); the rest of the segment is skipped",
                    _describe(segment, pos),
                    len(buf),
                    size,
                )
                return
        data = memoryview(buf)[offset : offset + size]
        crc_valid = not verify_crc or crc32c.crc32c(data[CRC_START:]) == header.crc
        if not crc_valid:
            logger.warning(
                "CRC mismatch in %s (batch at offset %d); the rest of the segment is skipped",
                _describe(segment, pos),
                header.base_offset,
            )
            if yield_corrupt:
                yield SliceBatch(pos, header, data, False)
            return
        yield SliceBatch(pos, header, data, crc_valid)
        pos += size


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic GC while a chunk of batches is decoded: decoding allocates thousands of
    short-lived tuples and lists (none in cycles), and the collections they trigger cost
    about a third of the decoding time. Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _safe_array(values: list, type_: pa.DataType) -> pa.Array:
    """`pa.array(values, type_)`; values of the wrong type become null instead of failing."""
    try:
        return pa.array(values, type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    cleaned: list[object]
    if pa.types.is_binary(type_):
        cleaned = [v if isinstance(v, bytes | bytearray) else None for v in values]
    elif pa.types.is_string(type_):
        cleaned = [v if isinstance(v, str) else None for v in values]
    else:
        cleaned = [v if isinstance(v, int) and -(2**63) <= v < 2**63 else None for v in values]
    return pa.array(cleaned, type_)


def _timestamp_array(millis: pa.Array) -> pa.Array:
    """int64 milliseconds as Spark's timestamp (microseconds, UTC); null when unrepresentable."""
    valid = pc.and_(pc.greater_equal(millis, 0), pc.less_equal(millis, _MAX_TIMESTAMP_MS))
    micros = pc.multiply(pc.if_else(valid, millis, 0), 1000)
    return pc.if_else(valid, micros, None).cast(pa.timestamp("us", tz="UTC"))


_HEADER_TYPE = schemas.ARROW_RECORD_SCHEMA.field("headers").type
_EMPTY_HEADERS_VALUES = pa.array([], _HEADER_TYPE.value_type)


def _headers_array(headers: list[tuple]) -> pa.Array:
    if not any(headers):
        offsets = pa.array([0] * (len(headers) + 1), pa.int32())
        return pa.ListArray.from_arrays(offsets, _EMPTY_HEADERS_VALUES, type=_HEADER_TYPE)
    rows = []
    for record_headers in headers:
        row = []
        if not isinstance(record_headers, list | tuple):
            record_headers = ()  # a malformed payload: no headers rather than a failure
        for entry in record_headers:
            ok = isinstance(entry, list | tuple) and len(entry) == 2
            name, value = entry if ok else (None, None)
            row.append(
                {
                    "key": name if isinstance(name, str) else None,
                    "value": value if isinstance(value, bytes | bytearray) else None,
                }
            )
        rows.append(row)
    return pa.array(rows, _HEADER_TYPE)


class RecordColumns:
    """Accumulates the records of one slice column by column; `take()` gives pyarrow batches.

    Columnar: a batch's payload is decoded in one call (msgpack's `unpackb` for Tributary
    batches, aiokafka's Cython reader for Kafka ones) and transposed with `zip(*entries)`
    into per-column tuples that extend per-column lists; offsets and timestamps are kept
    as deltas plus one base per batch and added up with numpy in `take()`, and every
    column becomes an Arrow array in one bulk conversion. No Python object is built per
    record (`DecodedRecord`, dicts for headers) except by the codec itself.

    `offset_range` (low, high: either may be None) skips, without decoding them, batches
    holding no offset in `[low, high]`; `min_timestamp` skips batches whose max
    timestamp is below it (both are pushed-down filters: Spark still applies them to the
    rows, so a batch kept whole is fine).
    """

    def __init__(
        self,
        segment: SegmentSlice,
        *,
        offset_range: tuple[int | None, int | None] = (None, None),
        min_timestamp: int | None = None,
    ) -> None:
        self.segment = segment
        self.offset_low, self.offset_high = offset_range
        self.min_timestamp = min_timestamp
        self._clear()
        self.skipped_batches = 0
        self.pruned_batches = 0

    def _clear(self) -> None:
        # Per batch: base offset, last offset, leader epoch, record count, timestamp base,
        # size on disk.
        self.batch_bases: list[int] = []
        self.batch_lasts: list[int] = []
        self.batch_epochs: list[int] = []
        self.batch_counts: list[int] = []
        self.batch_ts_bases: list[int] = []
        self.batch_sizes: list[int] = []
        # Per record.
        self.offset_deltas: list = []
        self.ts_deltas: list = []
        self.keys: list = []
        self.values: list = []
        self.headers: list = []
        self.any_headers = False
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def add(self, batch: SliceBatch) -> None:
        header = batch.header
        last = header.base_offset + header.last_offset_delta
        if (
            (self.offset_low is not None and last < self.offset_low)
            or (self.offset_high is not None and header.base_offset > self.offset_high)
            or (self.min_timestamp is not None and header.max_timestamp < self.min_timestamp)
        ):
            self.pruned_batches += 1
            return
        self._add(batch)

    def _add(self, batch: SliceBatch) -> None:
        header = batch.header
        try:
            entries = record_entries(batch.data, header)
            if not entries:
                return
            offset_deltas, ts_deltas, keys, values, headers = zip(*entries, strict=True)
        except (RecordError, TypeError, ValueError) as exc:
            # Intact (CRC good) but undecodable (an unknown codec, a malformed payload):
            # skip it, keep reading.
            self.skipped_batches += 1
            logger.warning(
                "batch at offset %d in %s cannot be decoded (%s); skipped",
                header.base_offset,
                self.segment.path,
                exc,
            )
            return
        count = len(offset_deltas)
        self.batch_bases.append(header.base_offset)
        self.batch_lasts.append(header.base_offset + header.last_offset_delta)
        self.batch_epochs.append(header.partition_leader_epoch)
        self.batch_counts.append(count)
        self.batch_sizes.append(header.size)
        self.offset_deltas.extend(offset_deltas)
        if header.attributes & _LOG_APPEND_TIME:
            # LogAppendTime: every record carries the batch's max timestamp, as in Kafka.
            self.batch_ts_bases.append(header.max_timestamp)
            self.ts_deltas.extend(_zeros(count))
        else:
            self.batch_ts_bases.append(header.base_timestamp)
            self.ts_deltas.extend(ts_deltas)
        self.keys.extend(keys)
        self.values.extend(values)
        self.headers.extend(headers)
        if not self.any_headers and any(headers):
            self.any_headers = True
        self.rows += count

    def take(self) -> pa.RecordBatch:
        """Everything accumulated so far as one arrow batch; the buffers start empty again."""
        n = self.rows
        segment = self.segment
        counts = np.asarray(self.batch_counts, dtype=np.int64)
        offsets = _based(self.batch_bases, counts, self.offset_deltas)
        timestamps = _based(self.batch_ts_bases, counts, self.ts_deltas)
        sizes = np.asarray(self.batch_sizes, dtype=np.int64)
        share, extra = np.divmod(sizes, np.maximum(counts, 1))
        # Each batch's bytes shared evenly, the remainder one byte each to its first records.
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        position = np.arange(n, dtype=np.int64) - starts
        record_sizes = np.repeat(share, counts) + (position < np.repeat(extra, counts))
        columns = [
            pa.repeat(pa.scalar(segment.broker, pa.int32()), n),
            pa.repeat(pa.scalar(segment.log_dir, pa.string()), n),
            pa.repeat(pa.scalar(segment.topic, pa.string()), n),
            pa.repeat(pa.scalar(segment.partition, pa.int32()), n),
            pa.repeat(pa.scalar(segment.segment_base_offset, pa.int64()), n),
            pa.array(np.repeat(np.asarray(self.batch_bases, dtype=np.int64), counts)),
            pa.array(np.repeat(np.asarray(self.batch_lasts, dtype=np.int64), counts)),
            offsets,
            timestamps,
            _timestamp_array(timestamps),
            pa.array(np.repeat(np.asarray(self.batch_epochs, dtype=np.int32), counts)),
            _safe_array(self.keys, pa.binary()),
            _safe_array(self.values, pa.binary()),
            _headers_array(self.headers) if self.any_headers else _no_headers(n),
            pa.array(record_sizes.astype(np.int32)),
        ]
        self._clear()
        return pa.RecordBatch.from_arrays(columns, schema=schemas.ARROW_RECORD_SCHEMA)


_LOG_APPEND_TIME = 0x08


def _zeros(count: int) -> list[int]:
    return [0] * count


def _based(bases: list[int], counts: np.ndarray, deltas: list) -> pa.Array:
    """`base of the record's batch + delta` per record, as int64; a delta that is not an
    int (a malformed payload) or a sum out of int64 range gives null."""
    try:
        with np.errstate(over="raise"):
            values = np.repeat(np.asarray(bases, dtype=np.int64), counts) + np.asarray(
                deltas, dtype=np.int64
            )
        return pa.array(values, pa.int64())
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        pass
    repeated = np.repeat(np.asarray(bases, dtype=object), counts).tolist()
    summed = [
        b + d if isinstance(d, int) and not isinstance(d, bool) else None
        for b, d in zip(repeated, deltas, strict=True)
    ]
    return _safe_array(summed, pa.int64())


def _no_headers(n: int) -> pa.Array:
    offsets = pa.array(np.zeros(n + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, _EMPTY_HEADERS_VALUES, type=_HEADER_TYPE)


_CODEC_NAMES = {int(codec): codec.name.lower() for codec in Codec}


class BatchColumns:
    """Accumulates batch headers of one slice (no record decoding); `take()` as arrow."""

    def __init__(self, segment: SegmentSlice) -> None:
        self.segment = segment
        self._clear()

    def _clear(self) -> None:
        self.rows: list[tuple] = []
        self.crc_valid: list[bool] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, batch: SliceBatch) -> None:
        self.rows.append((batch.position, batch.header))
        self.crc_valid.append(batch.crc_valid)

    def take(self) -> pa.RecordBatch:
        n = len(self.rows)
        segment = self.segment
        headers = [header for _, header in self.rows]
        first = pa.array([h.base_timestamp for h in headers], pa.int64())
        max_ts = pa.array([h.max_timestamp for h in headers], pa.int64())
        columns = [
            pa.repeat(pa.scalar(segment.broker, pa.int32()), n),
            pa.repeat(pa.scalar(segment.log_dir, pa.string()), n),
            pa.repeat(pa.scalar(segment.topic, pa.string()), n),
            pa.repeat(pa.scalar(segment.partition, pa.int32()), n),
            pa.repeat(pa.scalar(segment.segment_base_offset, pa.int64()), n),
            pa.array([position for position, _ in self.rows], pa.int64()),
            pa.array([h.base_offset for h in headers], pa.int64()),
            pa.array([h.base_offset + h.last_offset_delta for h in headers], pa.int64()),
            pa.array([h.records_count for h in headers], pa.int32()),
            pa.array([LOG_OVERHEAD + h.batch_length for h in headers], pa.int32()),
            first,
            _timestamp_array(first),
            max_ts,
            _timestamp_array(max_ts),
            pa.array([h.partition_leader_epoch for h in headers], pa.int32()),
            pa.array([_CODEC_NAMES.get(h.attributes & 0x07, "unknown") for h in headers]),
            pa.array(
                ["log_append_time" if h.attributes & 0x08 else "create_time" for h in headers]
            ),
            pa.array([h.producer_id for h in headers], pa.int64()),
            pa.array(self.crc_valid, pa.bool_()),
        ]
        self._clear()
        return pa.RecordBatch.from_arrays(columns, schema=schemas.ARROW_BATCH_SCHEMA)


def aborted_transactions(directory: str) -> dict[int, list[tuple[int, int]]]:
    """The aborted transactions of a partition directory's `.txnindex` files: producer id
    -> [(first offset, marker offset)]. Unreadable files count as empty (logged)."""
    aborted: dict[int, list[tuple[int, int]]] = {}
    try:
        names = [n for n in os.listdir(directory) if n.endswith(TXN_INDEX_SUFFIX)]
    except OSError as exc:
        logger.warning("cannot list %s (%s): no aborted transactions known", directory, exc)
        return aborted
    for name in names:
        try:
            with open(os.path.join(directory, name), "rb") as file:
                entries, _ = read_txn_index(file.read())
        except OSError as exc:
            logger.warning("cannot read %s (%s); skipped", name, exc)
            continue
        for entry in entries:
            aborted.setdefault(entry.producer_id, []).append(
                (entry.first_offset, entry.last_offset)
            )
    return aborted


def _committed_batches(
    batches: Iterator[SliceBatch],
    aborted: dict[int, list[tuple[int, int]]],
    stable_end: int | None,
) -> Iterator[SliceBatch]:
    """`batches` without control batches and aborted transactions' batches, up to the
    first batch at or past `stable_end` (a slice's batches are in offset order)."""
    for batch in batches:
        header = batch.header
        if stable_end is not None and header.base_offset >= stable_end:
            return
        attributes = header.attributes
        if attributes & ATTR_CONTROL:
            continue
        if attributes & ATTR_TRANSACTIONAL:
            base = header.base_offset
            ranges = aborted.get(header.producer_id, ())
            if any(first <= base <= last for first, last in ranges):
                continue
        yield batch


def read_slice_records(
    segment: SegmentSlice,
    *,
    verify_crc: bool = True,
    offset_range: tuple[int | None, int | None] = (None, None),
    min_timestamp: int | None = None,
    read_committed: bool = False,
) -> Iterator[pa.RecordBatch]:
    """One row per record of `segment`, as arrow batches of about ROWS_PER_ARROW_BATCH;
    batches outside `offset_range` or wholly older than `min_timestamp` are skipped
    undecoded (see `RecordColumns`); with `read_committed`, markers and aborted
    transactions' batches too, and everything from `segment.stable_end` on (set it with
    `spark.lso.with_stable_end`; the data source's planner does)."""
    columns = RecordColumns(segment, offset_range=offset_range, min_timestamp=min_timestamp)
    batches = iter_slice_batches(segment, verify_crc=verify_crc)
    if read_committed:
        directory = os.path.dirname(segment.path)
        batches = _committed_batches(batches, aborted_transactions(directory), segment.stable_end)
    done = False
    while True:
        with _gc_paused():  # never across a yield: only while this chunk is decoded
            for batch in batches:
                columns.add(batch)
                if len(columns) >= ROWS_PER_ARROW_BATCH:
                    break
            else:
                done = True
            chunk = columns.take() if len(columns) else None
        if chunk is not None:
            yield chunk
        if done:
            return


def read_slice_batches(
    segment: SegmentSlice, *, verify_crc: bool = True
) -> Iterator[pa.RecordBatch]:
    """One row per batch of `segment` (header fields only), as arrow batches."""
    columns = BatchColumns(segment)
    batches = iter_slice_batches(
        segment, verify_crc=verify_crc, yield_corrupt=True, need_data=False
    )
    for batch in batches:
        columns.add(batch)
        if len(columns) >= ROWS_PER_ARROW_BATCH:
            yield columns.take()
    if len(columns):
        yield columns.take()
