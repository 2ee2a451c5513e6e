"""Per-topic log configuration, under Kafka's topic-level names and defaults.

How it works: `LogConfig` is a frozen dataclass whose fields are the Python spelling of
Kafka's topic configs (`segment.bytes` -> `segment_bytes`). `_SPECS` maps every Kafka name
to its field, type and allowed range; the same table validates a dataclass built directly
(`__post_init__`) and string properties parsed by `from_properties` (as they arrive from
ZooKeeper's `/config/topics/<t>` or a CreateTopics request). `TOPIC_CONFIG_NAMES` is the
public list of accepted names.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from broker.core.log.errors import ConfigError

__all__ = ["TOPIC_CONFIG_NAMES", "LogConfig"]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
_INT_MIN = -(2**31)

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
_TIMESTAMP_TYPES = (CREATE_TIME, LOG_APPEND_TIME)
_CLEANUP_POLICIES = ("compact", "delete")


class _Spec(NamedTuple):
    field: str
    kind: str  # "int" (Java int), "long", "double", "bool", "timestamp_type", "cleanup_policy"
    minimum: float | None = None
    maximum: float | None = None


# Kafka's validators (LogConfig.scala in 2.8), except segment.index.bytes: Kafka allows 0,
# which makes every index "full" at once; we ask for room for at least one entry.
_SPECS: dict[str, _Spec] = {
    "segment.bytes": _Spec("segment_bytes", "int", 14, INT_MAX),
    "segment.ms": _Spec("segment_ms", "long", 1, LONG_MAX),
    "segment.index.bytes": _Spec("segment_index_bytes", "int", 12, INT_MAX),
    "index.interval.bytes": _Spec("index_interval_bytes", "int", 0, INT_MAX),
    "retention.ms": _Spec("retention_ms", "long", -1, LONG_MAX),
    "retention.bytes": _Spec("retention_bytes", "long", -1, LONG_MAX),
    "max.message.bytes": _Spec("max_message_bytes", "int", 0, INT_MAX),
    "flush.messages": _Spec("flush_messages", "long", 0, LONG_MAX),
    "flush.ms": _Spec("flush_ms", "long", 0, LONG_MAX),
    "message.timestamp.type": _Spec("message_timestamp_type", "timestamp_type"),
    "cleanup.policy": _Spec("cleanup_policy", "cleanup_policy"),
    "delete.retention.ms": _Spec("delete_retention_ms", "long", 0, LONG_MAX),
    "min.cleanable.dirty.ratio": _Spec("min_cleanable_dirty_ratio", "double", 0, 1),
    "min.compaction.lag.ms": _Spec("min_compaction_lag_ms", "long", 0, LONG_MAX),
    "max.compaction.lag.ms": _Spec("max_compaction_lag_ms", "long", 1, LONG_MAX),
    "min.insync.replicas": _Spec("min_insync_replicas", "int", 1, INT_MAX),
    "unclean.leader.election.enable": _Spec("unclean_leader_election_enable", "bool"),
}

#: Every topic-level config name the broker accepts (CreateTopics validates against it).
TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(_SPECS)
_FIELD_TO_NAME = {spec.field: name for name, spec in _SPECS.items()}
# The range of a numeric kind where its spec gives no bound.
_KIND_BOUNDS: dict[str, tuple[float, float]] = {
    "int": (_INT_MIN, INT_MAX),
    "long": (_LONG_MIN, LONG_MAX),
    "double": (-math.inf, math.inf),
}


def _bounds(spec: _Spec) -> tuple[float, float]:
    """The allowed range of a numeric field: its spec's bounds, else its kind's."""
    lo, hi = _KIND_BOUNDS[spec.kind]
    return (
        lo if spec.minimum is None else spec.minimum,
        hi if spec.maximum is None else spec.maximum,
    )


def _parse(name: str, spec: _Spec, raw: Any) -> Any:
    """A property value (usually a string) as the field's Python value, or ConfigError."""
    text = str(raw).strip()
    if spec.kind in ("int", "long"):
        try:
            return int(text, 10)
        except ValueError:
            raise ConfigError(f"topic config {name}: {raw!r} is not an integer") from None
    if spec.kind == "double":
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"topic config {name}: {raw!r} is not a number") from None
    if spec.kind == "bool":
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"topic config {name}: {raw!r} is not true or false")
        return lowered == "true"
    if spec.kind == "timestamp_type":
        return text
    return ",".join(part.strip().lower() for part in text.split(","))  # cleanup_policy


def _check(name: str, spec: _Spec, value: Any) -> Any:
    """Validate a field value; returns it (normalised for cleanup.policy)."""
    if spec.kind in ("int", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"topic config {name}: {value!r} is not an integer")
        lo, hi = _bounds(spec)
        if not lo <= value <= hi:
            raise ConfigError(f"topic config {name}: {value} is out of range [{lo}, {hi}]")
        return value
    if spec.kind == "double":
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ConfigError(f"topic config {name}: {value!r} is not a number")
        lo, hi = _bounds(spec)
        if not lo <= value <= hi:
            raise ConfigError(f"topic config {name}: {value} is out of range [{lo}, {hi}]")
        return float(value)
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"topic config {name}: {value!r} is not a boolean")
        return value
    if spec.kind == "timestamp_type":
        if value not in _TIMESTAMP_TYPES:
            raise ConfigError(
                f"topic config {name}: {value!r} is not one of {', '.join(_TIMESTAMP_TYPES)}"
            )
        return value
    if not isinstance(value, str):
        raise ConfigError(f"topic config {name}: {value!r} is not a string")
    parts = [part.strip().lower() for part in value.split(",")]
    if not parts or any(part not in _CLEANUP_POLICIES for part in parts):
        raise ConfigError(
            f"topic config {name}: {value!r} must be a comma-separated list of "
            f"{' and '.join(_CLEANUP_POLICIES)}"
        )
    return ",".join(dict.fromkeys(parts))


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's log settings; defaults are Kafka 2.8's."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1024 * 1024 + 12  # 1048588, Kafka's default
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False

    def __post_init__(self) -> None:
        for name, spec in _SPECS.items():
            value = _check(name, spec, getattr(self, spec.field))
            object.__setattr__(self, spec.field, value)
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                f"topic config min.compaction.lag.ms {self.min_compaction_lag_ms} is above "
                f"max.compaction.lag.ms {self.max_compaction_lag_ms}"
            )

    # ------------------------------------------------------------------ derived views

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps batches with LogAppendTime."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        """Retention by time/size applies (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    # ------------------------------------------------------------------ properties

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, Any], defaults: LogConfig | None = None
    ) -> LogConfig:
        """`defaults` (or Kafka's defaults) overridden by Kafka-named `properties`.

        Raises `ConfigError` naming the key for an unknown name, a value that does not
        parse, or a value out of range.
        """
        changes: dict[str, Any] = {}
        for name, raw in properties.items():
            spec = _SPECS.get(name)
            if spec is None:
                raise ConfigError(f"unknown topic config {name!r}")
            changes[spec.field] = _parse(name, spec, raw)
        base = defaults if defaults is not None else cls()
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        """Every setting under its Kafka name, as strings (the inverse of from_properties)."""
        out: dict[str, str] = {}
        for name, spec in _SPECS.items():
            value = getattr(self, spec.field)
            out[name] = ("true" if value else "false") if spec.kind == "bool" else str(value)
        return out

    def merged(self, properties: Mapping[str, Any] | None = None, /, **fields: Any) -> LogConfig:
        """A copy with Kafka-named `properties` and/or Python-named `fields` overridden."""
        config = self.from_properties(properties, self) if properties else self
        unknown = [key for key in fields if key not in _FIELD_TO_NAME]
        if unknown:
            raise ConfigError(f"unknown LogConfig field(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(config, **fields) if fields else config
