"""Request latency percentiles over time, from the histogram in the metrics snapshots.

How it works: each `metrics.jsonl` snapshot carries, per request type, the latency
histogram's per-bucket counts *cumulative since the broker started* (plus count and sum;
observations above the last bound are `count - sum(buckets)`). The latency of one interval
is therefore the difference between two consecutive snapshots of the same broker.
`broker_intervals` (plain pandas, run per broker by `applyInPandas`) takes those
differences; a count that goes down means the broker restarted, and the new snapshot then
counts from zero. Quantiles are the upper bound of the bucket where the cumulative count
reaches q * total (the broker's own p50/p99 use the same rule); beyond the last bucket
they are +inf, which the report shows as "> top bucket" (`top_bucket_ms`), never as a
number. `cluster_latency` sums the bucket differences of all brokers per request type
and time bucket (`bucket_ms`) and takes quantiles of the sums: a cluster-wide view.

Fetch long polls: a consumer's Fetch waits up to `fetch.max.wait.ms` in the purgatory
when there is nothing new, so its latency is mostly waiting. Brokers record that wait in
a second histogram (`fetch_wait_seconds`, per fetcher); it becomes the series
`Fetch wait (consumer|follower)` here, and `fetch_processing` derives the mean time a
Fetch spent on anything but waiting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark.columns import millis_to_time

__all__ = [
    "CLUSTER_SCHEMA",
    "INTERVAL_SCHEMA",
    "broker_intervals",
    "cluster_intervals",
    "cluster_latency",
    "fetch_processing",
    "histogram_quantile",
    "latency_intervals",
    "latency_summary",
]

INTERVAL_SCHEMA = (
    "ts long, broker int, request string, interval_ms long, requests long, sum_s double, "
    "mean_ms double, p50_ms double, p99_ms double, le array<double>, "
    "bucket_deltas array<long>"
)
CLUSTER_SCHEMA = (
    "bucket_ts long, request string, brokers int, requests long, mean_ms double, "
    "p50_ms double, p99_ms double, top_bucket_ms double"
)
# Series names of the Fetch purgatory wait (`fetch_wait_seconds`), beside the request types.
FETCH = "Fetch"
FETCH_WAIT_PREFIX = "Fetch wait"
FETCH_PROCESSING = "Fetch processing"
_INTERVAL_COLUMNS = [c.split()[0] for c in INTERVAL_SCHEMA.split(", ")]
_CLUSTER_COLUMNS = [c.split()[0] for c in CLUSTER_SCHEMA.split(", ")]


def histogram_quantile(
    q: float, upper_bounds: Sequence[float], counts: Sequence[int], total: int
) -> float | None:
    """The upper bound of the bucket where the running count reaches `q * total`; +inf
    when it lies above the last bound; None for an empty histogram."""
    if total <= 0:
        return None
    target = q * total
    running = 0
    for bound, count in zip(upper_bounds, counts, strict=False):
        running += count
        if running >= target:
            return float(bound)
    return math.inf


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, float) and math.isnan(value):
        return []
    return list(value)


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def broker_intervals(snapshots: pd.DataFrame) -> pd.DataFrame:
    """Per-interval latency of one broker's histogram series.

    `snapshots`: columns ts, broker, request, count, sum, le, buckets (one row per snapshot
    and request type). Returns INTERVAL_SCHEMA columns, one row per snapshot and request
    type that saw requests in the interval before it.
    """
    if snapshots.empty:
        return pd.DataFrame(columns=_INTERVAL_COLUMNS)
    snapshots = snapshots.sort_values("ts", kind="stable")
    times = sorted(set(snapshots["ts"].dropna().astype("int64")))
    previous_ts = {t: p for p, t in zip(times, times[1:], strict=False)}
    last: dict[str, tuple[int, float, list[int]]] = {}
    rows = []
    for row in snapshots.itertuples(index=False):
        if row.request is None or pd.isna(row.ts) or pd.isna(row.count):
            continue
        ts, count = int(row.ts), int(row.count)
        total_s = 0.0 if pd.isna(row.sum) else float(row.sum)
        buckets = [int(b) for b in _as_list(row.buckets)]
        upper_bounds = [float(b) for b in _as_list(row.le)]
        if len(upper_bounds) != len(buckets):
            continue  # a malformed snapshot: nothing trustworthy to difference
        before = last.get(row.request)
        last[row.request] = (count, total_s, buckets)
        if before is not None and len(before[2]) == len(buckets):
            delta_count = count - before[0]
            delta_sum = total_s - before[1]
            deltas = [now - then for now, then in zip(buckets, before[2], strict=True)]
            if delta_count < 0 or any(d < 0 for d in deltas):  # restarted: counts from zero
                delta_count, delta_sum, deltas = count, total_s, buckets
        else:
            delta_count, delta_sum, deltas = count, total_s, buckets
        if delta_count <= 0:
            continue
        prev = previous_ts.get(ts)
        rows.append(
            (
                ts,
                int(row.broker) if not pd.isna(row.broker) else None,
                row.request,
                ts - prev if prev is not None else None,
                delta_count,
                delta_sum,
                delta_sum / delta_count * 1000.0,
                _ms(histogram_quantile(0.5, upper_bounds, deltas, delta_count)),
                _ms(histogram_quantile(0.99, upper_bounds, deltas, delta_count)),
                upper_bounds,
                deltas,
            )
        )
    return pd.DataFrame(rows, columns=_INTERVAL_COLUMNS)


def cluster_intervals(intervals: pd.DataFrame, bucket_ms: int) -> pd.DataFrame:
    """One request type's intervals from all brokers, summed per `bucket_ms` time bucket
    (CLUSTER_SCHEMA columns)."""
    if intervals.empty:
        return pd.DataFrame(columns=_CLUSTER_COLUMNS)
    rows = []
    frame = intervals.assign(bucket_ts=(intervals["ts"] // bucket_ms) * bucket_ms)
    for (bucket_ts, request), group in frame.groupby(["bucket_ts", "request"], sort=True):
        upper_bounds = _as_list(group["le"].iloc[0])
        same_shape = [
            np.asarray(_as_list(d), dtype=np.int64)
            for d, le in zip(group["bucket_deltas"], group["le"], strict=True)
            if len(_as_list(le)) == len(upper_bounds)
        ]
        if not same_shape:
            continue
        counts = np.sum(same_shape, axis=0).tolist()
        total = int(group["requests"].sum())
        rows.append(
            (
                int(bucket_ts),
                request,
                int(group["broker"].nunique()),
                total,
                float(group["sum_s"].sum()) / total * 1000.0 if total else None,
                _ms(histogram_quantile(0.5, upper_bounds, counts, total)),
                _ms(histogram_quantile(0.99, upper_bounds, counts, total)),
                _ms(float(upper_bounds[-1])) if upper_bounds else None,
            )
        )
    return pd.DataFrame(rows, columns=_CLUSTER_COLUMNS)


def fetch_processing(cluster: pd.DataFrame) -> pd.DataFrame:
    """Rows of `cluster` (CLUSTER_SCHEMA columns, any bucketing) for the Fetch time spent
    processing rather than waiting: per bucket, (sum of Fetch latency - sum of its
    purgatory wait) / Fetch requests. A mean only: the two histograms cannot be
    subtracted request by request, so p50/p99 are left empty."""
    if cluster.empty or "request" not in cluster:
        return cluster.iloc[0:0]
    summary = "bucket_ts" not in cluster  # latency_summary: one bucket for the whole data
    if summary:
        cluster = cluster.assign(bucket_ts=0)
    total = cluster[cluster["request"] == FETCH]
    wait = cluster[cluster["request"].astype(str).str.startswith(FETCH_WAIT_PREFIX)]
    if total.empty or wait.empty:
        return cluster.iloc[0:0].drop(columns=["bucket_ts"] if summary else [])
    wait_sum = (wait["mean_ms"] * wait["requests"]).groupby(wait["bucket_ts"]).sum().rename("wait")
    merged = total.set_index("bucket_ts").join(wait_sum, how="inner").reset_index()
    processing = (merged["mean_ms"] * merged["requests"] - merged["wait"]).clip(lower=0)
    out = merged[total.columns].copy()
    out["request"] = FETCH_PROCESSING
    out["mean_ms"] = processing / merged["requests"]
    out["p50_ms"] = float("nan")
    out["p99_ms"] = float("nan")
    return out.drop(columns=["bucket_ts"]) if summary else out


def latency_intervals(metrics: DataFrame) -> DataFrame:
    """Per broker, request type and snapshot interval: requests, mean, p50, p99 (ms).

    Besides the request types (`request_latency_seconds`), the Fetch purgatory wait
    (`fetch_wait_seconds`) appears as requests `Fetch wait (consumer)` and
    `Fetch wait (follower)`."""
    brokers = metrics.where(F.col("broker").isNotNull())

    def histogram(column: str, name):
        exploded = brokers.select("ts", "broker", F.explode(column).alias("h"))
        return exploded.select(
            "ts",
            "broker",
            name.alias("request"),
            F.col("h.count").alias("count"),
            F.col("h.sum").alias("sum"),
            F.col("h.le").alias("le"),
            F.col("h.buckets").alias("buckets"),
        )

    wait_name = F.concat(
        F.lit(FETCH_WAIT_PREFIX + " ("), F.coalesce(F.col("h.fetcher"), F.lit("all")), F.lit(")")
    )
    series = histogram("request_latency_seconds", F.col("h.request")).unionByName(
        histogram("fetch_wait_seconds", wait_name)
    )
    return (
        series.groupBy("broker")
        .applyInPandas(broker_intervals, INTERVAL_SCHEMA)
        .withColumn("time", millis_to_time("ts"))
    )


def cluster_latency(intervals: DataFrame, bucket_ms: int = 10_000) -> DataFrame:
    """Cluster-wide latency per request type and `bucket_ms` bucket (all brokers)."""

    def per_request(frame: pd.DataFrame) -> pd.DataFrame:
        return cluster_intervals(frame, bucket_ms)

    return (
        intervals.select("ts", "broker", "request", "requests", "sum_s", "le", "bucket_deltas")
        .groupBy("request")
        .applyInPandas(per_request, CLUSTER_SCHEMA)
        .withColumn("time", millis_to_time("bucket_ts"))
    )


def latency_summary(intervals: DataFrame) -> DataFrame:
    """Per request type over the whole data: brokers, requests, mean, p50, p99 (ms)."""
    return cluster_latency(intervals, bucket_ms=2**62).drop("bucket_ts", "time")
