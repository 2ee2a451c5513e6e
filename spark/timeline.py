"""Partition state over time from broker and controller events: ISR, leaders, outages.

How it works:
- `isr_timeline` merges every observation of a partition's ISR: a broker becoming leader
  (`became_leader`: its ISR), a leader shrinking or expanding it (`isr_shrink`/
  `isr_expand`: the new ISR) and the controller's state changes (`leader_change`/
  `isr_change`: leader, possibly -1, and ISR). Rows are ordered by time, then leader epoch;
  an observation from an older leader epoch than one already seen (a deposed leader that
  has not heard the news yet) is dropped, as the cluster would ignore it. The partition's
  replication factor is the largest replica list any broker event reported (else the
  largest ISR seen).
- `isr_events`: the ISR shrinks and expands, from leaders and from the controller (a dead
  broker removed from ISRs), with the old and new ISR.
- `leader_changes`: the controller's leader elections (reason, unclean) plus each broker's
  `became_leader` (when the new leader took over; `old_leader` null there).
- `state_intervals`: the intervals during which a condition held on the timeline
  (under-replicated: ISR smaller than the replication factor; offline: leader -1), with
  start, end and duration; one still open at the end of the data has `ongoing` true and
  its duration measured to the last event time seen.

Everything is Spark (window functions over events: small data, but no driver collect).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.columns import millis_to_time
from spark.events import (
    BROKER_BECAME_LEADER,
    BROKER_ISR_EXPAND,
    BROKER_ISR_SHRINK,
    BROKER_TRUNCATION,
    NO_LEADER,
    controller_state_changes,
)

__all__ = [
    "isr_events",
    "isr_timeline",
    "leader_changes",
    "offline_intervals",
    "state_intervals",
    "truncations",
    "under_replicated_intervals",
]

_TP = ["topic", "partition"]
_OBSERVATION_COLUMNS = [
    "ts",
    "time",
    "topic",
    "partition",
    "source",
    "event",
    "leader",
    "leader_epoch",
    "isr",
    "replicas",
    "reason",
]


def _broker_source() -> Column:
    return F.concat(F.lit("broker-"), F.col("broker").cast("string"))


def _controller_source() -> Column:
    return F.concat(
        F.lit("controller-"), F.coalesce(F.col("controller").cast("string"), F.lit("?"))
    )


def _observations(broker_events: DataFrame, controller_events: DataFrame) -> DataFrame:
    from_brokers = broker_events.where(
        F.col("event").isin(BROKER_BECAME_LEADER, BROKER_ISR_SHRINK, BROKER_ISR_EXPAND)
        & F.col("topic").isNotNull()
    ).select(
        "ts",
        "time",
        "topic",
        "partition",
        _broker_source().alias("source"),
        "event",
        F.col("broker").alias("leader"),
        "leader_epoch",
        F.when(F.col("event") == BROKER_BECAME_LEADER, F.col("isr"))
        .otherwise(F.col("new_isr"))
        .alias("isr"),
        "replicas",
        F.lit(None).cast("string").alias("reason"),
    )
    from_controller = controller_state_changes(controller_events).select(
        "ts",
        "time",
        "topic",
        "partition",
        _controller_source().alias("source"),
        F.when(F.col("leader_changed"), F.lit("leader_change"))
        .otherwise(F.lit("isr_change"))
        .alias("event"),
        "leader",
        "leader_epoch",
        "isr",
        F.lit(None).cast("array<int>").alias("replicas"),
        "reason",
    )
    return from_brokers.unionByName(from_controller).select(*_OBSERVATION_COLUMNS)


def isr_timeline(broker_events: DataFrame, controller_events: DataFrame) -> DataFrame:
    """Per partition, each accepted ISR observation in order (see module doc).

    Columns: ts, time, topic, partition, source, event, leader, leader_epoch, isr,
    isr_size, replication_factor, under_replicated, offline, reason.
    """
    observations = _observations(broker_events, controller_events).where(F.col("isr").isNotNull())
    by_tp = Window.partitionBy(*_TP)
    ordered = (
        Window.partitionBy(*_TP)
        .orderBy("ts", "leader_epoch")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    rf = F.coalesce(F.max(F.size("replicas")).over(by_tp), F.max(F.size("isr")).over(by_tp))
    return (
        observations.withColumn("max_epoch_so_far", F.max("leader_epoch").over(ordered))
        .where(
            F.col("leader_epoch").isNull()
            | F.col("max_epoch_so_far").isNull()
            | (F.col("leader_epoch") >= F.col("max_epoch_so_far"))
        )
        .withColumn("isr_size", F.size("isr"))
        .withColumn("replication_factor", rf)
        .withColumn("offline", F.coalesce(F.col("leader") == NO_LEADER, F.lit(False)))
        .withColumn("under_replicated", F.col("isr_size") < F.col("replication_factor"))
        .select(
            "ts",
            "time",
            "topic",
            "partition",
            "source",
            "event",
            "leader",
            "leader_epoch",
            "isr",
            "isr_size",
            "replication_factor",
            "under_replicated",
            "offline",
            "reason",
        )
    )


def isr_events(broker_events: DataFrame, controller_events: DataFrame) -> DataFrame:
    """ISR shrinks and expands by leaders and by the controller.

    Columns: ts, time, topic, partition, source, event (isr_shrink | isr_expand),
    old_isr, new_isr, leader_epoch, reason.
    """
    from_brokers = broker_events.where(
        F.col("event").isin(BROKER_ISR_SHRINK, BROKER_ISR_EXPAND)
    ).select(
        "ts",
        "time",
        "topic",
        "partition",
        _broker_source().alias("source"),
        "event",
        "old_isr",
        "new_isr",
        "leader_epoch",
        F.lit("leader").alias("reason"),
    )
    changes = controller_state_changes(controller_events).where(
        F.col("old_isr").isNotNull()
        & F.col("isr").isNotNull()
        & (F.array_sort("old_isr") != F.array_sort("isr"))
    )
    from_controller = changes.select(
        "ts",
        "time",
        "topic",
        "partition",
        _controller_source().alias("source"),
        F.when(F.size("isr") < F.size("old_isr"), F.lit(BROKER_ISR_SHRINK))
        .otherwise(F.lit(BROKER_ISR_EXPAND))
        .alias("event"),
        "old_isr",
        F.col("isr").alias("new_isr"),
        "leader_epoch",
        "reason",
    )
    return from_brokers.unionByName(from_controller)


def leader_changes(broker_events: DataFrame, controller_events: DataFrame) -> DataFrame:
    """Leader elections (controller) and takeovers (brokers' became_leader).

    Columns: ts, time, topic, partition, source, old_leader, new_leader, leader_epoch,
    isr, reason, unclean.
    """
    elected = (
        controller_state_changes(controller_events)
        .where(F.col("leader_changed"))
        .select(
            "ts",
            "time",
            "topic",
            "partition",
            _controller_source().alias("source"),
            "old_leader",
            F.col("leader").alias("new_leader"),
            "leader_epoch",
            "isr",
            "reason",
            "unclean",
        )
    )
    took_over = broker_events.where(
        (F.col("event") == BROKER_BECAME_LEADER) & ~F.coalesce(F.col("was_leader"), F.lit(False))
    ).select(
        "ts",
        "time",
        "topic",
        "partition",
        _broker_source().alias("source"),
        F.lit(None).cast("int").alias("old_leader"),
        F.col("broker").alias("new_leader"),
        "leader_epoch",
        "isr",
        F.lit("became_leader").alias("reason"),
        F.lit(None).cast("boolean").alias("unclean"),
    )
    return elected.unionByName(took_over)


def truncations(broker_events: DataFrame) -> DataFrame:
    """Follower log truncations (KIP-101 and log-start resets): ts, time, broker, topic,
    partition, from_offset, to_offset, records_removed (null when not known), reason."""
    return broker_events.where(F.col("event") == BROKER_TRUNCATION).select(
        "ts",
        "time",
        "broker",
        "topic",
        "partition",
        "from_offset",
        "to_offset",
        (F.col("from_offset") - F.col("to_offset")).alias("records_removed"),
        "reason",
    )


def state_intervals(timeline: DataFrame, flag: str, data_end_ts: int | None) -> DataFrame:
    """Intervals during which boolean column `flag` of `timeline` was true, per partition.

    Columns: topic, partition, start_ts, end_ts, start_time, end_time, duration_ms,
    ongoing, min_isr_size. `data_end_ts` (the last time anything was observed) closes
    an interval still open at the end of the data; None leaves its duration null.
    """
    ordered = Window.partitionBy(*_TP).orderBy("ts", "leader_epoch", "source")
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    changes = (
        timeline.withColumn("state", F.coalesce(F.col(flag), F.lit(False)))
        .withColumn("previous", F.lag("state").over(ordered))
        .withColumn("changed", F.col("state") != F.coalesce("previous", F.lit(False)))
        .withColumn("run", F.sum(F.col("changed").cast("int")).over(running))
    )
    runs = (
        changes.where(F.col("state"))
        .groupBy(*_TP, "run")
        .agg(
            F.min("ts").alias("start_ts"),
            F.max("ts").alias("last_ts"),
            F.min("isr_size").alias("min_isr_size"),
        )
    )
    # A run ends at the first observation after it, i.e. the next run's start.
    following = Window.partitionBy(*_TP).orderBy("run")
    ends = changes.groupBy(*_TP, "run").agg(F.min("ts").alias("run_start"))
    ends = ends.withColumn("end_ts", F.lead("run_start").over(following)).drop("run_start")
    end_fallback = F.lit(data_end_ts).cast("long") if data_end_ts is not None else F.lit(None)
    return (
        runs.join(ends, [*_TP, "run"])
        .withColumn("ongoing", F.col("end_ts").isNull())
        .withColumn(
            "end_ts",
            F.coalesce(F.col("end_ts"), F.greatest(end_fallback, F.col("last_ts"))),
        )
        .select(
            *_TP,
            "start_ts",
            "end_ts",
            millis_to_time("start_ts").alias("start_time"),
            millis_to_time("end_ts").alias("end_time"),
            (F.col("end_ts") - F.col("start_ts")).alias("duration_ms"),
            "ongoing",
            "min_isr_size",
        )
        .orderBy(*_TP, "start_ts")
    )


def under_replicated_intervals(timeline: DataFrame, data_end_ts: int | None) -> DataFrame:
    return state_intervals(timeline, "under_replicated", data_end_ts)


def offline_intervals(timeline: DataFrame, data_end_ts: int | None) -> DataFrame:
    return state_intervals(timeline, "offline", data_end_ts)
