"""The consumer package (being split by responsibility; for now the whole consumer and,
in `group/`, the group client).

- `consumer.py`: the consumer (positions, fetching, decoding, polling, the public API);
- `group/`: the consumer-group client (membership, coordinator, commits, assignors).
"""

from client.consumer.consumer import (
    EARLIEST,
    LATEST,
    NONE,
    CommitFailedError,
    Consumer,
    ConsumerBatch,
    ConsumerRecord,
    ConsumerStateError,
    CorruptBatchError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RebalanceInProgressError,
    open_consumer,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "NONE",
    "CommitFailedError",
    "Consumer",
    "ConsumerBatch",
    "ConsumerRecord",
    "ConsumerStateError",
    "CorruptBatchError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "RebalanceInProgressError",
    "open_consumer",
]
