"""Security events over time: failed authentications and authorization denials per minute.

How it works: the brokers write `authentication_failed` (listener, address, mechanism,
reason: no principal, the login did not succeed) and `authorization_denied` (principal,
address, resource type and name, operation, and `suppressed`/`other_suppressed`: the
identical denials the rate limit of broker/handlers/authorization_check.py did not write)
to `events.jsonl`. `security_per_minute` counts them per minute, kind, principal and
client address, each denial event weighing 1 + its suppressed counts, so the figures are
the broker's true counts even when a flood was rate-limited. All in Spark.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark.columns import millis_to_time

__all__ = [
    "AUTHENTICATION_FAILED",
    "AUTHORIZATION_DENIED",
    "MINUTE_MS",
    "UNAUTHENTICATED",
    "security_per_minute",
]

AUTHENTICATION_FAILED = "authentication_failed"
AUTHORIZATION_DENIED = "authorization_denied"
UNAUTHENTICATED = "(not authenticated)"  # the principal column of a failed login
MINUTE_MS = 60_000
RESOURCES_SHOWN = 5  # per row, the first few resources denied (sorted)


def security_per_minute(broker_events: DataFrame) -> DataFrame:
    """Columns: minute_ts, minute (timestamp), kind, principal, address, count (failures
    or denials, suppressed ones included), events (lines written), resources (up to
    RESOURCES_SHOWN `Type:name Operation` denied, sorted; empty for failed logins)."""
    security = broker_events.where(F.col("event").isin(AUTHENTICATION_FAILED, AUTHORIZATION_DENIED))
    weight = (
        F.lit(1)
        + F.coalesce(F.col("suppressed"), F.lit(0))
        + F.coalesce(F.col("other_suppressed"), F.lit(0))
    )
    resource = F.when(
        F.col("resource_type").isNotNull(),
        F.concat_ws(
            " ",
            F.concat_ws(":", F.col("resource_type"), F.col("resource_name")),
            F.col("operation"),
        ),
    )
    rows = security.select(
        (F.floor(F.col("ts") / MINUTE_MS) * MINUTE_MS).cast("long").alias("minute_ts"),
        F.col("event").alias("kind"),
        F.coalesce(F.col("principal"), F.lit(UNAUTHENTICATED)).alias("principal"),
        F.coalesce(F.col("address"), F.lit("")).alias("address"),
        weight.cast("long").alias("weight"),
        resource.alias("resource"),
    )
    grouped = rows.groupBy("minute_ts", "kind", "principal", "address").agg(
        F.sum("weight").alias("count"),
        F.count(F.lit(1)).alias("events"),
        F.array_sort(F.collect_set("resource")).alias("resources"),
    )
    return grouped.select(
        "minute_ts",
        millis_to_time("minute_ts").alias("minute"),
        "kind",
        "principal",
        "address",
        "count",
        "events",
        F.concat_ws(", ", F.slice("resources", 1, RESOURCES_SHOWN)).alias("resources"),
    )
