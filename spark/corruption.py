"""Corrupt batches as rows: the data source's error table (`corrupt_batches=true`).

How it works: the record and header readers (`spark/decode.py`) never decode a batch whose
CRC-32C is wrong: the segment's rows end there with a log line. This reader walks the
same slices with the same walker (`iter_slice_batches`, CRC checked, the damaged batch
yielded) and turns each damaged batch into one row of `CORRUPT_BATCH_SCHEMA`: which
replica and segment, the byte position, the offsets its header claims, the stored and
computed CRC, and how many bytes after it the readers skip. Nothing is decoded, so a
flipped byte in a record value shows here instead of as a wrong value in the records
table. Kept apart from `decode.py` on purpose: it only depends on the walker's contract.
"""

from __future__ import annotations

from collections.abc import Iterator

import crc32c
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from spark.decode import CRC_START, SegmentSlice, iter_slice_batches

__all__ = ["ARROW_CORRUPT_BATCH_SCHEMA", "CORRUPT_BATCH_SCHEMA", "read_slice_corruption"]

CORRUPT_BATCH_SCHEMA = StructType(
    [
        StructField(name, type_, True)
        for name, type_ in (
            ("broker", IntegerType()),
            ("log_dir", StringType()),
            ("topic", StringType()),
            ("partition", IntegerType()),
            ("segment_base_offset", LongType()),
            ("segment_path", StringType()),
            ("position", LongType()),  # byte position of the damaged batch in the segment
            ("base_offset", LongType()),  # as its header says (not covered by the CRC)
            ("last_offset", LongType()),
            ("batch_size", IntegerType()),
            ("stored_crc", LongType()),
            ("computed_crc", LongType()),
            ("skipped_bytes", LongType()),  # bytes of the slice after it, not read
            ("error", StringType()),
        )
    ]
)
ARROW_CORRUPT_BATCH_SCHEMA = to_arrow_schema(CORRUPT_BATCH_SCHEMA, timezone="UTC")


def read_slice_corruption(segment: SegmentSlice) -> Iterator[pa.RecordBatch]:
    """One row per batch of `segment` whose CRC does not match (at most one per slice:
    the walk ends at the first, as the record readers do)."""
    rows = []
    for batch in iter_slice_batches(segment, verify_crc=True, yield_corrupt=True):
        if batch.crc_valid:
            continue
        header = batch.header
        computed = crc32c.crc32c(batch.data[CRC_START:])
        rows.append(
            {
                "broker": segment.broker,
                "log_dir": segment.log_dir,
                "topic": segment.topic,
                "partition": segment.partition,
                "segment_base_offset": segment.segment_base_offset,
                "segment_path": segment.path,
                "position": batch.position,
                "base_offset": header.base_offset,
                "last_offset": header.base_offset + header.last_offset_delta,
                "batch_size": header.size,
                "stored_crc": header.crc,
                "computed_crc": computed,
                "skipped_bytes": max(0, segment.end - batch.position - header.size),
                "error": f"CRC mismatch: stored {header.crc:#010x}, computed {computed:#010x}",
            }
        )
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=ARROW_CORRUPT_BATCH_SCHEMA)
