"""The replica consistency audit: the offline proof that replication worked.

How it works, per partition (every log dir holding a `<topic>-<partition>` directory is
one replica of it):

- **HW**: the highest high watermark any replica's `replication-offset-checkpoint`
  records for the partition. Every offset below it was acknowledged (committed to the
  whole ISR) when that checkpoint was written; the leader's checkpoint is the most
  advanced, and a follower's is never above the leader's. It is a lower bound of the last
  HW (checkpoints are periodic), so the audit never calls an unacknowledged record
  missing. Without any checkpoint the partition is reported `no_hw` and not compared.
- **Replica range**: log start offset = max(checkpointed log start, first segment's base
  offset); LEO = max(last batch's last offset + 1, the last segment's base offset).
- **Divergence**: for every offset below HW held by two or more replicas, a 64-bit hash
  (`xxhash64`) of each copy's (timestamp, key, value, headers, and which of key/value is
  null) is compared; offsets whose copies differ are listed with every copy's hash,
  leader epoch, timestamp and its replica's own checkpointed HW (a copy at or above its
  replica's own HW is one that replica never took as committed: a replica that was down
  and will truncate it when it rejoins, as KIP-101 does; below it, a real divergence).
- **Missing ranges**: batches give each replica's covered offset ranges. The offsets below
  HW that some replica holds (the union of all replicas' batch ranges) and that lie at or
  above a replica's log start offset must be on that replica; those that are not are
  reported as ranges, `lagging` when they lie at or above the replica's LEO (a follower
  behind: out of the ISR, or not caught up yet) and `hole` when the replica has later
  offsets (lost data). Offsets below HW that no replica holds are `absent_everywhere`
  ranges (data lost on every replica, or removed by compaction).
- **Offsets on all replicas**: offsets below HW that every replica holds.
- **Transactions**: the logs are audited as they are, not as a read_committed consumer
  sees them. A COMMIT/ABORT marker is a control batch of one record (key: the control
  key's version and type; value: the marker's version and coordinator epoch) that the
  partition leader writes when the coordinator asks and followers copy byte for byte;
  it and the records of aborted transactions take offsets like any record, so each is
  hashed and compared, counted in the offsets below HW, on all replicas and in a
  replica's `records`, and one missing from a replica is a `hole` or `lagging` range
  like a missing record. The `.txnindex` files (derived from the markers) are not read.

All record-level work is Spark aggregation (no driver collect): per-offset hash
comparison with `groupBy`, missing ranges per partition with `applyInPandas` over batch
ranges (one row per batch, not per record). The driver only builds the small replica
inventory (`replica_inventory`) from the files it lists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark.layout import CheckpointRow, LogDir

__all__ = [
    "INVENTORY_SCHEMA",
    "MISSING_SCHEMA",
    "AuditResult",
    "audit",
    "missing_ranges",
    "record_hash",
    "replica_inventory",
    "with_record_hash",
]

_TP = ["topic", "partition"]
_REPLICA = ["log_dir", "topic", "partition"]

INVENTORY_SCHEMA = StructType(
    [
        StructField("log_dir", StringType(), False),
        StructField("broker", IntegerType(), True),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("segments", IntegerType(), False),
        StructField("size_bytes", LongType(), False),
        StructField("first_segment_base", LongType(), True),
        StructField("last_segment_base", LongType(), True),
        StructField("hw_checkpoint", LongType(), True),
        StructField("log_start_checkpoint", LongType(), True),
        StructField("recovery_point", LongType(), True),
    ]
)

MISSING_SCHEMA = (
    "topic string, partition int, log_dir string, broker int, start_offset long, "
    "end_offset long, offsets long, kind string"
)
_MISSING_COLUMNS = [c.split()[0] for c in MISSING_SCHEMA.split(", ")]

LAGGING = "lagging"
HOLE = "hole"
ABSENT_EVERYWHERE = "absent_everywhere"


@dataclass
class AuditResult:
    partitions: DataFrame  # one row per partition: counts and a status
    replicas: DataFrame  # one row per replica: range, LEO, lag, missing offsets
    divergence: DataFrame  # one row per divergent offset, with every copy
    missing: DataFrame  # one row per missing range of a replica
    cached: list[DataFrame] = field(default_factory=list)

    def unpersist(self) -> None:
        """Drop the intermediate results the audit cached."""
        for frame in self.cached:
            frame.unpersist()


def record_hash() -> F.Column:
    """The hash compared across replicas: content and timestamp, not offset or epoch."""
    return F.xxhash64(
        "timestamp",
        "key",
        "value",
        "headers",
        F.col("key").isNull(),
        F.col("value").isNull(),
    )


def with_record_hash(records: DataFrame) -> DataFrame:
    """The columns the audit needs from data source rows, with `record_hash`."""
    return records.select(
        "log_dir",
        "broker",
        "topic",
        "partition",
        "offset",
        "batch_base_offset",
        "batch_last_offset",
        "timestamp",
        "leader_epoch",
        "record_size",
        record_hash().alias("record_hash"),
    )


def replica_inventory(
    spark: SparkSession, log_dirs: Iterable[LogDir], checkpoints: Iterable[CheckpointRow]
) -> DataFrame:
    """Every replica (log dir x partition dir) found on disk, with its checkpoints."""
    marks = {(c.log_dir, c.topic, c.partition): c for c in checkpoints}
    rows = []
    for log_dir in log_dirs:
        for partition in log_dir.partitions:
            mark = marks.get((log_dir.path, partition.topic, partition.partition))
            segments = partition.segments
            rows.append(
                (
                    log_dir.path,
                    log_dir.broker,
                    partition.topic,
                    partition.partition,
                    len(segments),
                    sum(s.size for s in segments),
                    segments[0].base_offset if segments else None,
                    segments[-1].base_offset if segments else None,
                    mark.high_watermark if mark else None,
                    mark.log_start_offset if mark else None,
                    mark.recovery_point if mark else None,
                )
            )
    return spark.createDataFrame(rows, INVENTORY_SCHEMA)


# ----------------------------------------------------------------------- missing ranges


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open ranges merged into sorted, disjoint ones."""
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _clip(ranges: list[tuple[int, int]], low: int, high: int) -> list[tuple[int, int]]:
    return [(max(a, low), min(b, high)) for a, b in ranges if min(b, high) > max(a, low)]


def _subtract(ranges: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges` minus `holes` (both merged and sorted)."""
    out = []
    j = 0
    for start, end in ranges:
        cursor = start
        while j < len(holes) and holes[j][1] <= cursor:
            j += 1
        k = j
        while k < len(holes) and holes[k][0] < end:
            if holes[k][0] > cursor:
                out.append((cursor, holes[k][0]))
            cursor = max(cursor, holes[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def _int_or_none(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def missing_ranges(rows: pd.DataFrame) -> pd.DataFrame:
    """One partition's missing ranges (MISSING_SCHEMA columns).

    `rows`: per replica one row with `base_offset` null (columns topic, partition, log_dir,
    broker, log_start, leo, hw) and per batch one row with `base_offset`/`last_offset`.
    """
    if rows.empty:
        return pd.DataFrame(columns=_MISSING_COLUMNS)
    topic, partition = rows["topic"].iloc[0], int(rows["partition"].iloc[0])
    replica_rows = rows[rows["base_offset"].isna()]
    hws = [h for h in (_int_or_none(v) for v in replica_rows["hw"]) if h is not None]
    if not hws:
        return pd.DataFrame(columns=_MISSING_COLUMNS)
    hw = max(hws)
    batch_rows = rows[rows["base_offset"].notna()]
    covered: dict[str, list[tuple[int, int]]] = {}
    for log_dir, group in batch_rows.groupby("log_dir"):
        pairs = zip(
            group["base_offset"].astype("int64"), group["last_offset"].astype("int64"), strict=True
        )
        covered[log_dir] = _merge((int(a), int(b) + 1) for a, b in pairs)
    union = _merge(r for ranges in covered.values() for r in ranges)
    out = []
    starts = []
    for replica in replica_rows.itertuples(index=False):
        log_start = _int_or_none(replica.log_start) or 0
        leo = _int_or_none(replica.leo) or 0
        starts.append(log_start)
        expected = _clip(union, log_start, hw)
        for a, b in _subtract(expected, covered.get(replica.log_dir, [])):
            kind = LAGGING if a >= leo else HOLE
            out.append(
                (topic, partition, replica.log_dir, _int_or_none(replica.broker), a, b, b - a, kind)
            )
    if starts:
        everywhere = _subtract([(min(starts), hw)], _clip(union, min(starts), hw))
        for a, b in everywhere:
            out.append((topic, partition, None, None, a, b, b - a, ABSENT_EVERYWHERE))
    return pd.DataFrame(out, columns=_MISSING_COLUMNS)


# ----------------------------------------------------------------------- the audit


def _replica_ranges(hashed: DataFrame, inventory: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(batches per replica, replicas with log start, LEO and the partition's HW)."""
    batches = hashed.groupBy(*_REPLICA, "batch_base_offset").agg(
        F.max("batch_last_offset").alias("batch_last_offset"),
        F.count("*").alias("records"),
    )
    spans = batches.groupBy(*_REPLICA).agg(
        (F.max("batch_last_offset") + 1).alias("records_leo"),
        F.sum("records").alias("records"),
    )
    replicas = (
        inventory.join(spans, _REPLICA, "left")
        .withColumn(
            "log_start_offset",
            F.greatest(
                F.coalesce("log_start_checkpoint", F.lit(0)),
                F.coalesce("first_segment_base", F.lit(0)),
            ),
        )
        .withColumn(
            "log_end_offset",
            F.greatest(
                F.coalesce("records_leo", F.lit(0)), F.coalesce("last_segment_base", F.lit(0))
            ),
        )
        .withColumn("records", F.coalesce("records", F.lit(0)))
    )
    per_partition = replicas.groupBy(*_TP).agg(
        F.max("hw_checkpoint").alias("hw"),
        F.max("log_end_offset").alias("max_leo"),
        F.count("*").alias("replica_count"),
    )
    replicas = replicas.join(per_partition, _TP)
    return batches, replicas


def audit(hashed: DataFrame, inventory: DataFrame) -> AuditResult:
    """Audit every partition of `hashed` (`with_record_hash` rows) against `inventory`."""
    batches, replicas = _replica_ranges(hashed, inventory)
    replicas = replicas.persist(StorageLevel.MEMORY_AND_DISK)

    bounds = F.broadcast(
        replicas.select(*_REPLICA, "log_start_offset", "hw", "replica_count", "hw_checkpoint")
    )
    acknowledged = hashed.join(bounds, _REPLICA).where(
        (F.col("offset") < F.col("hw")) & (F.col("offset") >= F.col("log_start_offset"))
    )
    per_offset = (
        acknowledged.groupBy(*_TP, "offset")
        .agg(
            F.count("*").alias("copies"),
            F.min("record_hash").alias("min_hash"),
            F.max("record_hash").alias("max_hash"),
            F.first("replica_count").alias("replica_count"),
        )
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    divergent_offsets = per_offset.where(F.col("min_hash") != F.col("max_hash")).select(
        *_TP, "offset"
    )
    divergence = (
        acknowledged.join(divergent_offsets, [*_TP, "offset"])
        .groupBy(*_TP, "offset")
        .agg(
            F.count("*").alias("copies"),
            F.countDistinct("record_hash").alias("distinct_values"),
            F.sort_array(
                F.collect_list(
                    F.struct(
                        F.col("broker"),
                        F.col("log_dir"),
                        F.col("record_hash"),
                        F.col("leader_epoch"),
                        F.col("timestamp"),
                        F.col("batch_base_offset"),
                        # Below its own HW the replica believed the record committed;
                        # above it, a replica that was away would still truncate it.
                        F.col("hw_checkpoint").alias("replica_hw"),
                    )
                )
            ).alias("replicas"),
        )
    )

    replica_info = replicas.select(
        *_TP,
        "log_dir",
        "broker",
        F.col("log_start_offset").alias("log_start"),
        F.col("log_end_offset").alias("leo"),
        "hw",
        F.lit(None).cast("long").alias("base_offset"),
        F.lit(None).cast("long").alias("last_offset"),
    )
    batch_info = batches.select(
        *_TP,
        "log_dir",
        F.lit(None).cast("int").alias("broker"),
        F.lit(None).cast("long").alias("log_start"),
        F.lit(None).cast("long").alias("leo"),
        F.lit(None).cast("long").alias("hw"),
        F.col("batch_base_offset").alias("base_offset"),
        F.col("batch_last_offset").alias("last_offset"),
    )
    missing = (
        replica_info.unionByName(batch_info)
        .groupBy(*_TP)
        .applyInPandas(missing_ranges, MISSING_SCHEMA)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )

    missing_per_replica = (
        missing.where(F.col("log_dir").isNotNull())
        .groupBy(*_REPLICA)
        .agg(
            F.sum("offsets").alias("missing_offsets"),
            F.sum(F.when(F.col("kind") == HOLE, F.col("offsets"))).alias("hole_offsets"),
        )
    )
    replicas_out = replicas.join(missing_per_replica, _REPLICA, "left").select(
        *_TP,
        "broker",
        "log_dir",
        "log_start_offset",
        "log_end_offset",
        "hw_checkpoint",
        F.col("hw").alias("partition_hw"),
        (F.col("max_leo") - F.col("log_end_offset")).alias("lag_to_max_leo"),
        (F.col("hw") - F.col("log_end_offset")).alias("lag_to_hw"),
        "records",
        "segments",
        "size_bytes",
        "recovery_point",
        F.coalesce("missing_offsets", F.lit(0)).alias("missing_offsets"),
        F.coalesce("hole_offsets", F.lit(0)).alias("hole_offsets"),
    )

    offset_counts = per_offset.groupBy(*_TP).agg(
        F.count("*").alias("offsets_below_hw"),
        F.sum(F.when(F.col("copies") >= F.col("replica_count"), 1).otherwise(0)).alias(
            "offsets_on_all_replicas"
        ),
        F.sum(F.when(F.col("min_hash") != F.col("max_hash"), 1).otherwise(0)).alias(
            "divergent_offsets"
        ),
        F.min(F.when(F.col("min_hash") != F.col("max_hash"), F.col("offset"))).alias(
            "first_divergent_offset"
        ),
    )
    missing_counts = missing.groupBy(*_TP).agg(
        *[
            F.coalesce(F.sum(F.when(F.col("kind") == kind, F.col("offsets"))), F.lit(0)).alias(
                f"{kind}_offsets"
            )
            for kind in (HOLE, LAGGING, ABSENT_EVERYWHERE)
        ]
    )
    replica_summary = replicas.groupBy(*_TP).agg(
        F.first("hw").alias("hw"),
        F.first("replica_count").alias("replicas"),
        F.sort_array(F.collect_list(F.coalesce(F.col("broker").cast("string"), "log_dir"))).alias(
            "replica_names"
        ),
        F.min("log_end_offset").alias("min_leo"),
        F.max("log_end_offset").alias("max_leo"),
    )
    counts = [
        "offsets_below_hw",
        "offsets_on_all_replicas",
        "divergent_offsets",
        "hole_offsets",
        "lagging_offsets",
        "absent_everywhere_offsets",
    ]
    partitions = (
        replica_summary.join(offset_counts, _TP, "left")
        .join(missing_counts, _TP, "left")
        .fillna(0, subset=counts)
        .withColumn(
            "status",
            F.when(F.col("hw").isNull(), F.lit("no_hw"))
            .when(F.col("divergent_offsets") > 0, F.lit("divergent"))
            .when(
                (F.col("hole_offsets") > 0) | (F.col("absent_everywhere_offsets") > 0),
                F.lit("missing"),
            )
            .when(F.col("lagging_offsets") > 0, F.lit("lagging"))
            .otherwise(F.lit("ok")),
        )
        .select(
            *_TP,
            "status",
            "hw",
            "replicas",
            "replica_names",
            "min_leo",
            "max_leo",
            *counts,
            "first_divergent_offset",
        )
    )
    return AuditResult(
        partitions, replicas_out, divergence, missing, [replicas, per_offset, missing]
    )
