"""The segmented log store (sans-IO apart from file I/O): Kafka 2.8's Log, LogSegment,
offset/time indexes, leader-epoch cache, checkpoints, LogManager and the log cleaner
(compaction: `cleaner_manager`, `cleaner`, `swap`), in small modules.

Time comes in as `now_ms`; nothing here imports trio. Record batches are stored exactly
as `client.protocol.records` lays them out; the store reads headers, not records, except
where compaction needs keys (the cleaner, and the leader's check that a compacted topic
gets keyed records).
"""

from broker.core.log.checkpoint import (
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    write_atomically,
)
from broker.core.log.cleaner import CleanerStats, CleaningJob, map_capacity_for
from broker.core.log.cleaner_manager import LogToClean, grab_filthiest_log
from broker.core.log.config import TOPIC_CONFIG_NAMES, LogConfig
from broker.core.log.errors import (
    CheckpointError,
    ConfigError,
    CorruptRecordError,
    InvalidRecordError,
    KeylessRecordError,
    LogDirLockedError,
    LogError,
    OffsetOutOfRangeError,
    RecordError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from broker.core.log.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from broker.core.log.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchData,
    Log,
    LogAppendInfo,
    LogOffsetMetadata,
    OffsetAndTimestamp,
    parse_topic_partition,
)
from broker.core.log.manager import LogManager
from broker.core.log.segment import LogSegment

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "TOPIC_CONFIG_NAMES",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "CheckpointError",
    "CleanerStats",
    "CleaningJob",
    "ConfigError",
    "CorruptRecordError",
    "EpochEntry",
    "FetchData",
    "InvalidRecordError",
    "KeylessRecordError",
    "LeaderEpochCache",
    "LeaderEpochCheckpointFile",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogDirLockedError",
    "LogError",
    "LogManager",
    "LogOffsetMetadata",
    "LogSegment",
    "LogToClean",
    "OffsetAndTimestamp",
    "OffsetCheckpointFile",
    "OffsetOutOfRangeError",
    "RecordError",
    "RecordTooLargeError",
    "UnexpectedAppendOffsetError",
    "grab_filthiest_log",
    "map_capacity_for",
    "parse_topic_partition",
    "write_atomically",
]
