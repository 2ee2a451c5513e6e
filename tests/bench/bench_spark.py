"""Read rate of the `tributary` Spark data source next to a plain Python loop, same files.

The log: ~200k records of 100 bytes written with the real log store (4 partitions, batches
of 500 records, 16 MiB segments) for each of a few codecs. For each codec, one run of:

- plain loop: open every segment, walk the batches (`iter_batches`) and decode each with
  `decode_records` (the same decoder the data source uses), counting records and bytes:
  one Python thread, no Spark;
- slice reader (arrow): the data source's own reader (`spark.decode.read_slice_records`:
  pread, CRC check, columnar decode into pyarrow arrays) in a plain loop;
- slice reader, per-record (before): the same slices through the decoder the data source
  used before the columnar one (a `DecodedRecord` per record from `decode_records`, then
  transposed into lists), kept here so both figures come from one run on one machine;
  the ratio of the two is printed;
- Spark, records: `spark.read.format("tributary")` + count and sum of value lengths
  (every column is produced: a Python data source cannot prune columns). The first query
  of the session also starts the Python workers: it is run once before timing;
- Spark, headers only: the same with `headers_only=true` (no record decoding);
- Spark pushdown: `partition = 0 AND offset >= N - 1000`: filter pushdown plans one
  partition's segments and skips the batches below the offset without decoding them; its
  time is about Spark's fixed cost per query.

Figures are the best of ROUNDS runs, in records/s and MB/s of segment bytes (MB = 10^6).
Spark runs `local[*]`: the data source reads segments in parallel, the plain loops use one
core; at this size Spark's fixed cost per query (planning in a Python worker, task
scheduling, Arrow transfer to the JVM) is a large share of its time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from broker.core.log import Log, LogConfig
from client.protocol.records import Codec, Record, build_batch, decode_records, iter_batches

RECORDS = int(os.environ.get("BENCH_SPARK_RECORDS", "200000"))
RECORD_BYTES = 100
PER_BATCH = 500
PARTITIONS = 4
CODECS = (Codec.NONE, Codec.LZ4, Codec.ZSTD)
CONFIG = LogConfig(segment_bytes=16 * 1024 * 1024)
T0 = 1_700_000_000_000
ROUNDS = 3  # best of: the figures are noisy on a shared 2-core machine


def _write_log(root: Path, codec: Codec) -> int:
    """The benchmark log under `root/<codec>/data`; its bytes on disk."""
    log_dir = root / codec.name.lower() / "data"
    total = 0
    per_partition = RECORDS // PARTITIONS
    for p in range(PARTITIONS):
        log = Log.open(log_dir / f"bench-{p}", CONFIG, now_ms=0)
        for start in range(0, per_partition, PER_BATCH):
            records = [
                Record(
                    b"key-%08d" % (start + i),
                    (b"%08d" % (start + i)) * (RECORD_BYTES // 8) + b"x" * (RECORD_BYTES % 8),
                    T0 + start + i,
                )
                for i in range(PER_BATCH)
            ]
            log.append_as_leader(build_batch(records, codec=codec), 0, now_ms=0)
        total += log.size_in_bytes
        log.close()
    return total


def _segments(path: Path) -> list[Path]:
    return sorted(path.rglob("*.log"))


def _plain_loop(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    for segment in _segments(path):
        data = segment.read_bytes()
        view = memoryview(data)
        for pos, header in iter_batches(view):
            count += len(decode_records(view[pos : pos + header.size]))
    return time.perf_counter() - start, count


def _slice_reader(path: Path) -> tuple[float, int]:
    from spark.datasource import plan_input_partitions
    from spark.decode import read_slice_records

    start = time.perf_counter()
    count = 0
    for group in plan_input_partitions(str(path)):
        for piece in group:
            for batch in read_slice_records(piece):
                count += batch.num_rows
    return time.perf_counter() - start, count


def _per_record_reader(path: Path) -> tuple[float, int]:
    """The decoder before the columnar one (see the module docstring), same output."""
    import pyarrow as pa

    from spark import schemas
    from spark.datasource import plan_input_partitions
    from spark.decode import (
        _gc_paused,
        _headers_array,
        _safe_array,
        _timestamp_array,
        iter_slice_batches,
    )

    def take(piece, rows):
        n = len(rows["offsets"])
        timestamps = _safe_array(rows["timestamps"], pa.int64())
        columns = [
            pa.repeat(pa.scalar(piece.broker, pa.int32()), n),
            pa.repeat(pa.scalar(piece.log_dir, pa.string()), n),
            pa.repeat(pa.scalar(piece.topic, pa.string()), n),
            pa.repeat(pa.scalar(piece.partition, pa.int32()), n),
            pa.repeat(pa.scalar(piece.segment_base_offset, pa.int64()), n),
            pa.array(rows["bases"], pa.int64()),
            pa.array(rows["lasts"], pa.int64()),
            _safe_array(rows["offsets"], pa.int64()),
            timestamps,
            _timestamp_array(timestamps),
            pa.array(rows["epochs"], pa.int32()),
            _safe_array(rows["keys"], pa.binary()),
            _safe_array(rows["values"], pa.binary()),
            _headers_array(rows["headers"]),
            pa.array(rows["sizes"], pa.int32()),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=schemas.ARROW_RECORD_SCHEMA)

    start = time.perf_counter()
    count = 0
    names = ("bases", "lasts", "epochs", "sizes", "offsets", "timestamps", "keys", "values")
    for group in plan_input_partitions(str(path)):
        for piece in group:
            rows = {name: [] for name in (*names, "headers")}
            for batch in iter_slice_batches(piece):
                with _gc_paused():
                    header = batch.header
                    records = decode_records(batch.data)
                    n = len(records)
                    share, extra = divmod(header.size, n)
                    rows["sizes"].extend([share + 1] * extra + [share] * (n - extra))
                    rows["bases"].extend([header.base_offset] * n)
                    rows["lasts"].extend([header.base_offset + header.last_offset_delta] * n)
                    rows["epochs"].extend([header.partition_leader_epoch] * n)
                    offsets, timestamps, keys, values, headers = zip(*records, strict=True)
                    rows["offsets"].extend(offsets)
                    rows["timestamps"].extend(timestamps)
                    rows["keys"].extend(keys)
                    rows["values"].extend(values)
                    rows["headers"].extend(headers)
                if len(rows["offsets"]) >= 32_768:
                    count += take(piece, rows).num_rows
                    rows = {name: [] for name in (*names, "headers")}
            if rows["offsets"]:
                count += take(piece, rows).num_rows
    return time.perf_counter() - start, count


def _spark_query(
    spark, path: Path, *, headers_only: bool, pushdown: bool = False
) -> tuple[float, int]:
    from pyspark.sql import functions as F

    reader = spark.read.format("tributary")
    if pushdown:
        # Partition 0's last 1,000 offsets: planned and read without the other partitions,
        # batches below the offset skipped undecoded.
        last = RECORDS // PARTITIONS
        frame = (
            reader.option("pushdown", "true")
            .load(str(path))
            .where((F.col("partition") == 0) & (F.col("offset") >= last - 1_000))
        )
        query = frame.agg(F.count("*"))
    elif headers_only:
        frame = reader.option("headers_only", "true").load(str(path))
        query = frame.agg(F.sum("record_count"), F.sum("batch_size"))
    else:
        frame = reader.load(str(path))
        query = frame.agg(F.count("*"), F.sum(F.length("value")))
    start = time.perf_counter()
    row = query.collect()[0]
    return time.perf_counter() - start, int(row[0])


def _line(label: str, seconds: float, records: int, size: int) -> str:
    return (
        f"  {label:<22} {records / seconds:>11,.0f} records/s  {size / seconds / 1e6:>7.1f} MB/s"
        f"  ({seconds:.2f} s)"
    )


def _timed_session():
    """Build the session, printing where its start-up time goes."""
    from spark.session import build_session

    started = time.perf_counter()
    spark = build_session(shuffle_partitions=4, app_name="bench-spark")
    jvm = time.perf_counter() - started
    step = time.perf_counter()
    spark.range(1).count()
    first_job = time.perf_counter() - step
    print(
        f"Spark session start: {jvm:.1f} s (JVM launch and SparkContext), "
        f"first JVM-only job {first_job:.1f} s (class loading, code generation)"
    )
    return spark


def main() -> None:

    root = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    try:
        sizes = {codec: _write_log(root, codec) for codec in CODECS}
        print(
            f"{RECORDS:,} records of {RECORD_BYTES} bytes in {PARTITIONS} partitions, batches "
            f"of {PER_BATCH}; {os.cpu_count()} cores; Spark local[*]"
        )
        spark = _timed_session()
        try:
            warm = time.perf_counter()
            _spark_query(spark, root / CODECS[0].name.lower(), headers_only=False)
            print(
                f"first data source query (starts the Python workers): "
                f"{time.perf_counter() - warm:.1f} s"
            )
            for codec in CODECS:
                path = root / codec.name.lower()
                size = sizes[codec]
                print(f"codec {codec.name.lower()}: {size / 1e6:.1f} MB of segments")
                rates = {}
                for label, run in (
                    ("plain Python loop", lambda p=path: _plain_loop(p)),
                    ("per-record (before)", lambda p=path: _per_record_reader(p)),
                    ("slice reader (arrow)", lambda p=path: _slice_reader(p)),
                    ("Spark records", lambda p=path: _spark_query(spark, p, headers_only=False)),
                    (
                        "Spark headers only",
                        lambda p=path: _spark_query(spark, p, headers_only=True),
                    ),
                ):
                    runs = [run() for _ in range(ROUNDS)]
                    seconds = min(elapsed for elapsed, _ in runs)
                    count = runs[0][1]
                    assert count == RECORDS, (label, count)
                    rates[label] = count / seconds
                    print(_line(label, seconds, count, size))
                pushed = min(
                    _spark_query(spark, path, headers_only=False, pushdown=True)
                    for _ in range(ROUNDS)
                )
                assert pushed[1] == 1_000, pushed
                print(
                    f"  Spark pushdown (1 partition, last 1,000 offsets): {pushed[0]:.2f} s "
                    f"(~ the fixed cost of a query: planning in Python workers, scheduling)"
                )
                print(
                    f"  columnar decode vs before: "
                    f"{rates['slice reader (arrow)'] / rates['per-record (before)']:.1f}x "
                    "(target: 2x)"
                )
        finally:
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
