"""The segmented log store (sans-IO apart from file I/O): Kafka 3.x's UnifiedLog,
LocalLog and LogLoader, LogSegment, offset/time indexes, leader-epoch cache, producer
state, checkpoints, LogManager and the log cleaner, in small modules.

Time comes in as `now_ms`; nothing here imports trio. Record batches are stored exactly
as `client.protocol.records` lays them out; the store reads headers, not records, except
where compaction needs keys (the cleaner, and the leader's check that a compacted topic
gets keyed records).

Modules:
- `log.py`: `Log`, one partition's log: appends as leader and follower, reads,
  truncation, retention, the log start offset, leader epochs and producer state;
- `local_log.py`: `LocalLog`, the segment list of one partition directory: reads, rolls,
  truncation and replacement of segments; the read results (`FetchData`...);
- `loader.py`: `LogLoader`, recovery when a log opens (interrupted swaps, temporary
  files, segment and index checks, leader epochs, producer state from its snapshot);
- `validator.py`: checking an append's batches and giving them offsets (Kafka's
  LogValidator), and `LogAppendInfo`;
- `flush.py`: `LogFlusher`, the recovery point and when to fsync, and `PendingFlush`,
  the fsyncs the broker runs off its event loop;
- `retention.py`: the rules by which retention deletes the oldest segments;
- `segment.py`: `LogSegment`, one `.log` file with its two indexes;
- `index.py`: the sparse offset and time indexes;
- `leader_epoch.py`: the leader-epoch cache (KIP-101/279);
- `producer_state.py`: idempotent and transactional producers' state on one partition
  (open transactions, the LSO), a plain value;
- `producer_snapshots.py`: its `<offset>.snapshot` files;
- `txn_index.py`: the `.txnindex` of aborted transactions per segment, and how every
  append path records markers;
- `checkpoint.py`: the checkpoint files in Kafka's text format, written atomically;
- `config.py`: per-topic log configuration under Kafka's names; `config_defs.py`: every
  Kafka 2.8 topic config's type, validation and broker synonym; `errors.py`: the
  store's exceptions;
- `manager.py`: `LogManager`, every log of one log directory, its lock and checkpoints;
- `cleaner_manager.py` (which log and range to compact next), `cleaner.py` (compacting
  one log in bounded steps), `cleaner_txn.py` (which transaction markers, aborted
  batches and producers' last batches a pass keeps) and `swap.py` (putting cleaned
  segments in place crash-safely);
- `verify.py`: checking segments against their CRCs and rebuilding a damaged one (the
  scrubber's).
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
from broker.core.log.local_log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchData,
    LogOffsetMetadata,
    OffsetAndTimestamp,
    parse_topic_partition,
)
from broker.core.log.log import Log
from broker.core.log.manager import LogManager
from broker.core.log.segment import LogSegment
from broker.core.log.validator import LogAppendInfo

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
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
