"""Produce throughput per time bucket, per partition, topic and broker, counted once.

How it works: the segment logs hold every record once per replica. `unique_records`
keeps one row per (topic, partition, offset) (whichever replica Spark meets first: their
bytes are the same batch shared the same way). Buckets are UTC intervals of the record
timestamp (CreateTime as the producer set it, or LogAppendTime when the topic says so),
so the rate is "produced per bucket", not "arrived on this replica per bucket".

The bucket width adapts to the run: `choose_bucket_ms` picks the smallest "round" width
(1 s, 2 s, 5 s, 10 s, 15 s, 30 s, 1 min, ...) that gives at most `TARGET_BUCKETS` buckets
over the run's duration, so a two-minute run gets ~1 s points and a day ~15 min ones.
`topic_per_bucket` zero-fills every bucket of the run in which a topic produced nothing
(an idle stretch is a zero, not a straight line between two busy points).

`partition_summary` gives rates that mean something for bursty traffic: the average over
the buckets in which the partition received records (`records_per_s`, `bytes_per_s`),
the busiest bucket (`peak_records_per_s`), and how many buckets were active; never an
average over the partition's whole lifetime.

`broker_bytes` turns each broker's `bytes_in_total` / `bytes_out_total` counters from the
metrics snapshots into bytes per second per bucket (differences between consecutive
snapshots; a counter that goes down means a restart, counted from zero again).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from spark.columns import millis_to_time

__all__ = [
    "BUCKET_WIDTHS_MS",
    "TARGET_BUCKETS",
    "broker_bytes",
    "choose_bucket_ms",
    "partition_summary",
    "per_bucket",
    "time_range",
    "topic_per_bucket",
    "unique_records",
]

_TP = ["topic", "partition"]
TARGET_BUCKETS = 150
BUCKET_WIDTHS_MS = tuple(
    s * 1000
    for s in (
        1, 2, 5, 10, 15, 30,
        60, 120, 300, 600, 900, 1800,
        3600, 7200, 10800, 21600, 43200, 86400,
    )
)  # fmt: skip


def choose_bucket_ms(duration_ms: int | None, target: int = TARGET_BUCKETS) -> int:
    """The smallest round width giving at most `target` buckets over `duration_ms`."""
    if not duration_ms or duration_ms <= 0:
        return BUCKET_WIDTHS_MS[0]
    for width in BUCKET_WIDTHS_MS:
        if duration_ms / width <= target:
            return width
    return BUCKET_WIDTHS_MS[-1] * -(-int(duration_ms / BUCKET_WIDTHS_MS[-1]) // target)


def unique_records(records: DataFrame) -> DataFrame:
    """One row per (topic, partition, offset): offset, timestamp, time, record_size."""
    return (
        records.select(*_TP, "offset", "timestamp", "record_size")
        .dropDuplicates([*_TP, "offset"])
        .withColumn("time", millis_to_time("timestamp"))
    )


def time_range(unique: DataFrame) -> tuple[int | None, int | None]:
    """The first and last record timestamps (ms) with a representable time."""
    row = unique.where(F.col("time").isNotNull()).agg(F.min("timestamp"), F.max("timestamp"))
    first, last = row.collect()[0]
    return first, last


def _bucket(column: str, bucket_ms: int):
    return (F.floor(F.col(column) / F.lit(bucket_ms)) * F.lit(bucket_ms)).cast("long")


def _rates(frame: DataFrame, bucket_ms: int) -> DataFrame:
    seconds = bucket_ms / 1000.0
    return (
        frame.withColumn("time", millis_to_time("bucket_ts"))
        .withColumn("records_per_s", F.col("records") / seconds)
        .withColumn("bytes_per_s", F.col("bytes") / seconds)
    )


def per_bucket(unique: DataFrame, bucket_ms: int) -> DataFrame:
    """topic, partition, bucket_ts, time, records, bytes, records_per_s, bytes_per_s (only
    the buckets in which the partition received records)."""
    counted = (
        unique.where(F.col("time").isNotNull())
        .groupBy(*_TP, _bucket("timestamp", bucket_ms).alias("bucket_ts"))
        .agg(F.count("*").alias("records"), F.sum("record_size").alias("bytes"))
    )
    return _rates(counted, bucket_ms)


def topic_per_bucket(
    spark: SparkSession,
    buckets: DataFrame,
    bucket_ms: int,
    start_ts: int | None,
    end_ts: int | None,
) -> DataFrame:
    """per_bucket summed over each topic's partitions, with a zero row for every bucket of
    [start_ts, end_ts] in which the topic produced nothing."""
    summed = buckets.groupBy("topic", "bucket_ts").agg(
        F.sum("records").alias("records"), F.sum("bytes").alias("bytes")
    )
    if start_ts is not None and end_ts is not None:
        first = start_ts // bucket_ms * bucket_ms
        grid = spark.range(first, end_ts + 1, bucket_ms).select(F.col("id").alias("bucket_ts"))
        summed = (
            buckets.select("topic")
            .distinct()
            .crossJoin(grid)
            .join(summed, ["topic", "bucket_ts"], "left")
            .fillna(0, subset=["records", "bytes"])
        )
    return _rates(summed, bucket_ms)


def partition_summary(unique: DataFrame, buckets: DataFrame, bucket_ms: int) -> DataFrame:
    """Per partition: records, bytes, first/last offset and time, active buckets, the rate
    over the active buckets and the peak bucket's rate (see the module docstring)."""
    seconds = bucket_ms / 1000.0
    activity = buckets.groupBy(*_TP).agg(
        F.count("*").alias("active_buckets"),
        F.max("records_per_s").alias("peak_records_per_s"),
        F.max("bytes_per_s").alias("peak_bytes_per_s"),
    )
    active_s = F.col("active_buckets") * F.lit(seconds)
    return (
        unique.groupBy(*_TP)
        .agg(
            F.count("*").alias("records"),
            F.sum("record_size").alias("bytes"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.min("timestamp").alias("first_timestamp"),
            F.max("timestamp").alias("last_timestamp"),
        )
        .withColumn("first_time", millis_to_time("first_timestamp"))
        .withColumn("last_time", millis_to_time("last_timestamp"))
        .join(activity, _TP, "left")
        .withColumn("bucket_s", F.lit(seconds))
        .withColumn("records_per_s", F.when(active_s > 0, F.col("records") / active_s))
        .withColumn("bytes_per_s", F.when(active_s > 0, F.col("bytes") / active_s))
    )


def broker_bytes(metrics: DataFrame, bucket_ms: int) -> DataFrame:
    """Per broker and bucket: bytes_in, bytes_out and their per-second rates, from the
    broker's cumulative counters (bucket_ts, time, broker, bytes_in, bytes_out,
    bytes_in_per_s, bytes_out_per_s)."""
    by_time = Window.partitionBy("broker").orderBy("ts")
    seconds = bucket_ms / 1000.0

    def delta(column: str):
        previous = F.lag(column).over(by_time)
        change = F.col(column) - previous
        # A counter that went down: the broker restarted and counts from zero again.
        return (
            F.when(previous.isNull(), F.lit(0.0)).when(change < 0, F.col(column)).otherwise(change)
        )

    deltas = (
        metrics.where(F.col("broker").isNotNull() & F.col("ts").isNotNull())
        .select("ts", "broker", "bytes_in_total", "bytes_out_total")
        .fillna(0.0, subset=["bytes_in_total", "bytes_out_total"])
        .withColumn("bytes_in", delta("bytes_in_total"))
        .withColumn("bytes_out", delta("bytes_out_total"))
    )
    return (
        deltas.groupBy("broker", _bucket("ts", bucket_ms).alias("bucket_ts"))
        .agg(F.sum("bytes_in").alias("bytes_in"), F.sum("bytes_out").alias("bytes_out"))
        .withColumn("time", millis_to_time("bucket_ts"))
        .withColumn("bytes_in_per_s", F.col("bytes_in") / seconds)
        .withColumn("bytes_out_per_s", F.col("bytes_out") / seconds)
    )
