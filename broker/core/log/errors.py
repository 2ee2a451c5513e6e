"""The log store's exception types.

Every error the store raises on purpose derives from `LogError`, except the record-format
errors, which come from `client.protocol.records` (`RecordError`, a `ValueError`, with
`CorruptRecordError` and `InvalidRecordError`) and are re-exported here so callers can
catch everything from one place.
"""

from __future__ import annotations

from client.protocol.records import CorruptRecordError, InvalidRecordError, RecordError

__all__ = [
    "CheckpointError",
    "ConfigError",
    "CorruptRecordError",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KeylessRecordError",
    "LogDirLockedError",
    "LogError",
    "OffsetOutOfRangeError",
    "RecordError",
    "RecordTooLargeError",
    "UnexpectedAppendOffsetError",
]


class LogError(Exception):
    """Base of the log store's own errors."""


class OffsetOutOfRangeError(LogError):
    """The requested offset is below the log start offset or above the log end offset."""


class RecordTooLargeError(LogError):
    """A batch is larger than the topic's `max.message.bytes`."""


class UnexpectedAppendOffsetError(LogError):
    """A follower append does not continue the log (its first offset is below the LEO)."""


class InvalidTimestampError(LogError):
    """A record's timestamp is too far from the broker's clock
    (message.timestamp.difference.max.ms): Kafka's INVALID_TIMESTAMP."""


class CheckpointError(LogError):
    """A checkpoint file is malformed; the message names the file and the line."""


class ConfigError(LogError, ValueError):
    """An unknown topic config name or a bad value; the message says which and why."""


class InvalidConfigError(ConfigError):
    """A config Kafka refuses as a whole (INVALID_CONFIG on AlterConfigs): an unknown
    name, or values that conflict; a plain `ConfigError` is one bad value (Kafka's
    ConfigException, INVALID_REQUEST there)."""


class KeylessRecordError(InvalidRecordError):
    """A record without a key was produced to a compacted topic (Kafka rejects it with
    INVALID_RECORD: compaction keeps the newest record per key, so a keyless one has no
    place)."""


class ControlBatchError(InvalidRecordError):
    """A client sent a control batch: only the partition leader writes transaction markers
    (INVALID_RECORD, as Kafka's LogValidator)."""


class LogDirLockedError(LogError):
    """Another process (or another LogManager in this one) holds the log dir's lock."""
