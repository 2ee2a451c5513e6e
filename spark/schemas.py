"""Declared schemas of everything the analytics read: segment logs, events and metrics.

How it works: every input has a `StructType` declared here, never inferred, so a
malformed or partial JSON line yields nulls, not a different table, and the job's code
can rely on column names and types. The Arrow schemas the data source emits are derived
from the Spark ones with PySpark's own converter, so the two cannot drift apart.

- `RECORD_SCHEMA`: one row per record (`spark.read.format("tributary")`).
- `BATCH_SCHEMA`: one row per batch (the same with `headers_only=true`).
- `BROKER_EVENT_SCHEMA`: `events.jsonl` lines written by each broker's `EventLog`.
- `CONTROLLER_EVENT_SCHEMA`: `controller-events.jsonl` lines written by the controller.
- `METRICS_SCHEMA`: `metrics.jsonl` snapshots (`server_common.metrics.MetricsRegistry.snapshot`).
"""

from __future__ import annotations

from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = [
    "ARROW_BATCH_SCHEMA",
    "ARROW_RECORD_SCHEMA",
    "BATCH_SCHEMA",
    "BROKER_EVENT_SCHEMA",
    "CONTROLLER_EVENT_SCHEMA",
    "METRICS_SCHEMA",
    "RECORD_SCHEMA",
]


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, type_, True) for name, type_ in fields])


_REPLICA_COLUMNS = (
    ("broker", IntegerType()),  # meta.properties broker.id, else a broker-N dir name, else null
    ("log_dir", StringType()),  # the broker log dir the segment was found in
    ("topic", StringType()),
    ("partition", IntegerType()),
    ("segment_base_offset", LongType()),
)

RECORD_SCHEMA = _struct(
    *_REPLICA_COLUMNS,
    ("batch_base_offset", LongType()),
    ("batch_last_offset", LongType()),
    ("offset", LongType()),
    ("timestamp", LongType()),  # milliseconds since the epoch, as stored
    ("time", TimestampType()),  # the same as a timestamp (null when not representable)
    ("leader_epoch", IntegerType()),  # the batch's partition leader epoch
    ("key", BinaryType()),
    ("value", BinaryType()),
    ("headers", ArrayType(_struct(("key", StringType()), ("value", BinaryType())), True)),
    # The batch's bytes on disk shared evenly among its records (see spark/decode.py).
    ("record_size", IntegerType()),
)

BATCH_SCHEMA = _struct(
    *_REPLICA_COLUMNS,
    ("position", LongType()),  # byte position of the batch in its segment file
    ("base_offset", LongType()),
    ("last_offset", LongType()),
    ("record_count", IntegerType()),
    ("batch_size", IntegerType()),  # bytes on disk, header included
    ("first_timestamp", LongType()),
    ("first_time", TimestampType()),
    ("max_timestamp", LongType()),
    ("max_time", TimestampType()),
    ("leader_epoch", IntegerType()),
    ("codec", StringType()),  # none | gzip | snappy | lz4 | zstd | unknown
    ("timestamp_type", StringType()),  # create_time | log_append_time
    ("producer_id", LongType()),
    ("crc_valid", BooleanType()),
)

ARROW_RECORD_SCHEMA = to_arrow_schema(RECORD_SCHEMA, timezone="UTC")
ARROW_BATCH_SCHEMA = to_arrow_schema(BATCH_SCHEMA, timezone="UTC")

_INT_LIST = ArrayType(IntegerType(), True)

# broker/server.py EventLog + broker/core/replica_manager.py: common keys ts, broker, event.
BROKER_EVENT_SCHEMA = _struct(
    ("ts", LongType()),
    ("broker", IntegerType()),
    ("event", StringType()),
    ("topic", StringType()),
    ("partition", IntegerType()),
    ("leader", IntegerType()),  # became_follower
    ("leader_epoch", IntegerType()),
    ("isr", _INT_LIST),  # became_leader
    ("old_isr", _INT_LIST),  # isr_shrink / isr_expand
    ("new_isr", _INT_LIST),
    ("replicas", _INT_LIST),
    ("was_leader", BooleanType()),
    ("log_end_offset", LongType()),
    ("high_watermark", LongType()),
    ("from_offset", LongType()),  # truncation
    ("to_offset", LongType()),
    ("reason", StringType()),
    ("broker_epoch", LongType()),  # session_reestablished
    ("error", StringType()),
    # authentication_failed (broker/server.py) and authorization_denied
    # (broker/handlers/authorization_check.py): spark.security.
    ("listener", StringType()),
    ("address", StringType()),
    ("mechanism", StringType()),
    ("principal", StringType()),
    ("resource_type", StringType()),
    ("resource_name", StringType()),
    ("operation", StringType()),
    ("suppressed", LongType()),
    ("other_suppressed", LongType()),
)

# controller/event_log.py: common keys ts, controller, epoch, event.
CONTROLLER_EVENT_SCHEMA = _struct(
    ("ts", LongType()),
    ("controller", IntegerType()),
    ("epoch", IntegerType()),
    ("event", StringType()),
    ("reason", StringType()),
    ("broker", IntegerType()),  # broker_up / broker_down / broker_bounced / controlled_shutdown
    ("broker_epoch", LongType()),
    ("topic", StringType()),
    ("partition", IntegerType()),
    ("partitions", IntegerType()),  # topic_created: the partition count
    ("old_leader", IntegerType()),  # leader_change / isr_change
    ("new_leader", IntegerType()),
    ("leader_epoch", IntegerType()),
    ("old_isr", _INT_LIST),
    ("isr", _INT_LIST),
    ("unclean", BooleanType()),
    ("remaining", ArrayType(StringType(), True)),
    ("original", _INT_LIST),  # reassignment_started
    ("target", _INT_LIST),
)

_PARTITION_GAUGE = ArrayType(
    _struct(("topic", StringType()), ("partition", StringType()), ("value", DoubleType())), True
)
_PURGATORY_GAUGE = ArrayType(
    _struct(("delayed_operation", StringType()), ("value", DoubleType())), True
)
_REQUEST_COUNTER = ArrayType(_struct(("request", StringType()), ("value", DoubleType())), True)
_LATENCY = _struct(
    ("request", StringType()),
    ("count", LongType()),
    ("sum", DoubleType()),
    ("p50", DoubleType()),
    ("p99", DoubleType()),
    ("le", ArrayType(DoubleType(), True)),  # bucket upper bounds, seconds
    ("buckets", ArrayType(LongType(), True)),  # per-bucket counts, cumulative over time
)
_LATENCY_HISTOGRAM = ArrayType(_LATENCY, True)

_FETCH_WAIT_HISTOGRAM = ArrayType(
    StructType([*_LATENCY.fields, StructField("fetcher", StringType())]),
    True,
)

# broker/broker_metrics.py, by short name (MetricsRegistry.snapshot).
METRICS_SCHEMA = _struct(
    ("ts", LongType()),
    ("broker", IntegerType()),
    ("under_replicated_partitions", DoubleType()),
    ("under_min_isr_partitions", DoubleType()),
    ("offline_partitions_count", DoubleType()),
    ("leader_count", DoubleType()),
    ("partition_count", DoubleType()),
    ("isr_shrinks_total", DoubleType()),
    ("isr_expands_total", DoubleType()),
    ("failed_isr_updates_total", DoubleType()),
    ("truncations_total", DoubleType()),
    ("bytes_in_total", DoubleType()),
    ("bytes_out_total", DoubleType()),
    ("messages_in_total", DoubleType()),
    ("purgatory_size", _PURGATORY_GAUGE),
    ("purgatory_expired_total", _PURGATORY_GAUGE),
    ("log_end_offset", _PARTITION_GAUGE),
    ("high_watermark", _PARTITION_GAUGE),
    ("isr_size", _PARTITION_GAUGE),
    ("requests_total", _REQUEST_COUNTER),
    ("response_bytes_total", _REQUEST_COUNTER),
    ("request_latency_seconds", _LATENCY_HISTOGRAM),
    # The part of a Fetch's latency spent waiting in the purgatory (long poll), per fetcher
    # (consumer | follower).
    ("fetch_wait_seconds", _FETCH_WAIT_HISTOGRAM),
)
