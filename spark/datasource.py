"""`spark.read.format("tributary").load(path)`: broker segment logs as a DataFrame.

How it works (Spark 4's Python data source API): `TributaryDataSource.reader` plans on the
driver: it finds every broker log dir under `path` (`spark.layout.find_log_dirs`) and makes
one input partition per segment file, or per byte range of a segment bigger than
`split_bytes` (cut at batch boundaries by walking the batch length prefixes). Each Spark
task then reads its slices with `os.pread` and yields pyarrow batches built by
`spark.decode`, so Spark gets columnar data without per-row Python conversion.

Options (all strings, as Spark passes them):
- `headers_only` (default false): one row per batch (`schemas.BATCH_SCHEMA`), no record
  decoding: offsets, record count, bytes, timestamps, leader epoch, codec, `crc_valid`;
- `verify_crc` (default true): check each batch's CRC-32C; a mismatch ends that
  segment's rows (header mode shows the bad batch with `crc_valid` false first);
- `split_bytes` (default 128 MiB): segments larger than this are read by several tasks;
- `pack_bytes` (default 0 = off): segments smaller than this, of the same log dir, are read
  together by one task, up to this many bytes (thousands of tiny segments otherwise cost a
  task each);
- `topics`: a comma-separated list of topics to read (default: all);
- `read_committed` (default false): what a read_committed consumer gets: no transaction
  markers, no records of aborted transactions (the partition's `.txnindex` files), and
  nothing at or past the last stable offset, the first offset of the earliest
  transaction still open when the plan was made (found per replica from the batch
  headers, on the driver: `spark.lso`), so an open transaction holds back every later
  record, committed or not transactional, as in Kafka. Like the default mode it reads
  each replica's files to their end, not to the checkpointed high watermark (that file
  lags the broker by seconds; filter on `spark.layout.read_checkpoints`' HW to apply
  it). Without the option every record of the log, markers included;
- `pushdown` (default false): take Spark's filters too (below);
- `corrupt_batches` (default false): the error table instead, one row per batch whose
  CRC does not match (`spark.corruption.CORRUPT_BATCH_SCHEMA`): where it is, the offsets
  it claims and both CRCs. Such batches are never decoded into records.

Filter pushdown, with the option `pushdown=true` (and the session setting
`spark.sql.python.filterPushdown.enabled`, which `spark.session.build_session` sets):
`topic`, `partition` and `broker` equal to / in a list decide which partitions and
segments are planned at all (exact: Spark does not re-check them); in record mode,
`offset` ranges (=, <, <=, >, >=) skip whole segments and, inside a segment, batches
outside the range without decoding them, and `timestamp`/`time` lower bounds skip
batches whose max timestamp is older. Those ranges are handed back to Spark too, which
filters the rows of the batches kept. Opt-in because Spark 4.3 keeps a DataFrame's
pushed-down plan: the same DataFrame queried again *without* filters still reads only
what the first query pushed. Use a fresh `load()` per filtered query (the job does);
without the option, filters are Spark's alone and a DataFrame can be reused freely (and
a session without the setting works: Spark refuses a reader with `pushFilters` there).

A torn or corrupt tail, a vanished file or a file truncated under the reader ends that
segment's rows with one log line; the job never fails because of it. Offsets appear once
per replica: a partition with three replicas yields each record three times, with
different `broker`/`log_dir` (dedupe on (topic, partition, offset) to count it once).

The path must be readable by the driver (planning) and by every executor (reading): on a
real cluster, a shared filesystem.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeGuard

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from spark import schemas
from spark.corruption import CORRUPT_BATCH_SCHEMA, read_slice_corruption
from spark.decode import SegmentSlice, plan_slices, read_slice_batches, read_slice_records
from spark.layout import find_log_dirs
from spark.lso import first_open_offset

__all__ = ["FORMAT", "TributaryDataSource", "plan_input_partitions", "register"]

FORMAT = "tributary"
DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024
_TRUE = {"true", "1", "yes", "on"}


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    return str(value).strip().lower() in _TRUE


def _int(options: Mapping[str, str], name: str, default: int) -> int:
    value = options.get(name)
    if value is None or str(value).strip() == "":
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"option {name}={value!r} is not an integer") from None


class SlicesPartition(InputPartition):
    """The segment slices one Spark task reads, in order."""

    def __init__(self, slices: tuple[SegmentSlice, ...]) -> None:
        super().__init__(slices)
        self.slices = slices


def plan_input_partitions(
    path: str,
    *,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    pack_bytes: int = 0,
    topics: frozenset[str] | None = None,
    partitions: frozenset[int] | None = None,
    brokers: frozenset[int] | None = None,
    offset_range: tuple[int | None, int | None] = (None, None),
    read_committed: bool = False,
) -> list[tuple[SegmentSlice, ...]]:
    """The slices of each input partition for the logs under `path` (see module doc).

    `topics`, `partitions`, `brokers`: only these (None: all). `offset_range` (low, high,
    inclusive, None: open): segments that cannot hold such an offset are left out. With
    `read_committed`, each replica's partition is scanned once here (headers only,
    `spark.lso`) for its first open transaction: slices carry it as `stable_end`, and
    segments starting at or past it are left out.
    """
    low, high = offset_range
    groups: list[tuple[SegmentSlice, ...]] = []
    for log_dir in find_log_dirs(path):
        if brokers is not None and log_dir.broker not in brokers:
            continue
        pending: list[SegmentSlice] = []
        pending_bytes = 0
        for partition in log_dir.partitions:
            if topics is not None and partition.topic not in topics:
                continue
            if partitions is not None and partition.partition not in partitions:
                continue
            segments = partition.segments
            wholes = [
                SegmentSlice(
                    segment.path,
                    log_dir.path,
                    log_dir.broker,
                    partition.topic,
                    partition.partition,
                    segment.base_offset,
                    0,
                    segment.size,
                )
                for segment in segments
            ]
            stable_end = first_open_offset(wholes, until=high) if read_committed else None
            for index, segment in enumerate(segments):
                if high is not None and segment.base_offset > high:
                    continue  # starts after the range
                if stable_end is not None and segment.base_offset >= stable_end:
                    continue  # at or past the last stable offset
                following = segments[index + 1] if index + 1 < len(segments) else None
                if low is not None and following is not None and following.base_offset <= low:
                    continue  # ends before the range (the next segment starts at or below it)
                whole = wholes[index]._replace(stable_end=stable_end)
                if segment.size == 0:
                    continue  # an empty active segment: nothing to read
                if pack_bytes > 0 and segment.size < pack_bytes:
                    if pending and pending_bytes + segment.size > pack_bytes:
                        groups.append(tuple(pending))
                        pending, pending_bytes = [], 0
                    pending.append(whole)
                    pending_bytes += segment.size
                    continue
                groups.extend((piece,) for piece in plan_slices(whole, split_bytes))
        if pending:
            groups.append(tuple(pending))
    return groups


class TributaryReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.path = os.path.abspath(options.get("path") or ".")
        self.headers_only = _flag(options, "headers_only", False)
        self.verify_crc = _flag(options, "verify_crc", True)
        self.corrupt_batches = _flag(options, "corrupt_batches", False)
        self.read_committed = _flag(options, "read_committed", False)
        self.split_bytes = _int(options, "split_bytes", DEFAULT_SPLIT_BYTES)
        self.pack_bytes = _int(options, "pack_bytes", 0)
        topics = options.get("topics")
        self.topics = (
            frozenset(t.strip() for t in topics.split(",") if t.strip()) if topics else None
        )
        self.partition_ids: frozenset[int] | None = None
        self.brokers: frozenset[int] | None = None
        self.offset_low: int | None = None
        self.offset_high: int | None = None
        self.min_timestamp: int | None = None

    def _push(self, f: Filter) -> bool:
        """Apply `f` to the plan; True when that is exact (Spark need not re-check it)."""
        # The column path: every filter has one but Not (`partition <> 1`), left to Spark.
        path: tuple[str, ...] | None = getattr(f, "attribute", None)
        column = path[0] if path is not None and len(path) == 1 else None
        values = _values(f)
        if column in ("topic", "partition", "broker") and values is not None:
            if column == "topic" and all(isinstance(v, str) for v in values):
                self.topics = _narrow(self.topics, values)
                return True
            if column != "topic" and all(_is_int(v) for v in values):
                attr = "partition_ids" if column == "partition" else "brokers"
                setattr(self, attr, _narrow(getattr(self, attr), values))
                return True
            return False
        if self.headers_only or self.corrupt_batches:
            return False
        if column == "offset":
            low, high = _bounds(f)
            if low is not None:
                self.offset_low = low if self.offset_low is None else max(self.offset_low, low)
            if high is not None:
                self.offset_high = high if self.offset_high is None else min(self.offset_high, high)
        elif column in ("timestamp", "time"):
            low, _ = _bounds(f)
            if low is not None:
                self.min_timestamp = (
                    low if self.min_timestamp is None else max(self.min_timestamp, low)
                )
        return False

    def partitions(self) -> Sequence[InputPartition]:
        groups = plan_input_partitions(
            self.path,
            split_bytes=self.split_bytes,
            pack_bytes=self.pack_bytes,
            topics=self.topics,
            partitions=self.partition_ids,
            brokers=self.brokers,
            offset_range=(self.offset_low, self.offset_high),
            read_committed=self.read_committed and not (self.headers_only or self.corrupt_batches),
        )
        return [SlicesPartition(group) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        slices = partition.slices if isinstance(partition, SlicesPartition) else ()
        if self.corrupt_batches:
            for piece in slices:
                yield from read_slice_corruption(piece)
            return
        for piece in slices:
            if self.headers_only:
                yield from read_slice_batches(piece, verify_crc=self.verify_crc)
            else:
                yield from read_slice_records(
                    piece,
                    verify_crc=self.verify_crc,
                    offset_range=(self.offset_low, self.offset_high),
                    min_timestamp=self.min_timestamp,
                    read_committed=self.read_committed,
                )


class PushdownReader(TributaryReader):
    """TributaryReader with filter pushdown (option `pushdown=true`; module docstring)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 (Spark's name)
        """Keep what narrows the plan (see the module docstring); yield what Spark must
        still apply: everything but the exact topic/partition/broker choices."""
        for f in filters:
            if self._push(f):
                continue
            yield f


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _values(f: Filter) -> tuple | None:
    """The values an EqualTo / In filter allows; None for any other filter."""
    if isinstance(f, EqualTo):
        return (f.value,)
    if isinstance(f, In):
        return tuple(f.value)
    return None


def _narrow(current: frozenset | None, values: tuple) -> frozenset:
    allowed = frozenset(values)
    return allowed if current is None else current & allowed


def _millis(value: object) -> int | None:
    """An offset or timestamp literal as an int (datetimes: milliseconds since the epoch)."""
    if _is_int(value):
        return int(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)  # the session's time zone is UTC
        return int(value.timestamp() * 1000)
    return None


def _bounds(f: Filter) -> tuple[int | None, int | None]:
    """The inclusive (low, high) integer range `f` allows; (None, None) if not a range."""
    value = _millis(getattr(f, "value", None))
    if value is None:
        return None, None
    if isinstance(f, EqualTo):
        return value, value
    if isinstance(f, GreaterThan):
        return value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return value, None
    if isinstance(f, LessThan):
        return None, value - 1
    if isinstance(f, LessThanOrEqual):
        return None, value
    return None, None


class TributaryDataSource(DataSource):
    """Broker segment logs; see the module docstring for the options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        if _flag(self.options, "corrupt_batches", False):
            return CORRUPT_BATCH_SCHEMA
        if _flag(self.options, "headers_only", False):
            return schemas.BATCH_SCHEMA
        return schemas.RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        options = dict(self.options)
        if _flag(options, "pushdown", False):
            return PushdownReader(options)
        return TributaryReader(options)


def register(spark: SparkSession) -> None:
    """Make `spark.read.format("tributary")` available in this session."""
    spark.dataSource.register(TributaryDataSource)
