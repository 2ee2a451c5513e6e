"""The consumer, split by responsibility as Kafka's (KafkaConsumer, SubscriptionState,
Fetcher, ConsumerCoordinator) is.

- `consumer.py`: the public `Consumer` (`assign`, `subscribe`, `seek`, `poll`,
  `poll_batches`, `commit`, offsets lookups), which wires the parts below, and
  `open_consumer`;
- `subscription.py`: the sans-IO `SubscriptionState`: the assigned partitions and each
  one's position, pending reset, buffered records and error; what `poll()` drains;
- `fetcher.py`: the `Fetcher` task: position resets (ListOffsets) and long-poll fetches
  per leader broker, one answer ahead, applied to the partitions' buffers; abandons
  fetches from a moved leader (client/inflight.py);
- `batch.py`: `ConsumerBatch` and `ConsumerRecord`, and `decode_fetched`, which checks
  the CRCs of fetched record batches and decodes them into columns;
- `errors.py`: the errors the consumer raises;
- `group/`: the consumer-group client (membership, coordinator, commits, assignors).

The names callers use are importable from here (`from client.consumer import
open_consumer, ConsumerRecord, ConsumerBatch`).
"""

from client.consumer.batch import ConsumerBatch, ConsumerRecord
from client.consumer.consumer import Consumer, open_consumer
from client.consumer.errors import (
    ConsumerStateError,
    CorruptBatchError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from client.consumer.group.membership import CommitFailedError, RebalanceInProgressError
from client.consumer.subscription import COMMITTED, EARLIEST, LATEST, NONE

__all__ = [
    "COMMITTED",
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
