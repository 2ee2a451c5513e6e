"""Consumer groups from `__consumer_offsets`: committed offsets and lag over time.

How it works: the group coordinators write every offset commit to the compacted topic
`__consumer_offsets` (format: `broker/core/group/offsets_topic.py`: msgpack key
`[1, group, topic, partition]`, value `[offset, leader epoch, metadata, commit time]`; a
null value is a tombstone). `offset_commits` takes that topic's records (each offset once:
the replicas hold the same records) and decodes them with the broker's own
`decode_record` in `mapInPandas` (group-metadata records, tombstones and undecodable keys
are dropped: the last are counted in the log). Compaction may have removed older commits:
what is left is what the analytics see.

Lag is measured at each commit: `lag_at_commits` puts the commits and the committed
partitions' records on one time line per partition (records before commits at the same
millisecond) and takes, for each commit, the log end offset so far (1 + the highest
offset with a timestamp at or before the commit); lag = log end - committed offset, never
below zero. Record timestamps are the producers' (CreateTime): a producer with a skewed
clock skews the lag.

`lag_per_bucket` gives the lag over time: per (group, topic, partition) and time bucket,
from its first commit to the end of the data, the last committed offset so far against
the partition's log end so far (so lag grows while producers write and the group does
not commit); `group_summary` each one's last commit against the partition's final log
end offset (the lag the data ends with).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark.columns import millis_to_time

__all__ = [
    "COMMIT_SCHEMA",
    "OFFSETS_TOPIC",
    "decode_commits",
    "group_summary",
    "lag_at_commits",
    "lag_per_bucket",
    "offset_commits",
]

logger = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
COMMIT_SCHEMA = (
    "group string, topic string, partition int, committed_offset long, commit_ts long, "
    "offsets_partition int, offsets_offset long"
)
_COMMIT_COLUMNS = [c.split()[0] for c in COMMIT_SCHEMA.split(", ")]


def decode_commits(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """`mapInPandas` body: `__consumer_offsets` rows (partition, offset, timestamp, key,
    value) to offset commits (COMMIT_SCHEMA); anything else is dropped."""
    from broker.core.group.offsets_topic import BadOffsetsRecord, OffsetRecord, decode_record

    for frame in frames:
        rows, bad = [], 0
        for partition, offset, timestamp, key, value in zip(
            frame["partition"],
            frame["offset"],
            frame["timestamp"],
            frame["key"],
            frame["value"],
            strict=True,
        ):
            try:
                record = decode_record(key, value)
            except (BadOffsetsRecord, ValueError, TypeError):
                bad += 1
                continue
            if not isinstance(record, OffsetRecord) or record.value is None:
                continue
            commit_ts = record.value.commit_timestamp_ms
            if not isinstance(commit_ts, int) or commit_ts < 0:
                commit_ts = int(timestamp)
            rows.append(
                (
                    record.group_id,
                    record.topic,
                    record.partition,
                    record.value.offset,
                    commit_ts,
                    int(partition),
                    int(offset),
                )
            )
        if bad:
            logger.warning("%d __consumer_offsets record(s) could not be decoded; skipped", bad)
        yield pd.DataFrame(rows, columns=_COMMIT_COLUMNS)


def offset_commits(records: DataFrame) -> DataFrame:
    """Every offset commit still in `__consumer_offsets` (COMMIT_SCHEMA, plus `time`)."""
    offsets = (
        records.where(F.col("topic") == OFFSETS_TOPIC)
        .select("partition", "offset", "timestamp", "key", "value")
        .dropDuplicates(["partition", "offset"])
    )
    return offsets.mapInPandas(decode_commits, COMMIT_SCHEMA).withColumn(
        "time", millis_to_time("commit_ts")
    )


def lag_at_commits(commits: DataFrame, unique: DataFrame) -> DataFrame:
    """Each commit with the partition's log end offset at that moment and the lag:
    group, topic, partition, commit_ts, time, committed_offset, log_end_offset, lag."""
    tps = commits.select("topic", "partition").distinct()
    produced = (
        unique.join(tps, ["topic", "partition"], "left_semi")
        .where(F.col("timestamp").isNotNull())
        .select(
            "topic",
            "partition",
            F.col("timestamp").alias("ts"),
            F.lit(0).alias("kind"),
            (F.col("offset") + 1).alias("end"),
            F.lit(None).cast("string").alias("group"),
            F.lit(None).cast("long").alias("committed_offset"),
        )
    )
    committed = commits.select(
        "topic",
        "partition",
        F.col("commit_ts").alias("ts"),
        F.lit(1).alias("kind"),
        F.lit(None).cast("long").alias("end"),
        "group",
        "committed_offset",
    )
    so_far = (
        Window.partitionBy("topic", "partition")
        .orderBy("ts", "kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        produced.unionByName(committed)
        .withColumn("log_end_offset", F.coalesce(F.max("end").over(so_far), F.lit(0)))
        .where(F.col("kind") == 1)
        .select(
            "group",
            "topic",
            "partition",
            F.col("ts").alias("commit_ts"),
            millis_to_time("ts").alias("time"),
            "committed_offset",
            "log_end_offset",
            F.greatest(F.col("log_end_offset") - F.col("committed_offset"), F.lit(0)).alias("lag"),
        )
    )


def lag_per_bucket(
    lags: DataFrame,
    unique: DataFrame,
    bucket_ms: int,
    end_ts: int | None,
) -> DataFrame:
    """Per group, topic, partition and time bucket, from the group's first commit of the
    partition to `end_ts`: the committed offset so far, the partition's log end offset so
    far and the lag between them (group, topic, partition, bucket_ts, time,
    committed_offset, log_end_offset, lag). Unlike the lag at commits, this grows while
    producers write and the group does not commit."""

    def bucket(column: str):
        return (F.floor(F.col(column) / F.lit(bucket_ms)) * F.lit(bucket_ms)).cast("long")

    commits = lags.groupBy(
        "group", "topic", "partition", bucket("commit_ts").alias("bucket_ts")
    ).agg(F.max_by("committed_offset", "commit_ts").alias("committed"))
    tps = commits.select("topic", "partition").distinct()
    ends = (
        unique.join(tps, ["topic", "partition"], "left_semi")
        .where(F.col("timestamp").isNotNull())
        .groupBy("topic", "partition", bucket("timestamp").alias("bucket_ts"))
        .agg((F.max("offset") + 1).alias("end"))
    )
    last_bucket = F.lit((end_ts or 0) // bucket_ms * bucket_ms)
    spans = commits.groupBy("group", "topic", "partition").agg(
        F.min("bucket_ts").alias("first"),
        F.greatest(F.max("bucket_ts"), last_bucket).alias("last"),
    )
    grid = spans.select(
        "group",
        "topic",
        "partition",
        F.explode(F.sequence("first", "last", F.lit(bucket_ms).cast("long"))).alias("bucket_ts"),
    )
    so_far = (
        Window.partitionBy("group", "topic", "partition")
        .orderBy("bucket_ts")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    # The log end before the group's first commit counts too: take the running maximum
    # over every bucket of the partition, then keep the grid's buckets.
    log_end = ends.groupBy("topic", "partition").agg(
        F.collect_list(F.struct("bucket_ts", "end")).alias("points")
    )
    joined = (
        grid.join(commits, ["group", "topic", "partition", "bucket_ts"], "left")
        .join(log_end, ["topic", "partition"], "left")
        .withColumn(
            "log_end_offset",
            F.coalesce(
                F.aggregate(
                    F.filter("points", lambda p: p["bucket_ts"] <= F.col("bucket_ts")),
                    F.lit(0).cast("long"),
                    lambda acc, p: F.greatest(acc, p["end"]),
                ),
                F.lit(0).cast("long"),
            ),
        )
        .withColumn("committed_offset", F.last("committed", ignorenulls=True).over(so_far))
    )
    return joined.select(
        "group",
        "topic",
        "partition",
        "bucket_ts",
        millis_to_time("bucket_ts").alias("time"),
        "committed_offset",
        "log_end_offset",
        F.greatest(F.col("log_end_offset") - F.col("committed_offset"), F.lit(0)).alias("lag"),
    )


def group_summary(lags: DataFrame, unique: DataFrame) -> DataFrame:
    """Per group, topic and partition: commits seen, the last commit (time and offset),
    the partition's final log end offset and the lag the data ends with."""
    ends = unique.groupBy("topic", "partition").agg((F.max("offset") + 1).alias("log_end"))
    last = F.max_by(F.struct("committed_offset", "commit_ts"), F.col("commit_ts"))
    return (
        lags.groupBy("group", "topic", "partition")
        .agg(F.count("*").alias("commits"), last.alias("last"))
        .join(ends, ["topic", "partition"], "left")
        .select(
            "group",
            "topic",
            "partition",
            "commits",
            millis_to_time("last.commit_ts").alias("last_commit_time"),
            F.col("last.committed_offset").alias("committed_offset"),
            F.coalesce(F.col("log_end"), F.lit(0)).alias("log_end_offset"),
            F.greatest(
                F.coalesce(F.col("log_end"), F.lit(0)) - F.col("last.committed_offset"), F.lit(0)
            ).alias("lag"),
        )
    )
