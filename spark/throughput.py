"""Records and bytes per partition per minute, and per-partition totals, counted once.

How it works: the segment logs hold every record once per replica. `unique_records`
keeps one row per (topic, partition, offset) (whichever replica Spark meets first: their
bytes are the same batch shared the same way). Minutes are UTC buckets of the record
timestamp (CreateTime as the producer set it, or LogAppendTime when the topic says so),
so the rate is "produced per minute", not "arrived on this replica per minute".
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark.columns import millis_to_time

__all__ = ["partition_summary", "per_minute", "topic_per_minute", "unique_records"]

_TP = ["topic", "partition"]


def unique_records(records: DataFrame) -> DataFrame:
    """One row per (topic, partition, offset): offset, timestamp, time, record_size."""
    return (
        records.select(*_TP, "offset", "timestamp", "record_size")
        .dropDuplicates([*_TP, "offset"])
        .withColumn("time", millis_to_time("timestamp"))
    )


def per_minute(unique: DataFrame) -> DataFrame:
    """topic, partition, minute, records, bytes, records_per_s, bytes_per_s."""
    return (
        unique.where(F.col("time").isNotNull())
        .groupBy(*_TP, F.date_trunc("minute", "time").alias("minute"))
        .agg(F.count("*").alias("records"), F.sum("record_size").alias("bytes"))
        .withColumn("records_per_s", F.col("records") / 60.0)
        .withColumn("bytes_per_s", F.col("bytes") / 60.0)
    )


def topic_per_minute(minutes: DataFrame) -> DataFrame:
    """per_minute summed over each topic's partitions: topic, minute, records, bytes, rates."""
    return (
        minutes.groupBy("topic", "minute")
        .agg(F.sum("records").alias("records"), F.sum("bytes").alias("bytes"))
        .withColumn("records_per_s", F.col("records") / 60.0)
        .withColumn("bytes_per_s", F.col("bytes") / 60.0)
    )


def partition_summary(unique: DataFrame) -> DataFrame:
    """Per partition: records, bytes, first/last offset and time, average produce rate
    over the span between its first and last record timestamps."""
    span_s = (F.col("last_timestamp") - F.col("first_timestamp")) / 1000.0
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
        .withColumn(
            "records_per_s", F.when(span_s > 0, F.col("records") / span_s).otherwise(F.lit(None))
        )
        .withColumn(
            "bytes_per_s", F.when(span_s > 0, F.col("bytes") / span_s).otherwise(F.lit(None))
        )
    )
