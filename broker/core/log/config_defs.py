"""Every Kafka 2.8 topic config: its type, range or valid values, and broker synonym.

How it works: `TOPIC_CONFIG_DEFS` maps each topic config name to a `TopicConfigDef`:
the `LogConfig` field it sets, its kind (Kafka's ConfigDef.Type: int, long, double,
boolean, string, list), its bounds or valid strings, and the broker config that supplies
its default (Kafka's `LogConfig.TopicConfigSynonyms`, `log.retention.ms` for
`retention.ms`...). `parse_value` turns a property string into the field's Python value
as Kafka's ConfigDef parses it (trimmed; `true`/`false` in any case; integers in decimal;
lists split at commas); `check_value` validates a Python value as Kafka's validators do
(`atLeast`, `between`, `ValidString.in`, `ValidList.in`, `ApiVersionValidator`,
`ThrottledReplicaListValidator`), returning it normalised. `to_string` is the inverse
of `parse_value` (Kafka's `ConfigDef.convertToString`). Errors are `ConfigError`s that
name the config.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from broker.core.log.errors import ConfigError

__all__ = [
    "COMPRESSION_TYPES",
    "CONFIG_TYPE_IDS",
    "MESSAGE_FORMAT_VERSIONS",
    "TOPIC_CONFIG_DEFS",
    "TopicConfigDef",
    "check_value",
    "parse_value",
    "to_string",
]

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

# Kafka's ConfigDef.Type names, and the ids DescribeConfigs v3+ sends for them.
CONFIG_TYPE_IDS = {
    "unknown": 0,
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}

# BrokerCompressionCodec.brokerCompressionOptions, in Kafka's order.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
# Kafka 2.8's ApiVersion.allVersions (the message format / inter-broker versions).
MESSAGE_FORMAT_VERSIONS = (
    "0.8.0",
    "0.8.1",
    "0.8.2",
    "0.9.0",
    "0.10.0-IV0",
    "0.10.0-IV1",
    "0.10.1-IV0",
    "0.10.1-IV1",
    "0.10.1-IV2",
    "0.10.2-IV0",
    "0.11.0-IV0",
    "0.11.0-IV1",
    "0.11.0-IV2",
    "1.0-IV0",
    "1.1-IV0",
    "2.0-IV0",
    "2.0-IV1",
    "2.1-IV0",
    "2.1-IV1",
    "2.1-IV2",
    "2.2-IV0",
    "2.2-IV1",
    "2.3-IV0",
    "2.3-IV1",
    "2.4-IV0",
    "2.4-IV1",
    "2.5-IV0",
    "2.6-IV0",
    "2.7-IV0",
    "2.7-IV1",
    "2.7-IV2",
    "2.8-IV0",
    "2.8-IV1",
)
LATEST_MESSAGE_FORMAT_VERSION = MESSAGE_FORMAT_VERSIONS[-1]
# Full versions plus their short forms ("2.8", "0.10.0"), as ApiVersion's versionMap.
_VERSION_KEYS = frozenset(MESSAGE_FORMAT_VERSIONS) | {
    v.split("-", 1)[0] for v in MESSAGE_FORMAT_VERSIONS
}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


class TopicConfigDef(NamedTuple):
    field: str
    kind: str  # "int", "long", "double", "boolean", "string", "list"
    synonym: str  # the broker config supplying the default ("" for none)
    minimum: float | None = None
    maximum: float | None = None
    valid: tuple[str, ...] | None = None  # valid strings (string), valid items (list)
    validator: str | None = None  # "version" or "throttled_replicas"


def _d(field: str, kind: str, synonym: str, lo=None, hi=None, valid=None, validator=None):
    return TopicConfigDef(field, kind, synonym, lo, hi, valid, validator)


# LogConfig.scala's configDef in 2.8, in its order. Except segment.index.bytes: Kafka
# allows 0, which makes every index "full" at once; we ask for room for one entry (12).
TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    "segment.bytes": _d("segment_bytes", "int", "log.segment.bytes", 14, INT_MAX),
    "segment.ms": _d("segment_ms", "long", "log.roll.ms", 1),
    "segment.jitter.ms": _d("segment_jitter_ms", "long", "log.roll.jitter.ms", 0),
    "segment.index.bytes": _d("segment_index_bytes", "int", "log.index.size.max.bytes", 12),
    "flush.messages": _d("flush_messages", "long", "log.flush.interval.messages", 0),
    "flush.ms": _d("flush_ms", "long", "log.flush.interval.ms", 0),
    "retention.bytes": _d("retention_bytes", "long", "log.retention.bytes"),
    "retention.ms": _d("retention_ms", "long", "log.retention.ms", -1),
    "max.message.bytes": _d("max_message_bytes", "int", "message.max.bytes", 0),
    "index.interval.bytes": _d("index_interval_bytes", "int", "log.index.interval.bytes", 0),
    "delete.retention.ms": _d("delete_retention_ms", "long", "log.cleaner.delete.retention.ms", 0),
    "min.compaction.lag.ms": _d(
        "min_compaction_lag_ms", "long", "log.cleaner.min.compaction.lag.ms", 0
    ),
    "max.compaction.lag.ms": _d(
        "max_compaction_lag_ms", "long", "log.cleaner.max.compaction.lag.ms", 1
    ),
    "file.delete.delay.ms": _d("file_delete_delay_ms", "long", "log.segment.delete.delay.ms", 0),
    "min.cleanable.dirty.ratio": _d(
        "min_cleanable_dirty_ratio", "double", "log.cleaner.min.cleanable.ratio", 0, 1
    ),
    "cleanup.policy": _d("cleanup_policy", "list", "log.cleanup.policy", valid=CLEANUP_POLICIES),
    "unclean.leader.election.enable": _d(
        "unclean_leader_election_enable", "boolean", "unclean.leader.election.enable"
    ),
    "min.insync.replicas": _d("min_insync_replicas", "int", "min.insync.replicas", 1),
    "compression.type": _d(
        "compression_type", "string", "compression.type", valid=COMPRESSION_TYPES
    ),
    "preallocate": _d("preallocate", "boolean", "log.preallocate"),
    "message.format.version": _d(
        "message_format_version",
        "string",
        "log.message.format.version",
        validator="version",
    ),
    "message.timestamp.type": _d(
        "message_timestamp_type", "string", "log.message.timestamp.type", valid=TIMESTAMP_TYPES
    ),
    "message.timestamp.difference.max.ms": _d(
        "message_timestamp_difference_max_ms",
        "long",
        "log.message.timestamp.difference.max.ms",
        0,
    ),
    "leader.replication.throttled.replicas": _d(
        "leader_replication_throttled_replicas",
        "list",
        "",
        validator="throttled_replicas",
    ),
    "follower.replication.throttled.replicas": _d(
        "follower_replication_throttled_replicas",
        "list",
        "",
        validator="throttled_replicas",
    ),
    "message.downconversion.enable": _d(
        "message_downconversion_enable", "boolean", "log.message.downconversion.enable"
    ),
}

_KIND_BOUNDS: dict[str, tuple[float, float]] = {
    "int": (INT_MIN, INT_MAX),
    "long": (LONG_MIN, LONG_MAX),
    "double": (-math.inf, math.inf),
}


def _bounds(spec: TopicConfigDef) -> tuple[float, float]:
    lo, hi = _KIND_BOUNDS[spec.kind]
    return (
        lo if spec.minimum is None else spec.minimum,
        hi if spec.maximum is None else spec.maximum,
    )


def parse_value(name: str, spec: TopicConfigDef, raw: Any) -> Any:
    """A property value (usually a string) as the field's Python value, or ConfigError.
    Lists stay strings (comma-joined, items trimmed); `check_value` validates them."""
    text = str(raw).strip()
    if spec.kind in ("int", "long"):
        if not _INTEGER.fullmatch(text):
            raise ConfigError(f"topic config {name}: {raw!r} is not an integer")
        return int(text, 10)
    if spec.kind == "double":
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"topic config {name}: {raw!r} is not a number") from None
    if spec.kind == "boolean":
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"topic config {name}: {raw!r} is not true or false")
        return lowered == "true"
    if spec.kind == "list":
        return ",".join(part.strip() for part in text.split(",")) if text else ""
    return text


def _check_list(name: str, spec: TopicConfigDef, value: str) -> str:
    items = [part.strip() for part in value.split(",")] if value.strip() else []
    if spec.validator == "throttled_replicas":
        if not ("".join(items) == "*" or all(_THROTTLED_REPLICA.fullmatch(i) for i in items)):
            raise ConfigError(
                f"topic config {name}: {value!r} must be the literal '*' or a list of replicas "
                "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )
        return ",".join(items)
    assert spec.valid is not None
    items = [i.lower() for i in items]  # cleanup.policy: Kafka compares lowercased
    if not items or any(item not in spec.valid for item in items):
        raise ConfigError(
            f"topic config {name}: {value!r} must be a comma-separated list of "
            f"{' and '.join(spec.valid)}"
        )
    return ",".join(dict.fromkeys(items))


def check_value(name: str, spec: TopicConfigDef, value: Any) -> Any:
    """Validate a field value as Kafka's validator does; returns it normalised."""
    kind = spec.kind
    if kind in ("int", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"topic config {name}: {value!r} is not an integer")
        lo, hi = _bounds(spec)
        if not lo <= value <= hi:
            raise ConfigError(f"topic config {name}: {value} is out of range [{lo}, {hi}]")
        return value
    if kind == "double":
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ConfigError(f"topic config {name}: {value!r} is not a number")
        lo, hi = _bounds(spec)
        if not lo <= value <= hi:
            raise ConfigError(f"topic config {name}: {value} is out of range [{lo}, {hi}]")
        return float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ConfigError(f"topic config {name}: {value!r} is not a boolean")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"topic config {name}: {value!r} is not a string")
    if kind == "list":
        return _check_list(name, spec, value)
    if spec.validator == "version":
        parts = value.split(".")
        key = ".".join(parts[: 3 if value.startswith("0.") else 2])
        if key not in _VERSION_KEYS:
            raise ConfigError(
                f"topic config {name}: version {value!r} is not a valid version (one of "
                f"{', '.join(MESSAGE_FORMAT_VERSIONS)})"
            )
        return value
    if spec.valid is not None and value not in spec.valid:
        raise ConfigError(f"topic config {name}: {value!r} is not one of {', '.join(spec.valid)}")
    return value


def to_string(spec: TopicConfigDef, value: Any) -> str:
    """A field value as its property string (Kafka's ConfigDef.convertToString)."""
    if spec.kind == "boolean":
        return "true" if value else "false"
    return str(value)
