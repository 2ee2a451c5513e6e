"""Readers for the brokers' `events.jsonl`, `metrics.jsonl` and `controller-events.jsonl`.

How it works: each reader finds its files recursively under the data dir
(`spark.layout.find_files`) and reads them with `spark.read.json` and a DECLARED schema
(`spark.schemas`): no inference, so a field that is missing, mistyped or unknown becomes
null instead of changing the table, and a torn last line (a process killed mid-write)
is one null row that the analytics drop (no `ts` or `event`). Each table gets
`source_file` (which file a row came from) and `time` (the `ts` milliseconds as a
timestamp). No files: an empty table with the same schema.

The controller's event names and fields are mapped to the analytics' vocabulary here and
nowhere else (`CONTROLLER_*` constants), so a change in `controller/event_log.py` is one
edit in this module.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark import schemas
from spark.columns import millis_to_time
from spark.layout import CONTROLLER_EVENTS_FILE, EVENTS_FILE, METRICS_FILE, find_files

__all__ = [
    "BROKER_BECAME_FOLLOWER",
    "BROKER_BECAME_LEADER",
    "BROKER_ISR_EXPAND",
    "BROKER_ISR_SHRINK",
    "BROKER_TRUNCATION",
    "CONTROLLER_ISR_CHANGE",
    "CONTROLLER_LEADER_CHANGE",
    "NO_LEADER",
    "controller_state_changes",
    "read_broker_events",
    "read_controller_events",
    "read_jsonl",
    "read_metrics",
]

# broker/core/replica_manager.py event kinds.
BROKER_BECAME_LEADER = "became_leader"
BROKER_BECAME_FOLLOWER = "became_follower"
BROKER_ISR_SHRINK = "isr_shrink"
BROKER_ISR_EXPAND = "isr_expand"
BROKER_TRUNCATION = "truncation"

# controller/event_log.py: every state change that moved the leader (also to -1 and the
# first leader of a new partition) is a leader change; an ISR-only change is an ISR change.
CONTROLLER_LEADER_CHANGE = "leader_change"
CONTROLLER_ISR_CHANGE = "isr_change"
NO_LEADER = -1


def controller_state_changes(events: DataFrame) -> DataFrame:
    """The controller's leader and ISR changes in the analytics' vocabulary.

    Columns: ts, time, controller, topic, partition, leader_changed, old_leader, leader
    (-1: offline), leader_epoch, old_isr, isr, reason, unclean.
    """
    kinds = [CONTROLLER_LEADER_CHANGE, CONTROLLER_ISR_CHANGE]
    return events.where(F.col("event").isin(kinds) & F.col("topic").isNotNull()).select(
        "ts",
        "time",
        "controller",
        "topic",
        "partition",
        (F.col("event") == CONTROLLER_LEADER_CHANGE).alias("leader_changed"),
        F.col("old_leader"),
        F.col("new_leader").alias("leader"),
        "leader_epoch",
        "old_isr",
        "isr",
        "reason",
        F.coalesce(F.col("unclean"), F.lit(False)).alias("unclean"),
    )


def read_jsonl(spark: SparkSession, paths: list[str], schema: StructType) -> DataFrame:
    """JSON-lines files read with `schema`, plus `source_file` and `time`; rows without
    `ts` (torn or foreign lines) are dropped."""
    if not paths:
        frame = spark.createDataFrame([], schema)
        frame = frame.withColumn("source_file", F.lit(None).cast("string"))
    else:
        frame = (
            spark.read.schema(schema)
            .option("mode", "PERMISSIVE")
            .json(paths)
            .withColumn("source_file", F.col("_metadata.file_path"))
        )
    return frame.where(F.col("ts").isNotNull()).withColumn("time", millis_to_time("ts"))


def read_broker_events(spark: SparkSession, data: str) -> DataFrame:
    """Every broker's `events.jsonl` under `data` (BROKER_EVENT_SCHEMA)."""
    return read_jsonl(spark, find_files(data, EVENTS_FILE), schemas.BROKER_EVENT_SCHEMA).where(
        F.col("event").isNotNull()
    )


def read_controller_events(spark: SparkSession, data: str) -> DataFrame:
    """Every controller's `controller-events.jsonl` under `data` (CONTROLLER_EVENT_SCHEMA)."""
    paths = find_files(data, CONTROLLER_EVENTS_FILE)
    return read_jsonl(spark, paths, schemas.CONTROLLER_EVENT_SCHEMA).where(
        F.col("event").isNotNull()
    )


def read_metrics(spark: SparkSession, data: str) -> DataFrame:
    """Every broker's `metrics.jsonl` snapshots under `data` (METRICS_SCHEMA)."""
    return read_jsonl(spark, find_files(data, METRICS_FILE), schemas.METRICS_SCHEMA)
