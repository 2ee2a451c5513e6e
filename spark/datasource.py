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
- `corrupt_batches` (default false): the error table instead, one row per batch whose
  CRC does not match (`spark.corruption.CORRUPT_BATCH_SCHEMA`): where it is, the offsets
  it claims and both CRCs. Such batches are never decoded into records.

A torn or corrupt tail, a vanished file or a file truncated under the reader ends that
segment's rows with one log line; the job never fails because of it. Offsets appear once
per replica: a partition with three replicas yields each record three times, with
different `broker`/`log_dir` (dedupe on (topic, partition, offset) to count it once).

The path must be readable by the driver (planning) and by every executor (reading): on a
real cluster, a shared filesystem.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark import schemas
from spark.corruption import CORRUPT_BATCH_SCHEMA, read_slice_corruption
from spark.decode import SegmentSlice, plan_slices, read_slice_batches, read_slice_records
from spark.layout import find_log_dirs

__all__ = ["FORMAT", "TributaryDataSource", "plan_input_partitions", "register"]

FORMAT = "tributary"
DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024
_TRUE = {"true", "1", "yes", "on"}


def _flag(options: dict, name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    return str(value).strip().lower() in _TRUE


def _int(options: dict, name: str, default: int) -> int:
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
) -> list[tuple[SegmentSlice, ...]]:
    """The slices of each input partition for the logs under `path` (see module doc)."""
    groups: list[tuple[SegmentSlice, ...]] = []
    for log_dir in find_log_dirs(path):
        pending: list[SegmentSlice] = []
        pending_bytes = 0
        for partition in log_dir.partitions:
            if topics is not None and partition.topic not in topics:
                continue
            for segment in partition.segments:
                whole = SegmentSlice(
                    segment.path,
                    log_dir.path,
                    log_dir.broker,
                    partition.topic,
                    partition.partition,
                    segment.base_offset,
                    0,
                    segment.size,
                )
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
    def __init__(self, options: dict) -> None:
        self.path = os.path.abspath(options.get("path") or ".")
        self.headers_only = _flag(options, "headers_only", False)
        self.verify_crc = _flag(options, "verify_crc", True)
        self.corrupt_batches = _flag(options, "corrupt_batches", False)
        self.split_bytes = _int(options, "split_bytes", DEFAULT_SPLIT_BYTES)
        self.pack_bytes = _int(options, "pack_bytes", 0)
        topics = options.get("topics")
        self.topics = (
            frozenset(t.strip() for t in topics.split(",") if t.strip()) if topics else None
        )

    def partitions(self) -> Sequence[InputPartition]:
        groups = plan_input_partitions(
            self.path,
            split_bytes=self.split_bytes,
            pack_bytes=self.pack_bytes,
            topics=self.topics,
        )
        return [SlicesPartition(group) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        slices = partition.slices if isinstance(partition, SlicesPartition) else ()
        if self.corrupt_batches:
            for piece in slices:
                yield from read_slice_corruption(piece)
            return
        read = read_slice_batches if self.headers_only else read_slice_records
        for piece in slices:
            yield from read(piece, verify_crc=self.verify_crc)


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
        return TributaryReader(dict(self.options))


def register(spark: SparkSession) -> None:
    """Make `spark.read.format("tributary")` available in this session."""
    spark.dataSource.register(TributaryDataSource)
