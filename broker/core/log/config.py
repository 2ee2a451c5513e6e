"""Per-topic log configuration, under Kafka's topic-level names and defaults.

How it works: `LogConfig` is a frozen dataclass whose fields are the Python spelling of
Kafka 2.8's topic configs (`segment.bytes` -> `segment_bytes`), every one of them.
`config_defs.TOPIC_CONFIG_DEFS` maps each Kafka name to its field, type, allowed range or
values and broker synonym; the same table validates a dataclass built directly
(`__post_init__`) and string properties parsed by `from_properties` (as they arrive from
ZooKeeper's `/config/topics/<t>`, a CreateTopics or an AlterConfigs request).
`TOPIC_CONFIG_NAMES` is the public list of accepted names. `random_segment_jitter` and
`max_segment_ms` are Kafka's derived values for rolling segments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.core.log.config_defs import (
    INT_MAX,
    LATEST_MESSAGE_FORMAT_VERSION,
    LONG_MAX,
    TOPIC_CONFIG_DEFS,
    check_value,
    parse_value,
    to_string,
)
from broker.core.log.errors import ConfigError, InvalidConfigError

__all__ = ["INT_MAX", "LONG_MAX", "TOPIC_CONFIG_NAMES", "LogConfig"]

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

_SPECS = TOPIC_CONFIG_DEFS
#: Every topic-level config name the broker accepts (CreateTopics validates against it).
TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(_SPECS)
_FIELD_TO_NAME = {spec.field: name for name, spec in _SPECS.items()}


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
    segment_jitter_ms: int = 0
    file_delete_delay_ms: int = 60_000
    compression_type: str = "producer"
    preallocate: bool = False
    message_format_version: str = LATEST_MESSAGE_FORMAT_VERSION
    message_timestamp_difference_max_ms: int = LONG_MAX
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    message_downconversion_enable: bool = True

    def __post_init__(self) -> None:
        for name, spec in _SPECS.items():
            value = check_value(name, spec, getattr(self, spec.field))
            object.__setattr__(self, spec.field, value)
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
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

    @property
    def recompression_codec(self) -> str | None:
        """The codec the leader recompresses batches to (`compression.type`), None for
        `producer` (batches are kept as the producer compressed them)."""
        return None if self.compression_type == "producer" else self.compression_type

    @property
    def max_segment_ms(self) -> int:
        """How old a segment may get before a roll (Kafka's maxSegmentMs): `segment.ms`,
        or `max.compaction.lag.ms` when lower on a compacted topic."""
        if self.compact_enabled and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def random_segment_jitter(self, random_int: Callable[[], int]) -> int:
        """A new segment's roll jitter (Kafka's randomSegmentJitter): 0 without
        `segment.jitter.ms`, else `random_int()` (a non-negative int) modulo the smaller of
        `segment.jitter.ms` and `segment.ms`."""
        if self.segment_jitter_ms == 0:
            return 0
        return abs(random_int()) % min(self.segment_jitter_ms, self.segment_ms)

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
                raise InvalidConfigError(f"unknown topic config {name!r}")
            changes[spec.field] = parse_value(name, spec, raw)
        base = defaults if defaults is not None else cls()
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        """Every setting under its Kafka name, as strings (the inverse of from_properties)."""
        out: dict[str, str] = {}
        for name, spec in _SPECS.items():
            out[name] = to_string(spec, getattr(self, spec.field))
        return out

    def merged(self, properties: Mapping[str, Any] | None = None, /, **fields: Any) -> LogConfig:
        """A copy with Kafka-named `properties` and/or Python-named `fields` overridden."""
        config = self.from_properties(properties, self) if properties else self
        unknown = [key for key in fields if key not in _FIELD_TO_NAME]
        if unknown:
            raise ConfigError(f"unknown LogConfig field(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(config, **fields) if fields else config
